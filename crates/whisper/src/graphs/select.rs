//! Token selection inside the decoder graphs: the logits never leave the device.
//!
//! From the last position's logits `[1, V]` the graph computes the next token and its
//! log-probability; a run reads back those 8 bytes, never the vocabulary-sized logits.
//! Whisper's logit rules, as the reference decoder applies them (CTranslate2's Whisper
//! `generate`, as faster-whisper calls it):
//! - always banned: the model's `suppress_tokens` (a constant mask);
//! - at the first step ([`Bans::First`], prefill graphs), id ranges and a flag the host
//!   passes as runtime scalars ([`Rules`]): text before the first timestamp, the max initial
//!   timestamp, the blank ids (`suppress_blank`), a language detection's non-language ids;
//! - at every later step ([`Bans::History`], the step graph), the timestamp rules, computed
//!   on the device from the last two tokens and the latest timestamp so far: timestamps in
//!   pairs and never decreasing, and text banned when all timestamps together are more likely
//!   than the best text token. Nothing of them comes from the host, so a step's chosen token
//!   can feed the next step without a round trip (the program chains steps).
//!
//! The choice is `argmax(x · inv_temperature + noise)` (first index on ties) over the masked
//! logits `x`: greedy decoding passes 1 and zeros; sampling at temperature `t` passes `1/t`
//! and Gumbel noise drawn by the host, which draws from `softmax(x / t)` (the Gumbel-max
//! trick). One graph thus serves both, at the cost of uploading the noise every step.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::graphs::layers::{Builder, MASKED, f32_type};
use susurrus_core::ir::NodeId;
use susurrus_core::ops::CmpKind;
use susurrus_core::tensor::Tensor;

/// Id ranges the first step can ban besides the constant mask.
pub const RANGES: usize = 2;
/// Output: the chosen token id `[1]` (u32).
pub const TOKEN: &str = "token";
/// Output: the chosen token's log-probability `[1, 1]`.
pub const LOGPROB: &str = "logprob";
/// Input: `1 / temperature` as `[1, 1]` (1 when greedy).
pub const INV_TEMPERATURE: &str = "inv_temperature";
/// Input: Gumbel noise `[1, V]` (zeros when greedy).
pub const NOISE: &str = "noise";
/// Step graphs' input: the token before the step's input token `[1]` (u32; the input token
/// itself after a window's first token).
pub const PREVIOUS: &str = "previous";
/// Step graphs' input: the latest timestamp id among the window's tokens so far, as f32 `[1]`
/// (ids are exact in f32), or `<|notimestamps|>`'s id before any.
pub const LATEST: &str = "latest";
/// Step graphs' output: [`LATEST`] after the chosen token, what the next step reads.
pub const LATEST_NEXT: &str = "latest_next";
/// Step graphs' runtime scalar: 1 when the transcription has timestamps (their rules apply).
pub const TIMESTAMPS: &str = "timestamps";
/// Beam graphs' output: the best candidates' flat indices `beam * V + token`, best first,
/// `[1, k]` (u32).
pub const CANDIDATES: &str = "candidates";
/// Beam graphs' output: the candidates' cumulative log-probabilities `[k, 1]`.
pub const CANDIDATE_SCORES: &str = "candidate_scores";
/// The beam step's input: each beam's cumulative log-probability `[B, 1]`.
pub const SCORES: &str = "scores";
/// Input of graphs built with [`Selection::penalties`], `[R, V]`: per row and token, 1
/// where the token is in the row's sequence so far (the repetition penalty applies), 2
/// where choosing it would repeat an n-gram (banned), else 0.
pub const TOKEN_PENALTIES: &str = "token_penalties";
/// Input of graphs built with [`Selection::penalties`]: the repetition penalty `[1, 1]`.
pub const REPETITION_PENALTY: &str = "repetition_penalty";

