//! A Whisper model compiled on one backend: the encoder graph, the decoder step graph and a
//! few prefill graphs, optimised, planned and compiled together so that they share the
//! weights and the persistent buffers (cross-attention keys and values, KV caches).
//!
//! The decoding loop drives it through three calls: [`Program::encode`] once per 30 s window,
//! [`Program::prefill`] once per prompt, and [`Program::steps`] for the generated tokens
//! ([`Program::step`] one at a time when sampling). Every decoder run reads back only the
//! chosen token and its log-probability (8 bytes; prefill adds the 4-byte no-speech
//! probability). On a GPU, [`Program::steps`] queues [`STEPS_PER_SUBMISSION`] steps and reads
//! them back once, each reading its token from the step before on the device: one host
//! round trip per chain instead of one per token (which costs most in a browser).

use std::collections::HashMap;

use crate::decoder::{DecoderSpec, LAST, NO_SPEECH_PROB, OFFSET, SOT, STEP_TOKEN, TOKENS, decoder_graph};
use crate::encoder::{ENCODER_OUT, MEL, encoder_graph};
use crate::error::{Error, Result};
use crate::layers::ModelWeights;
use crate::select::{
    INV_TEMPERATURE, LATEST, LATEST_NEXT, LOGPROB, NOISE, PREVIOUS, Rules, Selection, TIMESTAMPS, TOKEN,
};
use susurrus_core::exec::{Backend, Chain, Executable};
use susurrus_core::ir::Graph;
use susurrus_core::passes::optimize;
use susurrus_core::plan::{Plan, plan};
use susurrus_core::tensor::Tensor;

/// Bytes a decoder step reads back: the token id and its log-probability.
pub const STEP_READBACK_BYTES: usize = 8;

/// Decoder steps [`Program::steps`] runs per host round trip (one readback) where the backend
/// feeds them on the device. More saves more round trips, but the steps after end of text are wasted
/// (half a chain per window on average): 8 keeps that below a window's round trips.
pub const STEPS_PER_SUBMISSION: usize = 8;

/// A window's tokens so far, as the step graph's timestamp rules read them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct History {
    /// The last generated token: the step's input.
    pub last: u32,
    /// The token before it (`last` itself when it is the window's first).
    pub previous: u32,
    /// The latest timestamp id so far, or `<|notimestamps|>`'s before any.
    pub latest: u32,
    /// Whether the timestamp rules apply.
    pub timestamps: bool,
}

/// How the next token is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling<'a> {
    /// The most likely token.
    Greedy,
    /// A draw from `softmax(logits / temperature)`, given Gumbel noise `[V]` from the caller.
    Temperature { temperature: f32, noise: &'a [f32] },
}

/// What one decoder run chose.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    pub token: u32,
    /// The token's log-probability under the masked logits at temperature 1.
    pub logprob: f32,
    /// The no-speech probability at `<|startoftranscript|>` (prefill runs only).
    pub no_speech_prob: Option<f32>,
}

/// The token settings a program is compiled with.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramSpec {
    pub selection: Selection,
    /// The no-speech token.
    pub no_speech: u32,
}

/// A compiled Whisper model.
pub struct Program {
    encoder: Box<dyn Executable>,
    step: Box<dyn Executable>,
    /// Prefill executables by padded prompt length, ascending.
    prefills: Vec<(usize, Box<dyn Executable>)>,
    vocab: usize,
    n_text_ctx: usize,
    /// The decoder runs' inputs: tokens, `1 / temperature` and the noise.
    inputs: HashMap<String, Tensor>,
    /// Whether `inputs` holds sampling noise rather than zeros.
    noisy: bool,
    pad_token: u32,
    timestamp_begin: u32,
    no_timestamps: u32,
    backend: String,
}

/// The padded prompt lengths prefill graphs are built for, for a model with `n_text_ctx`
/// positions. The largest holds the longest prompt decoding makes: half the context of
/// previous text plus the start-of-transcript sequence.
fn prefill_sizes(n_text_ctx: usize) -> Vec<usize> {
    let longest = (n_text_ctx / 2 + 16).min(n_text_ctx);
    let mut sizes: Vec<usize> = [4, 16, 64].into_iter().filter(|&s| s < longest).collect();
    sizes.push(longest);
    sizes
}

