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

mod alignment;
mod beams;
mod greedy;
mod groups;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::graphs::align::{ALIGNMENT, FRAMES, NEXT_INDEX, TOKEN_PROBS, alignment_graph};
use crate::graphs::decoder::{
    DecoderSpec, LAST, NO_SPEECH_PROB, OFFSET, PARENT_ROWS, SOT, STEP_TOKEN, TOKENS, beam_expand_graph,
    beam_step_graph, decoder_graph,
};
use crate::graphs::encoder::{ENCODER_OUT, MEL, encoder_graph};
use crate::graphs::groups::{
    CACHE_ROW, CROSS_ROW, POSITIONS, RING_ROWS, SEEN_FROM, SEEN_SPAN, TAKE_ROWS, group_encoder_graph,
    group_encoder_sizes, group_join_graph, group_step_graph, group_take_graph, window_cross_row,
};
use crate::graphs::layers::ModelWeights;
use crate::graphs::select::{
    CANDIDATE_SCORES, CANDIDATES, INV_TEMPERATURE, LATEST, LATEST_NEXT, LOGPROB, NOISE, PREVIOUS, REPETITION_PENALTY,
    Rules, SCORES, Selection, TIMESTAMPS, TOKEN, TOKEN_PENALTIES,
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
    /// Beams of the beam step graph (beam search with up to this many beams); below 2, none
    /// is built.
    pub beams: usize,
    /// Build the alignment graphs (word timestamps).
    pub alignment: bool,
    /// Build a prefill graph for prompts up to the whole context: hotwords come before up
    /// to half a context of previous text.
    pub long_prompts: bool,
    /// Groups of the group step graph (beam search over this many windows at once, each
    /// with [`ProgramSpec::beams`] beams; see [`crate::graphs::groups`]); below 2, none is built.
    pub groups: usize,
}

/// What [`Program::align`] returns for a sequence of `L` tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct Alignment {
    /// The alignment heads' weights `[heads, L, frames]`, each row a softmax over `frames`.
    pub weights: Vec<f32>,
    pub heads: usize,
    pub frames: usize,
    /// Each token's probability among the text tokens, as the one after the token before
    /// (`L - 1` values: the first token has none).
    pub next_probs: Vec<f32>,
}

/// One beam's continuation as the device ranked it: the beam it extends, the token and the
/// cumulative log-probability with it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub beam: usize,
    pub token: u32,
    pub score: f32,
}

/// A beam going into a beam step: the token it ends with (the step's input), the beam of
/// the last step whose cache it continues, its history for the timestamp rules and its
/// cumulative log-probability.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BeamInput {
    pub history: History,
    pub parent: usize,
    pub score: f32,
}

/// The beam graphs, compiled.
struct Beams {
    count: usize,
    step: Box<dyn Executable>,
    expand: Box<dyn Executable>,
}

/// The group graphs, compiled.
struct Groups {
    count: usize,
    step: Box<dyn Executable>,
    join: Box<dyn Executable>,
    take: Box<dyn Executable>,
    /// Encoders of several windows by window count, ascending.
    encoders: Vec<(usize, Box<dyn Executable>)>,
}

/// The group graphs, planned.
struct GroupPlans {
    step: Plan,
    join: Plan,
    take: Plan,
    encoders: Vec<(usize, Plan)>,
}

impl GroupPlans {
    fn all(&self) -> impl Iterator<Item = &Plan> {
        [&self.step, &self.join, &self.take].into_iter().chain(self.encoders.iter().map(|(_, p)| p))
    }
}

/// One group's beams going into a group step ([`Program::group_step`]): the beams (as many
/// as the program's groups have, parents among them), the position of their tokens, and the
/// ring slot the group's keys start at ([`Program::join_group`]'s `slot` minus its prompt's
/// length).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupInput {
    pub beams: Vec<BeamInput>,
    pub position: usize,
    pub from: usize,
}