/// What a graph's token selection knows when it is built.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// Ids never to choose (the model's suppress list, `<|notimestamps|>`, ...).
    pub suppress: Vec<u32>,
    /// Ids banned at the first sampled step when `suppress_blank` is on.
    pub blank: Vec<u32>,
    /// The first timestamp id: ids from here on are timestamps.
    pub timestamp_begin: u32,
    /// `<|endoftext|>`: ids below it are text.
    pub end_of_text: u32,
    /// `<|notimestamps|>`, the id just before the timestamps' range the rules ban from.
    pub no_timestamps: u32,
    /// The graphs take [`TOKEN_PENALTIES`] and [`REPETITION_PENALTY`] (the reference's
    /// `repetition_penalty` and `no_repeat_ngram_size`, which depend on each sequence so far).
    pub penalties: bool,
}

/// The first step's rules, passed as runtime scalars.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rules {
    /// Half-open id ranges `[lo, hi)` banned (at most [`RANGES`]).
    pub banned: Vec<(u32, u32)>,
    /// Ban the blank ids.
    pub blank: bool,
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
        Ok(())
    }
}

/// Where a graph's bans come from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Bans {
    /// The first step's [`Rules`], as runtime scalars.
    First,
    /// The timestamp rules after `last` (the step's input token `[1]`, u32), `previous`
    /// ([`PREVIOUS`]) and `latest` ([`LATEST`]), when runtime scalar [`TIMESTAMPS`] is set.
    History { last: NodeId, previous: NodeId, latest: NodeId },
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

/// `max(x)` and `sum(exp(x - max))` over the last axis of `x [R, n]`, each `[R, 1]`: the
/// log-sum-exp is `log(sum) + max`.
fn sum_exp(b: &mut Builder, x: NodeId) -> Result<(NodeId, NodeId)> {
    let m = b.g.reduce_max(x, 1, true)?;
    let shifted = b.g.sub(x, m)?;
    let e = b.g.exp(shifted)?;
    Ok((m, b.g.reduce_sum(e, 1, true)?))
}

/// `log(sum(exp(x)))` over the last axis of `x [R, n]`, as `[R, 1]`.
fn log_sum_exp(b: &mut Builder, x: NodeId) -> Result<NodeId> {
    let (m, s) = sum_exp(b, x)?;
    let l = b.g.log(s)?;
    Ok(b.g.add(l, m)?)
}

/// A runtime scalar as an f32 value `[1]`.
fn scalar_f32(b: &mut Builder, name: &str) -> Result<NodeId> {
    let s = b.g.scalar(name);
    let s = b.g.read_scalar(s)?;
    b.widen(s)
}

/// `x` with the ids in `[lo, hi)` masked (f32 bounds, broadcast against the f32 ids).
fn ban_range(b: &mut Builder, x: NodeId, float_ids: NodeId, lo: NodeId, hi: NodeId) -> Result<NodeId> {
    let from_lo = b.g.compare(CmpKind::Ge, float_ids, lo)?;
    let below_hi = b.g.compare(CmpKind::Lt, float_ids, hi)?;
    let (from_lo, below_hi) = (b.widen(from_lo)?, b.widen(below_hi)?);
    let inside = b.g.mul(from_lo, below_hi)?;
    let zero = b.f32_const(0.0);
    let inside = b.g.compare(CmpKind::Gt, inside, zero)?;
    let masked = b.f32_const(MASKED);
    Ok(b.g.select(inside, masked, x)?)
}

