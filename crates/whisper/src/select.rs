//! Token selection inside the decoder graphs: the logits never leave the device.
//!
//! From the last position's logits `[1, V]` the graph computes the next token and its
//! log-probability; a run reads back those 8 bytes, never the vocabulary-sized logits.
//! Whisper's logit rules are expressed as id ranges and flags that the host derives from the
//! tokens so far and passes as runtime scalars ([`Rules`]):
//! - always banned: the model's `suppress_tokens` (a constant mask);
//! - up to [`RANGES`] id ranges banned this step (timestamp pairing, monotonic timestamps,
//!   text before the first timestamp, the max initial timestamp);
//! - the blank ids banned at the first sampled step (`suppress_blank`);
//! - the timestamp rule, which needs the logits themselves: when the probability mass of all
//!   timestamps exceeds that of the most likely text token, text is banned.
//!
//! The choice is `argmax(x · inv_temperature + noise)` (first index on ties) over the masked
//! logits `x`: greedy decoding passes 1 and zeros; sampling at temperature `t` passes `1/t`
//! and Gumbel noise drawn by the host, which draws from `softmax(x / t)` (the Gumbel-max
//! trick). One graph thus serves both, at the cost of uploading the noise every step.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::layers::{Builder, MASKED, f32_type};
use susurrus_core::ir::NodeId;
use susurrus_core::ops::CmpKind;
use susurrus_core::tensor::Tensor;

/// Id ranges a step can ban besides the constant mask.
pub const RANGES: usize = 3;
/// Output: the chosen token id `[1]` (u32).
pub const TOKEN: &str = "token";
/// Output: the chosen token's log-probability `[1, 1]`.
pub const LOGPROB: &str = "logprob";
/// Input: `1 / temperature` as `[1, 1]` (1 when greedy).
pub const INV_TEMPERATURE: &str = "inv_temperature";
/// Input: Gumbel noise `[1, V]` (zeros when greedy).
pub const NOISE: &str = "noise";

/// What a graph's token selection knows when it is built.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// Ids never to choose (the model's suppress list, `<|notimestamps|>`, ...).
    pub suppress: Vec<u32>,
    /// Ids banned at the first sampled step when `suppress_blank` is on.
    pub blank: Vec<u32>,
    /// The first timestamp id: ids from here on are timestamps.
    pub timestamp_begin: u32,
}

/// The per-step rules, passed as runtime scalars.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rules {
    /// Half-open id ranges `[lo, hi)` banned this step (at most [`RANGES`]).
    pub banned: Vec<(u32, u32)>,
    /// Ban the blank ids.
    pub blank: bool,
    /// Apply the timestamp-probability rule.
    pub timestamp_rule: bool,
}

impl Rules {
    /// The rules as the selection's runtime scalars.
    pub fn scalars(&self, out: &mut HashMap<String, u32>) -> Result<()> {
        if self.banned.len() > RANGES {
            return Err(Error::bad_argument(format!("{} banned id ranges, at most {RANGES}", self.banned.len())));
        }
        for k in 0..RANGES {
            let (lo, hi) = self.banned.get(k).copied().unwrap_or((0, 0));
            out.insert(range_scalar(k, "lo"), lo);
            out.insert(range_scalar(k, "hi"), hi);
        }
        out.insert("ban_blank".into(), self.blank as u32);
        out.insert("timestamp_rule".into(), self.timestamp_rule as u32);
        Ok(())
    }
}

fn range_scalar(k: usize, end: &str) -> String {
    format!("ban{k}_{end}")
}

/// A u32 `[1, V]` mask constant, 1 at `ids`.
fn id_mask(b: &mut Builder, vocab: usize, ids: &[u32]) -> Result<NodeId> {
    let mut mask = vec![0u32; vocab];
    for &id in ids {
        let slot = mask
            .get_mut(id as usize)
            .ok_or_else(|| Error::bad_argument(format!("token id {id} is outside the vocabulary of {vocab}")))?;
        *slot = 1;
    }
    Ok(b.g.constant(Tensor::u32([1, vocab], mask)?))
}

/// `max(x)` and `sum(exp(x - max))` over the last axis of `x [1, n]`, each `[1, 1]`: the
/// log-sum-exp is `log(sum) + max`.
fn sum_exp(b: &mut Builder, x: NodeId) -> Result<(NodeId, NodeId)> {
    let m = b.g.reduce_max(x, 1, true)?;
    let shifted = b.g.sub(x, m)?;
    let e = b.g.exp(shifted)?;
    Ok((m, b.g.reduce_sum(e, 1, true)?))
}

/// `log(sum(exp(x)))` over the last axis of `x [1, n]`, as `[1, 1]`.
fn log_sum_exp(b: &mut Builder, x: NodeId) -> Result<NodeId> {
    let (m, s) = sum_exp(b, x)?;
    let l = b.g.log(s)?;
    Ok(b.g.add(l, m)?)
}