/// A compiled Whisper model.
pub struct Program {
    encoder: Box<dyn Executable>,
    step: Box<dyn Executable>,
    /// Prefill executables by padded prompt length, ascending.
    prefills: Vec<(usize, Box<dyn Executable>)>,
    beams: Option<Beams>,
    groups: Option<Groups>,
    /// Alignment executables by padded sequence length, ascending.
    aligns: Vec<(usize, Box<dyn Executable>)>,
    alignment_heads: usize,
    audio_positions: usize,
    text_vocab: u32,
    vocab: usize,
    decoder_heads: usize,
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

/// The prefill sizes of `spec`: [`prefill_sizes`], and the whole context for long prompts.
fn spec_prefill_sizes(n_text_ctx: usize, spec: &ProgramSpec) -> Vec<usize> {
    let mut sizes = prefill_sizes(n_text_ctx);
    if spec.long_prompts && sizes.last().is_some_and(|&s| s < n_text_ctx) {
        sizes.push(n_text_ctx);
    }
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
    /// The beam step and expand plans, when the spec has beams.
    beams: Option<(Plan, Plan)>,
    /// The group plans, when the spec has groups.
    groups: Option<GroupPlans>,
    /// Alignment plans by padded sequence length, ascending, when the spec asks for them.
    aligns: Vec<(usize, Plan)>,
}

impl ProgramPlans {
    /// Builds, optimises and plans the graphs of `model` for `spec`.
    pub fn new(model: &ModelWeights, spec: &ProgramSpec) -> Result<ProgramPlans> {
        let encoder = optimized(encoder_graph(model)?)?;
        let selection = spec.selection.clone();
        let step_spec = DecoderSpec { positions: 1, no_speech: None, selection: selection.clone(), candidates: 0 };
        let step = optimized(decoder_graph(model, &step_spec)?)?;
        let beams = spec.beams >= 2;
        let candidates = if beams { 2 * spec.beams } else { 0 };
        let mut prefills = Vec::new();
        for positions in spec_prefill_sizes(model.config.n_text_ctx, spec) {
            let no_speech = Some(spec.no_speech);
            let prefill = DecoderSpec { positions, no_speech, selection: selection.clone(), candidates };
            prefills.push((positions, optimized(decoder_graph(model, &prefill)?)?));
        }
        let beams = match beams {
            true => Some((
                optimized(beam_step_graph(model, spec.beams, candidates, &selection)?)?,
                optimized(beam_expand_graph(model, spec.beams)?)?,
            )),
            false => None,
        };
        let groups = match beams.is_some() && spec.groups >= 2 {
            true => Some(GroupPlans {
                step: optimized(group_step_graph(model, spec.groups, spec.beams, &selection)?)?,
                join: optimized(group_join_graph(model, spec.groups, spec.beams)?)?,
                take: optimized(group_take_graph(model, spec.groups)?)?,
                encoders: group_encoder_sizes(spec.groups)
                    .into_iter()
                    .map(|w| Ok((w, optimized(group_encoder_graph(model, w, spec.groups)?)?)))
                    .collect::<Result<_>>()?,
            }),
            false => None,
        };
        let mut aligns = Vec::new();
        if spec.alignment {
            let text_vocab = selection.end_of_text as usize;
            // A window's whole sequence has at least 3 tokens: the prefill sizes from 16 (the
            // longest always).
            let sizes = prefill_sizes(model.config.n_text_ctx);
            let longest = sizes.last().copied();
            for positions in sizes.into_iter().filter(|&s| s >= 16 || Some(s) == longest) {
                aligns.push((positions, optimized(alignment_graph(model, positions, text_vocab)?)?));
            }
        }
        Ok(ProgramPlans { spec: spec.clone(), encoder, step, prefills, beams, groups, aligns })
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
        if let Some((step, expand)) = &plans.beams {
            all.extend([step, expand]);
        }
        if let Some(groups) = &plans.groups {
            all.extend(groups.all());
        }
        all.extend(plans.aligns.iter().map(|(_, p)| p));
        let weights = model.for_graphs(all.iter().map(|p| &p.graph));
        let mut executables = backend.compile_linked(all, &weights).await?.into_iter();
        let mut next = || executables.next().ok_or_else(|| Error::backend("a graph was not compiled"));
        let encoder = next()?;
        let step = next()?;
        let mut prefills = Vec::with_capacity(plans.prefills.len());
        for (size, _) in &plans.prefills {
            prefills.push((*size, next()?));
        }
        let beams = match plans.beams {
            Some(_) => Some(Beams { count: plans.spec.beams, step: next()?, expand: next()? }),
            None => None,
        };
        let groups = match &plans.groups {
            Some(g) => {
                let (step, join, take) = (next()?, next()?, next()?);
                let mut encoders = Vec::with_capacity(g.encoders.len());
                for (windows, _) in &g.encoders {
                    encoders.push((*windows, next()?));
                }
                Some(Groups { count: plans.spec.groups, step, join, take, encoders })
            }
            None => None,
        };
        let mut aligns = Vec::with_capacity(plans.aligns.len());
        for (size, _) in &plans.aligns {
            aligns.push((*size, next()?));
        }
        let selection = &plans.spec.selection;
        Ok(Program {
            encoder,
            step,
            prefills,
            beams,
            groups,
            aligns,
            alignment_heads: c.generation.alignment_heads.len(),
            audio_positions: c.n_audio_ctx,
            text_vocab: selection.end_of_text,
            vocab: c.n_vocab,
            decoder_heads: c.decoder_heads,
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

    /// The kernel launches of one encoder window and of one decoder step, where the backend
    /// counts them ([`Executable::launches`]).
    pub fn launches(&self) -> (Option<usize>, Option<usize>) {
        (self.encoder.launches(), self.step.launches())
    }
}

/// The f32 scalar output `name` of a decoder run.
fn scalar_f32(out: &HashMap<String, Tensor>, name: &str) -> Result<f32> {
    out.get(name)
        .and_then(|t| t.to_f32().first().copied())
        .ok_or_else(|| Error::backend(format!("the decoder returned no {name}")))
}