fn optimized(mut g: Graph) -> Result<Plan> {
    optimize(&mut g)?;
    Ok(plan(g)?)
}

/// Every graph of a [`Program`], built, optimised and planned: the host's share of compiling,
/// which needs no backend and so can run while one opens.
pub struct ProgramPlans {
    spec: ProgramSpec,
    encoder: Plan,
    step: Plan,
    /// Prefill plans by padded prompt length, ascending.
    prefills: Vec<(usize, Plan)>,
}

impl ProgramPlans {
    /// Builds, optimises and plans the graphs of `model` for `spec`.
    pub fn new(model: &ModelWeights, spec: &ProgramSpec) -> Result<ProgramPlans> {
        let encoder = optimized(encoder_graph(model)?)?;
        let step_spec = DecoderSpec { positions: 1, no_speech: None, selection: spec.selection.clone() };
        let step = optimized(decoder_graph(model, &step_spec)?)?;
        let mut prefills = Vec::new();
        for positions in prefill_sizes(model.config.n_text_ctx) {
            let prefill = DecoderSpec { positions, no_speech: Some(spec.no_speech), selection: spec.selection.clone() };
            prefills.push((positions, optimized(decoder_graph(model, &prefill)?)?));
        }
        Ok(ProgramPlans { spec: spec.clone(), encoder, step, prefills })
    }

    /// The token settings the plans were built with.
    pub fn spec(&self) -> &ProgramSpec {
        &self.spec
    }
}

impl Program {
    /// Builds, optimises, plans and compiles every graph of `model` on `backend`.
    pub async fn compile(backend: &dyn Backend, model: &ModelWeights, spec: &ProgramSpec) -> Result<Program> {
        Program::from_plans(backend, model, &ProgramPlans::new(model, spec)?).await
    }

    /// Compiles `plans`, made from `model`, on `backend`.
    pub async fn from_plans(backend: &dyn Backend, model: &ModelWeights, plans: &ProgramPlans) -> Result<Program> {
        let c = &model.config;
        let mut all = vec![&plans.encoder, &plans.step];
        all.extend(plans.prefills.iter().map(|(_, p)| p));
        let weights = model.for_graphs(all.iter().map(|p| &p.graph));
        let mut executables = backend.compile_linked(all, &weights).await?.into_iter();
        let mut next = || executables.next().ok_or_else(|| Error::backend("a graph was not compiled"));
        let encoder = next()?;
        let step = next()?;
        let mut prefills = Vec::with_capacity(plans.prefills.len());
        for (size, _) in &plans.prefills {
            prefills.push((*size, next()?));
        }
        let selection = &plans.spec.selection;
        Ok(Program {
            encoder,
            step,
            prefills,
            vocab: c.n_vocab,
            n_text_ctx: c.n_text_ctx,
            inputs: HashMap::from([(NOISE.to_string(), Tensor::f32([1, c.n_vocab], vec![0.0; c.n_vocab])?)]),
            noisy: false,
            pad_token: selection.timestamp_begin,
            timestamp_begin: selection.timestamp_begin,
            no_timestamps: selection.no_timestamps,
            backend: backend.name().to_string(),
        })
    }

    /// The backend's name.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// Decoder positions (the KV-cache capacity).
    pub fn n_text_ctx(&self) -> usize {
        self.n_text_ctx
    }

    /// The longest prompt [`Program::prefill`] takes.
    pub fn max_prompt(&self) -> usize {
        self.prefills.last().map_or(0, |(s, _)| *s)
    }

    /// Runs the encoder on one window's log-mel `[n_mels, n_frames]` and fills the
    /// cross-attention buffers the decoder reads. Returns the encoder output when `read` is
    /// set (tests compare it with the reference).
    pub async fn encode(&mut self, mel: &Tensor, read: bool) -> Result<Option<Tensor>> {
        let inputs = HashMap::from([(MEL.to_string(), mel.clone())]);
        let outputs: &[&str] = if read { &[ENCODER_OUT] } else { &[] };
        let mut out = self.encoder.run(&inputs, &HashMap::new(), outputs).await?;
        Ok(out.remove(ENCODER_OUT))
    }