/// The first step's bans: [`RANGES`] ranges and the blank ids, from runtime scalars.
fn first_bans(b: &mut Builder, mut x: NodeId, float_ids: NodeId, sel: &Selection) -> Result<NodeId> {
    let vocab = b.g.ty(x).shape.dims()[1];
    for k in 0..RANGES {
        let lo = scalar_f32(b, &range_scalar(k, "lo"))?;
        let hi = scalar_f32(b, &range_scalar(k, "hi"))?;
        x = ban_range(b, x, float_ids, lo, hi)?;
    }
    let blank_flag = scalar_f32(b, "ban_blank")?;
    let blank = id_mask(b, vocab, &sel.blank)?;
    let blank = b.widen(blank)?;
    let blank = b.g.mul(blank, blank_flag)?;
    let zero = b.f32_const(0.0);
    let blank = b.g.compare(CmpKind::Gt, blank, zero)?;
    let masked = b.f32_const(MASKED);
    Ok(b.g.select(blank, masked, x)?)
}

/// The timestamp rules after the tokens so far, as f32 arithmetic on one-element values (the
/// elementwise fusion recomputes them inside the kernels that read them):
/// - the last token a timestamp and the one before too (a closed pair): no timestamp next;
/// - the last a timestamp after text (the segment's end): no text, no earlier timestamp;
/// - the last text: no timestamp up to the latest one.
///
/// The first two always ban `<|notimestamps|>` with them. Returns the masked logits and the
/// flag `[1]` (1.0 / 0.0) saying whether the timestamp-probability rule applies (all but
/// after a closed pair).
fn history_bans(
    b: &mut Builder,
    x: NodeId,
    float_ids: NodeId,
    sel: &Selection,
    (last, previous, latest): (NodeId, NodeId, NodeId),
) -> Result<(NodeId, NodeId)> {
    let vocab = b.g.ty(x).shape.dims()[1];
    let on = scalar_f32(b, TIMESTAMPS)?;
    let (last, previous) = (b.widen(last)?, b.widen(previous)?);
    let begin = b.f32_const(sel.timestamp_begin as f32);
    let last_ts = b.g.compare(CmpKind::Ge, last, begin)?;
    let previous_ts = b.g.compare(CmpKind::Ge, previous, begin)?;
    let (last_ts, previous_ts) = (b.widen(last_ts)?, b.widen(previous_ts)?);
    let pair = b.g.mul(last_ts, previous_ts)?;
    let closing = b.g.sub(last_ts, pair)?;
    let one = b.f32_const(1.0);
    let text = b.g.sub(one, last_ts)?;
    // [no_timestamps, hi): to the vocabulary's end after a pair, below the last timestamp
    // after a closing one, up to and with the latest after text.
    let end = b.f32_const(vocab as f32);
    let after_pair = b.g.mul(pair, end)?;
    let after_closing = b.g.mul(closing, last)?;
    let past_latest = b.g.add(latest, one)?;
    let after_text = b.g.mul(text, past_latest)?;
    let hi = b.g.add(after_pair, after_closing)?;
    let hi = b.g.add(hi, after_text)?;
    let hi = b.g.mul(hi, on)?;
    let lo = b.f32_const(sel.no_timestamps as f32);
    let x = ban_range(b, x, float_ids, lo, hi)?;
    // [0, end of text) after a closing timestamp.
    let eot = b.f32_const(sel.end_of_text as f32);
    let text_hi = b.g.mul(closing, eot)?;
    let text_hi = b.g.mul(text_hi, on)?;
    let zero = b.f32_const(0.0);
    let x = ban_range(b, x, float_ids, zero, text_hi)?;
    let rule = b.g.sub(one, pair)?;
    let rule = b.g.mul(rule, on)?;
    Ok((x, rule))
}