/// Adds token selection for `logits [1, V]` to the graph and its [`TOKEN`] and [`LOGPROB`]
/// outputs.
///
/// Written for few dispatches on a GPU (a decoder step is short, and every kernel launch
/// counts): each ban is a `where` on the logits whose condition is float arithmetic on 0/1
/// values (comparisons of float ids with the range ends, the flags cast to f32) compared with
/// 0, so the elementwise fusion takes the whole chain into a few kernels (as many as its input
/// limit allows). Ids are compared as f32, exact for every vocabulary (below 2^24 ids).
pub(crate) fn select_token(b: &mut Builder, logits: NodeId, sel: &Selection) -> Result<()> {
    let vocab = b.g.ty(logits).shape.dims()[1];
    let ts = sel.timestamp_begin as usize;
    if ts == 0 || ts >= vocab {
        return Err(Error::bad_argument(format!("timestamp begin {ts} is outside the vocabulary of {vocab}")));
    }
    let ids = b.iota(&[1, vocab])?;
    let float_ids = b.g.constant(Tensor::f32([1, vocab], (0..vocab).map(|i| i as f32).collect())?);
    let masked = b.f32_const(MASKED);
    let zero = b.f32_const(0.0);
    let suppress = id_mask(b, vocab, &sel.suppress)?;
    let mut x = b.g.select(suppress, masked, logits)?;
    for k in 0..RANGES {
        let lo = b.g.scalar(&range_scalar(k, "lo"));
        let hi = b.g.scalar(&range_scalar(k, "hi"));
        let (lo, hi) = (b.g.read_scalar(lo)?, b.g.read_scalar(hi)?);
        let (lo, hi) = (b.widen(lo)?, b.widen(hi)?);
        let from_lo = b.g.compare(CmpKind::Ge, float_ids, lo)?;
        let below_hi = b.g.compare(CmpKind::Lt, float_ids, hi)?;
        let (from_lo, below_hi) = (b.widen(from_lo)?, b.widen(below_hi)?);
        let inside = b.g.mul(from_lo, below_hi)?;
        let inside = b.g.compare(CmpKind::Gt, inside, zero)?;
        x = b.g.select(inside, masked, x)?;
    }
    let blank_flag = b.g.scalar("ban_blank");
    let blank_flag = b.g.read_scalar(blank_flag)?;
    let blank_flag = b.widen(blank_flag)?;
    let blank = id_mask(b, vocab, &sel.blank)?;
    let blank = b.widen(blank)?;
    let blank = b.g.mul(blank, blank_flag)?;
    let blank = b.g.compare(CmpKind::Gt, blank, zero)?;
    let x = b.g.select(blank, masked, x)?;

    // The timestamp rule: text is banned when the log-probability mass of the timestamps
    // exceeds the best text token's. Both sides are log-probabilities of the same softmax, so
    // its normaliser cancels: the rule compares log-sum-exp(timestamps) with max(text).
    let ts_part = b.g.slice(x, 1, ts, vocab)?;
    let ts_mass = log_sum_exp(b, ts_part)?;
    let text_part = b.g.slice(x, 1, 0, ts)?;
    let text_best = b.g.reduce_max(text_part, 1, true)?;
    let wins = b.g.compare(CmpKind::Gt, ts_mass, text_best)?;
    let rule_flag = b.g.scalar("timestamp_rule");
    let rule_flag = b.g.read_scalar(rule_flag)?;
    let ts_begin = b.g.constant(Tensor::u32([1, 1], vec![sel.timestamp_begin])?);
    let is_text = b.g.compare(CmpKind::Lt, ids, ts_begin)?;
    let (is_text, wins, rule_flag) = (b.widen(is_text)?, b.widen(wins)?, b.widen(rule_flag)?);
    let text_loses = b.g.mul(is_text, wins)?;
    let text_loses = b.g.mul(text_loses, rule_flag)?;
    let text_loses = b.g.compare(CmpKind::Gt, text_loses, zero)?;
    let x = b.g.select(text_loses, masked, x)?;

    let inv_t = b.g.input(INV_TEMPERATURE, f32_type(&[1, 1]))?;
    let noise = b.g.input(NOISE, f32_type(&[1, vocab]))?;
    let scaled = b.g.mul(x, inv_t)?;
    let scores = b.g.add(scaled, noise)?;
    let token = b.g.argmax(scores, 1)?;
    b.g.output(TOKEN, token)?;

    // log_softmax(x)[token] = x[token] - log-sum-exp(x), on the chosen value only.
    let (m, s) = sum_exp(b, x)?;
    let column = b.g.reshape(x, [vocab, 1])?;
    let chosen = b.g.gather(column, token)?;
    let l = b.g.log(s)?;
    let lse = b.g.add(l, m)?;
    let chosen = b.g.sub(chosen, lse)?;
    b.g.output(LOGPROB, chosen)?;
    Ok(())
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::layers::ModelWeights;
    use crate::weights::testing::small_config;
    use susurrus_core::exec::Backend;
    use susurrus_core::exec::cpu::CpuBackend;
    use susurrus_core::exec::wgpu::{WgpuBackend, WgpuOptions};

    const V: usize = 40;
    const TB: u32 = 30;

    fn selection() -> Selection {
        Selection { suppress: vec![1, 5], blank: vec![3, 29], timestamp_begin: TB }
    }

    /// The rules written out on the host in f64, independently of the graph.
    fn reference(logits: &[f32], rules: &Rules, inv_t: f32, noise: &[f32]) -> (u32, f32) {
        let sel = selection();
        let mut x: Vec<f64> = logits.iter().map(|&v| v as f64).collect();
        let ban = |x: &mut Vec<f64>, i: usize| x[i] = f64::NEG_INFINITY;
        for &i in &sel.suppress {
            ban(&mut x, i as usize);
        }
        for &(lo, hi) in &rules.banned {
            for i in lo..hi {
                ban(&mut x, i as usize);
            }
        }
        if rules.blank {
            for &i in &sel.blank {
                ban(&mut x, i as usize);
            }
        }
        let lse = |v: &[f64]| {
            let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + v.iter().map(|a| (a - m).exp()).sum::<f64>().ln()
        };
        if rules.timestamp_rule {
            let total = lse(&x);
            let ts = lse(&x[TB as usize..]) - total;
            let text = x[..TB as usize].iter().cloned().fold(f64::NEG_INFINITY, f64::max) - total;
            if ts > text {
                for i in 0..TB as usize {
                    ban(&mut x, i);
                }
            }
        }
        let scores: Vec<f64> = x.iter().zip(noise).map(|(v, n)| v * inv_t as f64 + *n as f64).collect();
        let best = (0..V).fold(0, |b, i| if scores[i] > scores[b] { i } else { b });
        (best as u32, (x[best] - lse(&x)) as f32)
    }

    fn check(backend: &dyn Backend) {
        let model = ModelWeights { config: small_config(), weights: Default::default() };
        let mut b = Builder::new("select", &model);
        let logits = b.g.input("logits", f32_type(&[1, V])).unwrap();
        select_token(&mut b, logits, &selection()).unwrap();
        let mut g = b.g;
        susurrus_core::passes::optimize(&mut g).unwrap();
        let plan = susurrus_core::plan::plan(g).unwrap();
        let mut exe = pollster::block_on(backend.compile(&plan, &Default::default())).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        let mut rule_hits = 0;
        for case in 0..40 {
            let values: Vec<f32> = (0..V).map(|_| rng.random_range(-4.0..4.0)).collect();
            let ranges = rng.random_range(0..=RANGES);
            let banned = (0..ranges)
                .map(|_| {
                    let lo = rng.random_range(0..V as u32);
                    (lo, rng.random_range(lo..=(lo + 12).min(V as u32)))
                })
                .filter(|&(lo, hi)| !(lo == 0 && hi as usize == V))
                .collect();
            let rules = Rules { banned, blank: rng.random(), timestamp_rule: rng.random() };
            let (inv_t, noise): (f32, Vec<f32>) = if case % 3 == 0 {
                (1.0 / 0.7, (0..V).map(|_| rng.random_range(-1.0..3.0)).collect())
            } else {
                (1.0, vec![0.0; V])
            };
            let want = reference(&values, &rules, inv_t, &noise);
            let inputs = std::collections::HashMap::from([
                ("logits".to_string(), Tensor::f32([1, V], values.clone()).unwrap()),
                (INV_TEMPERATURE.to_string(), Tensor::f32([1, 1], vec![inv_t]).unwrap()),
                (NOISE.to_string(), Tensor::f32([1, V], noise.clone()).unwrap()),
            ]);
            let mut scalars = HashMap::new();
            rules.scalars(&mut scalars).unwrap();
            let out = pollster::block_on(exe.run(&inputs, &scalars, &[TOKEN, LOGPROB])).unwrap();
            let token = out[TOKEN].as_u32().unwrap()[0];
            let logprob = out[LOGPROB].to_f32()[0];
            assert_eq!(token, want.0, "{} case {case}: {rules:?}", backend.name());
            assert!((logprob - want.1).abs() < 1e-4, "{} case {case}: logprob {logprob} vs {}", backend.name(), want.1);
            rule_hits += usize::from(rules.timestamp_rule && want.0 >= TB);
        }
        assert!(rule_hits > 3, "the timestamp rule decided too few cases ({rule_hits})");
    }

    #[test]
    fn cpu_selection_follows_the_rules() {
        check(&CpuBackend::new());
    }

    #[test]
    fn wgpu_selection_follows_the_rules() {
        check(&pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())).unwrap());
    }
}