    /// Runs the encoder `times` times on `mel` and resolves when the device has finished
    /// (without reading anything back): what benchmarks time. [`Program::encode`] without
    /// `read` may return before a GPU has finished.
    pub async fn encode_repeatedly(&mut self, mel: &Tensor, times: usize) -> Result<()> {
        let inputs = HashMap::from([(MEL.to_string(), mel.clone())]);
        Ok(self.encoder.run_repeatedly(&inputs, &HashMap::new(), times).await?)
    }

    /// Sets the sampling inputs of the next run. Greedy runs reuse the zero noise already in
    /// place, so a greedy step allocates nothing vocabulary-sized.
    fn set_sampling(&mut self, sampling: Sampling) -> Result<()> {
        let inv_t = match sampling {
            Sampling::Greedy => {
                if self.noisy {
                    self.inputs.insert(NOISE.into(), Tensor::f32([1, self.vocab], vec![0.0; self.vocab])?);
                    self.noisy = false;
                }
                1.0
            }
            Sampling::Temperature { temperature, noise } => {
                if !(temperature > 0.0 && temperature.is_finite()) {
                    return Err(Error::bad_argument(format!("sampling temperature {temperature} is not positive")));
                }
                if noise.len() != self.vocab {
                    return Err(Error::bad_argument(format!(
                        "sampling noise has {} values for a vocabulary of {}",
                        noise.len(),
                        self.vocab
                    )));
                }
                self.inputs.insert(NOISE.into(), Tensor::f32([1, self.vocab], noise.to_vec())?);
                self.noisy = true;
                1.0 / temperature
            }
        };
        self.inputs.insert(INV_TEMPERATURE.into(), Tensor::f32([1, 1], vec![inv_t])?);
        Ok(())
    }