/// CTranslate2's `RepetitionPenalty` and `NoRepeatNgram`, first of the rules: the logit of a
/// token already in the sequence divided by the penalty (multiplied when negative), a token
/// that would repeat an n-gram banned; which tokens, per row, the host says
/// ([`TOKEN_PENALTIES`]).
fn penalize(b: &mut Builder, logits: NodeId) -> Result<NodeId> {
    let dims = b.g.ty(logits).shape.dims().to_vec();
    let codes = b.g.input(TOKEN_PENALTIES, f32_type(&dims))?;
    let penalty = b.g.input(REPETITION_PENALTY, f32_type(&[1, 1]))?;
    let zero = b.f32_const(0.0);
    let negative = b.g.compare(CmpKind::Lt, logits, zero)?;
    let (up, down) = (b.g.mul(logits, penalty)?, b.g.div(logits, penalty)?);
    let penalized = b.g.select(negative, up, down)?;
    let half = b.f32_const(0.5);
    let seen = b.g.compare(CmpKind::Gt, codes, half)?;
    let x = b.g.select(seen, penalized, logits)?;
    let one_and_half = b.f32_const(1.5);
    let banned = b.g.compare(CmpKind::Gt, codes, one_and_half)?;
    let masked = b.f32_const(MASKED);
    Ok(b.g.select(banned, masked, x)?)
}

/// The logits `[R, V]` (one row per sequence) with every ban applied: the suppress list, the
/// first step's rules or the history's, and the timestamp-probability rule. With
/// [`Bans::History`] the history values are `[R, 1]` (or `[1]` for one row).
///
/// Written for few dispatches on a GPU (a decoder step is short, and every kernel launch
/// counts): each ban is a `where` on the logits whose condition is float arithmetic on 0/1
/// values (comparisons of float ids with the range ends, the flags cast to f32) compared with
/// 0, so the elementwise fusion takes the whole chain into a few kernels (as many as its input
/// limit allows). Ids are compared as f32, exact for every vocabulary (below 2^24 ids).
pub(crate) fn masked_logits(b: &mut Builder, logits: NodeId, sel: &Selection, bans: Bans) -> Result<NodeId> {
    let vocab = b.g.ty(logits).shape.dims()[1];
    let ts = sel.timestamp_begin as usize;
    if ts == 0 || ts >= vocab || sel.no_timestamps as usize >= vocab || sel.end_of_text as usize >= vocab {
        return Err(Error::bad_argument(format!(
            "timestamp begin {ts}, <|notimestamps|> {} or end of text {} is outside the vocabulary of {vocab}",
            sel.no_timestamps, sel.end_of_text
        )));
    }
    let float_ids = b.g.constant(Tensor::f32([1, vocab], (0..vocab).map(|i| i as f32).collect())?);
    let masked = b.f32_const(MASKED);
    let logits = if sel.penalties { penalize(b, logits)? } else { logits };
    let suppress = id_mask(b, vocab, &sel.suppress)?;
    let x = b.g.select(suppress, masked, logits)?;
    let (x, rule) = match bans {
        Bans::First => (first_bans(b, x, float_ids, sel)?, None),
        Bans::History { last, previous, latest } => {
            let (x, rule) = history_bans(b, x, float_ids, sel, (last, previous, latest))?;
            (x, Some(rule))
        }
    };

    // The timestamp rule: text is banned when the log-probability mass of the timestamps
    // exceeds the best text token's. Both sides are log-probabilities of the same softmax, so
    // its normaliser cancels: the rule compares log-sum-exp(timestamps) with max(text).
    let x = match rule {
        None => x,
        Some(rule) => {
            let ts_part = b.g.slice(x, 1, ts, vocab)?;
            let ts_mass = log_sum_exp(b, ts_part)?;
            let text_part = b.g.slice(x, 1, 0, ts)?;
            let text_best = b.g.reduce_max(text_part, 1, true)?;
            let wins = b.g.compare(CmpKind::Gt, ts_mass, text_best)?;
            let begin = b.f32_const(sel.timestamp_begin as f32);
            let is_text = b.g.compare(CmpKind::Lt, float_ids, begin)?;
            let (is_text, wins) = (b.widen(is_text)?, b.widen(wins)?);
            let text_loses = b.g.mul(is_text, wins)?;
            let text_loses = b.g.mul(text_loses, rule)?;
            let zero = b.f32_const(0.0);
            let text_loses = b.g.compare(CmpKind::Gt, text_loses, zero)?;
            b.g.select(text_loses, masked, x)?
        }
    };
    Ok(x)
}