    /// Runs `prompt` from position 0 (the KV caches start over) and chooses the first
    /// generated token; also gives the no-speech probability at row `sot`.
    pub async fn prefill(
        &mut self,
        prompt: &[u32],
        sot: usize,
        rules: &Rules,
        sampling: Sampling<'_>,
    ) -> Result<Choice> {
        if prompt.is_empty() || sot >= prompt.len() {
            return Err(Error::bad_argument(format!(
                "a prompt of {} tokens with <|startoftranscript|> at {sot}",
                prompt.len()
            )));
        }
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::bad_argument(format!("prompt token {bad} is outside the vocabulary of {}", self.vocab)));
        }
        let max = self.max_prompt();
        let index = self.prefills.iter().position(|(s, _)| *s >= prompt.len()).ok_or_else(|| {
            Error::bad_argument(format!("a prompt of {} tokens is longer than the longest of {max}", prompt.len()))
        })?;
        let size = self.prefills[index].0;
        let mut tokens = prompt.to_vec();
        tokens.resize(size, self.pad_token);
        self.set_sampling(sampling)?;
        self.inputs.insert(TOKENS.to_string(), Tensor::u32([size], tokens)?);
        // The step graph's history inputs are not the prefill's.
        self.inputs.remove(PREVIOUS);
        self.inputs.remove(LATEST);
        let mut scalars = HashMap::from([
            (OFFSET.to_string(), 0),
            (LAST.to_string(), prompt.len() as u32 - 1),
            (SOT.to_string(), sot as u32),
        ]);
        rules.scalars(&mut scalars)?;
        let exe = &mut self.prefills[index].1;
        let out = exe.run(&self.inputs, &scalars, &[TOKEN, LOGPROB, NO_SPEECH_PROB]).await?;
        let mut choice = read_choice(&out)?;
        choice.no_speech_prob = Some(scalar_f32(&out, NO_SPEECH_PROB)?);
        Ok(choice)
    }

    /// The history after `seq`, the tokens generated so far in a window (at least one):
    /// what [`Program::step`] and [`Program::steps`] start from.
    pub fn history(&self, seq: &[u32], timestamps: bool) -> Result<History> {
        let (&last, before) = seq.split_last().ok_or_else(|| Error::bad_argument("a step needs a token before it"))?;
        let is_ts = |t: &&u32| **t >= self.timestamp_begin;
        Ok(History {
            last,
            previous: before.last().copied().unwrap_or(last),
            latest: seq.iter().rev().find(is_ts).copied().unwrap_or(self.no_timestamps),
            timestamps,
        })
    }

    /// Checks a step's history and position and sets its inputs; returns its scalars.
    fn step_inputs(&mut self, history: &History, position: usize) -> Result<HashMap<String, u32>> {
        if position >= self.n_text_ctx {
            return Err(Error::bad_argument(format!(
                "decoder position {position} is past the context of {}",
                self.n_text_ctx
            )));
        }
        let ids = [history.last, history.previous, history.latest];
        if let Some(bad) = ids.into_iter().find(|&t| t as usize >= self.vocab) {
            return Err(Error::bad_argument(format!("token {bad} is outside the vocabulary of {}", self.vocab)));
        }
        self.inputs.insert(TOKENS.to_string(), Tensor::u32([1], vec![history.last])?);
        self.inputs.insert(PREVIOUS.to_string(), Tensor::u32([1], vec![history.previous])?);
        self.inputs.insert(LATEST.to_string(), Tensor::f32([1], vec![history.latest as f32])?);
        Ok(HashMap::from([(OFFSET.to_string(), position as u32), (TIMESTAMPS.to_string(), history.timestamps as u32)]))
    }

    /// Runs the step after `history` at `position` (after a prefill and the steps before it)
    /// and chooses the next token.
    pub async fn step(&mut self, history: &History, position: usize, sampling: Sampling<'_>) -> Result<Choice> {
        let scalars = self.step_inputs(history, position)?;
        self.set_sampling(sampling)?;
        let out = self.step.run(&self.inputs, &scalars, &[TOKEN, LOGPROB]).await?;
        read_choice(&out)
    }

    /// Runs up to `count` greedy steps from `history` at `position` on, each step's token the
    /// next one's input, and returns their choices in order: [`STEPS_PER_SUBMISSION`] per
    /// submission where the backend feeds steps on the device, else one. The caller stops at
    /// end of text; choices after it are to be discarded (their steps only wrote cache rows
    /// past the window's end, which no later query sees before they are written again).
    pub async fn steps(&mut self, history: &History, position: usize, count: usize) -> Result<Vec<Choice>> {
        let chain = if self.step.feeds_on_device() { STEPS_PER_SUBMISSION } else { 1 };
        let count = count.clamp(1, chain);
        if position + count > self.n_text_ctx {
            return Err(Error::bad_argument(format!(
                "{count} decoder steps from position {position} pass the context of {}",
                self.n_text_ctx
            )));
        }
        let first = self.step_inputs(history, position)?;
        self.set_sampling(Sampling::Greedy)?;
        let scalars: Vec<HashMap<String, u32>> = (0..count)
            .map(|k| {
                let mut s = first.clone();
                s.insert(OFFSET.to_string(), (position + k) as u32);
                s
            })
            .collect();
        let chain = Chain {
            inputs: &self.inputs,
            scalars: &scalars,
            feeds: &[(TOKEN, TOKENS), (STEP_TOKEN, PREVIOUS), (LATEST_NEXT, LATEST)],
            outputs: &[TOKEN, LOGPROB],
        };
        let runs = self.step.run_chain(chain).await?;
        runs.iter().map(read_choice).collect()
    }

    /// The kernel launches of one encoder window and of one decoder step, where the backend
    /// counts them ([`Executable::launches`]).
    pub fn launches(&self) -> (Option<usize>, Option<usize>) {
        (self.encoder.launches(), self.step.launches())
    }

    /// Runs the decoder step after `history` at `position` `times` times back to back,
    /// greedy, reading nothing, and resolves when the device has finished: the device's time
    /// per step, without the host's work between steps (what benchmarks compare with
    /// [`Program::steps`]). Every run writes the same cache row, so the state after it is that
    /// of one step.
    pub async fn step_repeatedly(&mut self, history: &History, position: usize, times: usize) -> Result<()> {
        let scalars = self.step_inputs(history, position)?;
        self.set_sampling(Sampling::Greedy)?;
        Ok(self.step.run_repeatedly(&self.inputs, &scalars, times).await?)
    }
}