/// Adds token selection for `logits [1, V]` to the graph and its [`TOKEN`] and [`LOGPROB`]
/// outputs (and [`LATEST_NEXT`] with [`Bans::History`]); returns the masked logits and their
/// log-sum-exp, from which [`beam_candidates`] ranks a prefill's first beam candidates.
pub(crate) fn select_token(b: &mut Builder, logits: NodeId, sel: &Selection, bans: Bans) -> Result<Masked> {
    let vocab = b.g.ty(logits).shape.dims()[1];
    let x = masked_logits(b, logits, sel, bans)?;
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

    if let Bans::History { latest, .. } = bans {
        // The chosen token is the latest timestamp when it is one (the rules keep them in
        // order).
        let token = b.widen(token)?;
        let begin = b.f32_const(sel.timestamp_begin as f32);
        let is_ts = b.g.compare(CmpKind::Ge, token, begin)?;
        let next = b.g.select(is_ts, token, latest)?;
        b.g.output(LATEST_NEXT, next)?;
    }
    Ok(Masked { x, lse })
}

/// Masked logits `[R, V]` and their log-sum-exp per row `[R, 1]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Masked {
    pub x: NodeId,
    pub lse: NodeId,
}

/// The masked logits of `logits [R, V]` (see [`masked_logits`]) and their log-sum-exp.
pub(crate) fn masked_with_lse(b: &mut Builder, logits: NodeId, sel: &Selection, bans: Bans) -> Result<Masked> {
    let x = masked_logits(b, logits, sel, bans)?;
    let lse = log_sum_exp(b, x)?;
    Ok(Masked { x, lse })
}

/// Adds beam search's candidates to the graph: every row's log-probabilities (`x - lse`)
/// plus the row's cumulative score `scores [R, 1]` (none at the first step, one row), ranked
/// over all rows together, the best `k` of them: outputs [`CANDIDATES`] (flat indices
/// `row * V + token`, `[1, k]` u32) and [`CANDIDATE_SCORES`] (`[k, 1]`). Only these `8 k`
/// bytes leave the device.
pub(crate) fn beam_candidates(b: &mut Builder, masked: Masked, scores: Option<NodeId>, k: usize) -> Result<()> {
    let dims = b.g.ty(masked.x).shape.dims().to_vec();
    let (rows, vocab) = (dims[0], dims[1]);
    let logprobs = b.g.sub(masked.x, masked.lse)?;
    let total = match scores {
        Some(scores) => b.g.add(logprobs, scores)?,
        None => logprobs,
    };
    let flat = b.g.reshape(total, [1, rows * vocab])?;
    let best = b.g.top_k(flat, k)?;
    b.g.output(CANDIDATES, best)?;
    let column = b.g.reshape(flat, [rows * vocab, 1])?;
    let best = b.g.reshape(best, [k])?;
    let best_scores = b.g.gather(column, best)?;
    b.g.output(CANDIDATE_SCORES, best_scores)?;
    Ok(())
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::graphs::layers::ModelWeights;
    use crate::load::weights::testing::small_config;
    use susurrus_core::exec::Backend;
    use susurrus_core::ir::{DType, TensorType};

    const V: usize = 40;
    const EOT: u32 = 20;
    const NT: u32 = 29;
    const TB: u32 = 30;

    fn selection() -> Selection {
        Selection {
            suppress: vec![1, 5],
            blank: vec![3, 29],
            timestamp_begin: TB,
            end_of_text: EOT,
            no_timestamps: NT,
            penalties: false,
        }
    }

    /// The reference's rules for a step after the window's first token, written out as the
    /// reference decoder states them: the banned ranges and whether the timestamp-probability
    /// rule applies, from the last token, the one before it (the last itself after one
    /// token) and the latest timestamp (`<|notimestamps|>` before any).
    fn later_rules(last: u32, previous: u32, latest: u32, timestamps: bool) -> (Vec<(u32, u32)>, bool) {
        if !timestamps {
            return (vec![], false);
        }
        let v = V as u32;
        match (last >= TB, previous >= TB) {
            // A closed pair (or a lone first timestamp): text or end of text next.
            (true, true) => (vec![(NT, v)], false),
            // A timestamp after text closes the segment: no text, and no earlier time.
            (true, false) => (vec![(0, EOT), (NT, last)], true),
            // After text, timestamps must be later than the latest one.
            (false, _) => (vec![(NT, latest + 1)], true),
        }
    }

    #[test]
    fn the_later_rules_reference_follows_the_reference_decoder() {
        // tiny.en's layout, shrunk: after the first timestamp (it counts as a closed pair):
        // text or end of text.
        assert_eq!(later_rules(TB, TB, TB, true), (vec![(NT, 40)], false));
        // After text: <|notimestamps|> and timestamps up to the latest banned.
        assert_eq!(later_rules(11, TB, TB, true), (vec![(NT, TB + 1)], true));
        // A timestamp after text: no text; no earlier timestamp (equal allowed).
        assert_eq!(later_rules(33, 11, 33, true), (vec![(0, EOT), (NT, 33)], true));
        // Text before any timestamp: only <|notimestamps|> itself.
        assert_eq!(later_rules(11, 12, NT, true), (vec![(NT, NT + 1)], true));
        assert_eq!(later_rules(33, 11, 33, false), (vec![], false));
    }

    /// The rules written out on the host in f64, independently of the graph: the choice and
    /// its log-probability.
    fn reference(
        logits: &[f32],
        banned: &[(u32, u32)],
        blank: bool,
        rule: bool,
        inv_t: f32,
        noise: &[f32],
    ) -> (u32, f32) {
        let sel = selection();
        let mut x: Vec<f64> = logits.iter().map(|&v| v as f64).collect();
        let ban = |x: &mut Vec<f64>, i: usize| x[i] = f64::NEG_INFINITY;
        for &i in &sel.suppress {
            ban(&mut x, i as usize);
        }
        for &(lo, hi) in banned {
            for i in lo..hi {
                ban(&mut x, i as usize);
            }
        }
        if blank {
            for &i in &sel.blank {
                ban(&mut x, i as usize);
            }
        }
        let lse = |v: &[f64]| {
            let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + v.iter().map(|a| (a - m).exp()).sum::<f64>().ln()
        };
        if rule {
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

    /// A selection graph on `logits` with the first step's or the later steps' bans.
    fn compile(backend: &dyn Backend, later: bool) -> Box<dyn susurrus_core::exec::Executable> {
        let model = ModelWeights { config: small_config(), weights: Default::default() };
        let mut b = Builder::new("select", &model);
        let logits = b.g.input("logits", f32_type(&[1, V])).unwrap();
        let bans = if later {
            let last = b.g.input("last", TensorType::new(DType::U32, [1])).unwrap();
            let previous = b.g.input(PREVIOUS, TensorType::new(DType::U32, [1])).unwrap();
            let latest = b.g.input(LATEST, f32_type(&[1])).unwrap();
            Bans::History { last, previous, latest }
        } else {
            Bans::First
        };
        select_token(&mut b, logits, &selection(), bans).unwrap();
        let mut g = b.g;
        susurrus_core::passes::optimize(&mut g).unwrap();
        let plan = susurrus_core::plan::plan(g).unwrap();
        pollster::block_on(backend.compile(&plan, &Default::default())).unwrap()
    }

    fn sampling(rng: &mut StdRng, case: usize) -> (f32, Vec<f32>) {
        if case.is_multiple_of(3) {
            (1.0 / 0.7, (0..V).map(|_| rng.random_range(-1.0..3.0)).collect())
        } else {
            (1.0, vec![0.0; V])
        }
    }

    fn check_first(backend: &dyn Backend) {
        let mut exe = compile(backend, false);
        let mut rng = StdRng::seed_from_u64(3);
        for case in 0..30 {
            let values: Vec<f32> = (0..V).map(|_| rng.random_range(-4.0..4.0)).collect();
            let banned: Vec<(u32, u32)> = (0..rng.random_range(0..=RANGES))
                .map(|_| {
                    let lo = rng.random_range(0..V as u32);
                    (lo, rng.random_range(lo..=(lo + 12).min(V as u32)))
                })
                .filter(|&(lo, hi)| !(lo == 0 && hi as usize == V))
                .collect();
            let rules = Rules { banned, blank: rng.random() };
            let (inv_t, noise) = sampling(&mut rng, case);
            let want = reference(&values, &rules.banned, rules.blank, false, inv_t, &noise);
            let inputs = HashMap::from([
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
        }
    }

    fn check_later(backend: &dyn Backend) {
        let mut exe = compile(backend, true);
        let mut rng = StdRng::seed_from_u64(5);
        let (mut rule_hits, mut kinds) = (0, [0; 3]);
        for case in 0..60 {
            let values: Vec<f32> = (0..V).map(|_| rng.random_range(-4.0..4.0)).collect();
            let token =
                |rng: &mut StdRng| if rng.random() { rng.random_range(TB..V as u32) } else { rng.random_range(0..EOT) };
            let (last, previous) = (token(&mut rng), token(&mut rng));
            let latest = if rng.random_range(0..4) == 0 { NT } else { rng.random_range(TB..V as u32) };
            let timestamps = case % 5 != 0;
            let (banned, rule) = later_rules(last, previous, latest, timestamps);
            let (inv_t, noise) = sampling(&mut rng, case);
            let want = reference(&values, &banned, false, rule, inv_t, &noise);
            let inputs = HashMap::from([
                ("logits".to_string(), Tensor::f32([1, V], values.clone()).unwrap()),
                ("last".to_string(), Tensor::u32([1], vec![last]).unwrap()),
                (PREVIOUS.to_string(), Tensor::u32([1], vec![previous]).unwrap()),
                (LATEST.to_string(), Tensor::f32([1], vec![latest as f32]).unwrap()),
                (INV_TEMPERATURE.to_string(), Tensor::f32([1, 1], vec![inv_t]).unwrap()),
                (NOISE.to_string(), Tensor::f32([1, V], noise.clone()).unwrap()),
            ]);
            let scalars = HashMap::from([(TIMESTAMPS.to_string(), timestamps as u32)]);
            let out = pollster::block_on(exe.run(&inputs, &scalars, &[TOKEN, LOGPROB, LATEST_NEXT])).unwrap();
            let (token, logprob) = (out[TOKEN].as_u32().unwrap()[0], out[LOGPROB].to_f32()[0]);
            let what =
                format!("{} case {case}: last {last} previous {previous} latest {latest} {timestamps}", backend.name());
            assert_eq!(token, want.0, "{what}");
            assert!((logprob - want.1).abs() < 1e-4, "{what}: logprob {logprob} vs {}", want.1);
            let next = if token >= TB { token } else { latest };
            assert_eq!(out[LATEST_NEXT].to_f32(), [next as f32], "{what}");
            rule_hits += usize::from(rule && want.0 >= TB);
            if timestamps {
                kinds[usize::from(last >= TB) + usize::from(last >= TB && previous >= TB)] += 1;
            }
        }
        assert!(rule_hits > 3, "the timestamp rule decided too few cases ({rule_hits})");
        assert!(kinds.iter().all(|&k| k > 5), "each kind of history is tried: {kinds:?}");
    }

    susurrus_testkit::for_each_backend!(fn selection_follows_the_rules(backend) {
        check_first(backend.as_ref());
        check_later(backend.as_ref());
    });
}