fn scalar_f32(out: &HashMap<String, Tensor>, name: &str) -> Result<f32> {
    out.get(name)
        .and_then(|t| t.to_f32().first().copied())
        .ok_or_else(|| Error::backend(format!("the decoder returned no {name}")))
}

fn read_choice(out: &HashMap<String, Tensor>) -> Result<Choice> {
    let token = out
        .get(TOKEN)
        .and_then(|t| t.as_u32())
        .and_then(|v| v.first().copied())
        .ok_or_else(|| Error::backend("the decoder returned no token"))?;
    Ok(Choice { token, logprob: scalar_f32(out, LOGPROB)?, no_speech_prob: None })
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use susurrus_core::exec::cpu::CpuBackend;
    use susurrus_core::exec::wgpu::{WgpuBackend, WgpuOptions};
    use susurrus_core::ir::DType;

    use crate::weights::testing::{multilingual_config, small_config};

    fn spec() -> ProgramSpec {
        ProgramSpec {
            selection: Selection {
                suppress: vec![1, 3],
                blank: vec![7],
                timestamp_begin: 15,
                end_of_text: 11,
                no_timestamps: 14,
            },
            no_speech: 12,
        }
    }

    fn program(backend: &dyn Backend) -> Program {
        let model = crate::weights::testing::random(small_config(), DType::F16, 7);
        let model = ModelWeights::new(&model).unwrap();
        let mut p = pollster::block_on(Program::compile(backend, &model, &spec())).unwrap();
        let c = &model.config;
        let mel: Vec<f32> = (0..c.n_mels * c.n_frames()).map(|i| ((i * 37) % 11) as f32 / 11.0 - 0.5).collect();
        let mel = Tensor::f32([c.n_mels, c.n_frames()], mel).unwrap();
        pollster::block_on(p.encode(&mel, false)).unwrap();
        p
    }

    /// Feeding tokens one step at a time through the KV cache gives what one prefill of the
    /// whole sequence gives: the cache, the positions and the masks line up.
    fn steps_match_prefill(backend: &dyn Backend) {
        let mut p = program(backend);
        let rules = Rules::default();
        let whole = pollster::block_on(p.prefill(&[10, 2, 4, 5], 0, &rules, Sampling::Greedy)).unwrap();
        let first = pollster::block_on(p.prefill(&[10, 2], 0, &rules, Sampling::Greedy)).unwrap();
        assert_eq!(first.no_speech_prob, whole.no_speech_prob);
        let h = p.history(&[4], false).unwrap();
        let _ = pollster::block_on(p.step(&h, 2, Sampling::Greedy)).unwrap();
        let h = p.history(&[4, 5], false).unwrap();
        let last = pollster::block_on(p.step(&h, 3, Sampling::Greedy)).unwrap();
        assert_eq!(last.token, whole.token);
        assert!((last.logprob - whole.logprob).abs() < 1e-4, "{last:?} vs {whole:?}");
        let p_ns = whole.no_speech_prob.unwrap();
        assert!((0.0..=1.0).contains(&p_ns));
    }

    /// A chain of steps fed on the device chooses what steps run one at a time choose, each
    /// fed its token by the host, with the timestamp rules on.
    fn chains_match_single_steps(backend: &dyn Backend) {
        let mut p = program(backend);
        let prompt = [10, 2];
        let first = pollster::block_on(p.prefill(&prompt, 0, &Rules::default(), Sampling::Greedy)).unwrap();
        let mut seq = vec![first.token];
        let mut single = Vec::new();
        for position in prompt.len()..p.n_text_ctx() {
            let h = p.history(&seq, true).unwrap();
            let c = pollster::block_on(p.step(&h, position, Sampling::Greedy)).unwrap();
            seq.push(c.token);
            single.push(c);
        }
        let again = pollster::block_on(p.prefill(&prompt, 0, &Rules::default(), Sampling::Greedy)).unwrap();
        assert_eq!(again, first);
        let h = p.history(&[first.token], true).unwrap();
        let chained = pollster::block_on(p.steps(&h, prompt.len(), single.len())).unwrap();
        let want = if backend.name().starts_with("wgpu") { single.len() } else { 1 };
        assert_eq!(chained.len(), want, "{}", backend.name());
        assert_eq!(chained, single[..want], "{}", backend.name());
    }

    /// Banned ranges, the blank ids and the constant suppress list are never chosen.
    fn rules_ban_tokens(backend: &dyn Backend) {
        let mut p = program(backend);
        let free = pollster::block_on(p.prefill(&[10, 2], 0, &Rules::default(), Sampling::Greedy)).unwrap();
        assert!(![1, 3].contains(&free.token));
        let rules = Rules { banned: vec![(free.token, free.token + 1)], ..Rules::default() };
        let next = pollster::block_on(p.prefill(&[10, 2], 0, &rules, Sampling::Greedy)).unwrap();
        assert_ne!(next.token, free.token);
        // Everything banned but 7, then 7 banned as blank too: all masked alike, the first
        // index wins the tie.
        let all_but_7 = Rules { banned: vec![(0, 7), (8, 20)], ..Rules::default() };
        assert_eq!(pollster::block_on(p.prefill(&[10, 2], 0, &all_but_7, Sampling::Greedy)).unwrap().token, 7);
        let none = Rules { blank: true, ..all_but_7 };
        assert_eq!(pollster::block_on(p.prefill(&[10, 2], 0, &none, Sampling::Greedy)).unwrap().token, 0);
    }

    /// A multilingual, 128-mel model (large-v3's vocabulary and mel count, tiny sizes) builds,
    /// compiles and runs on both backends with the same choice.
    #[test]
    fn multilingual_128_mel_models_run() {
        let weights = crate::weights::testing::random(multilingual_config(), DType::F32, 5);
        let model = ModelWeights::new(&weights).unwrap();
        let c = &model.config;
        let spec = ProgramSpec {
            selection: Selection {
                suppress: vec![1, 2],
                blank: vec![220, 50257],
                timestamp_begin: 50365,
                end_of_text: 50257,
                no_timestamps: 50364,
            },
            no_speech: 50363,
        };
        let mel =
            Tensor::f32([128, c.n_frames()], (0..128 * c.n_frames()).map(|i| (i % 7) as f32 / 7.0).collect()).unwrap();
        let mut choices = Vec::new();
        let wgpu = pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())).unwrap();
        for backend in [&CpuBackend::new() as &dyn Backend, &wgpu] {
            let mut p = pollster::block_on(Program::compile(backend, &model, &spec)).unwrap();
            assert_eq!(p.max_prompt(), 3);
            pollster::block_on(p.encode(&mel, false)).unwrap();
            let first = pollster::block_on(p.prefill(&[50258, 50259], 0, &Rules::default(), Sampling::Greedy)).unwrap();
            let h = p.history(&[first.token], true).unwrap();
            let next = pollster::block_on(p.step(&h, 2, Sampling::Greedy)).unwrap();
            assert!(first.token < 51866 && next.token < 51866);
            choices.push((first.token, next.token));
        }
        assert_eq!(choices[0], choices[1]);
    }

    #[test]
    fn cpu_steps_match_prefill() {
        steps_match_prefill(&CpuBackend::new());
    }

    #[test]
    fn wgpu_steps_match_prefill() {
        let backend = pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())).unwrap();
        steps_match_prefill(&backend);
    }

    #[test]
    fn cpu_chains_match_single_steps() {
        chains_match_single_steps(&CpuBackend::new());
    }

    #[test]
    fn wgpu_chains_match_single_steps() {
        let backend = pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())).unwrap();
        chains_match_single_steps(&backend);
    }

    #[test]
    fn cpu_rules_ban_tokens() {
        rules_ban_tokens(&CpuBackend::new());
    }

    #[test]
    fn wgpu_rules_ban_tokens() {
        let backend = pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())).unwrap();
        rules_ban_tokens(&backend);
    }
}
