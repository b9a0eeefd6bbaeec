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

    /// Sets the token penalties of the next runs (a program whose selection has
    /// [`Selection::penalties`]): `codes` holds a row of [`TOKEN_PENALTIES`] per sequence,
    /// one for a prefill or step, [`Program::max_beams`] for a beam step (rows past the
    /// beams given are not read).
    pub fn set_token_penalties(&mut self, repetition_penalty: f32, codes: Vec<f32>) -> Result<()> {
        if codes.is_empty() || !codes.len().is_multiple_of(self.vocab) {
            return Err(Error::bad_argument(format!(
                "{} token penalties for a vocabulary of {}",
                codes.len(),
                self.vocab
            )));
        }
        let rows = codes.len() / self.vocab;
        self.inputs.insert(TOKEN_PENALTIES.into(), Tensor::f32([rows, self.vocab], codes)?);
        self.inputs.insert(REPETITION_PENALTY.into(), Tensor::f32([1, 1], vec![repetition_penalty])?);
        Ok(())
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
        let out = self.run_prefill(prompt, sot, rules, sampling, &[TOKEN, LOGPROB, NO_SPEECH_PROB]).await?;
        let mut choice = read_choice(&out)?;
        choice.no_speech_prob = Some(scalar_f32(&out, NO_SPEECH_PROB)?);
        Ok(choice)
    }

    /// Runs `prompt` from position 0 and returns the named outputs.
    async fn run_prefill(
        &mut self,
        prompt: &[u32],
        sot: usize,
        rules: &Rules,
        sampling: Sampling<'_>,
        outputs: &[&str],
    ) -> Result<HashMap<String, Tensor>> {
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
        Ok(exe.run(&self.inputs, &scalars, outputs).await?)
    }

    /// The most beams [`Program::beam_prefill`] and [`Program::beam_step`] take (0 without
    /// beam graphs).
    pub fn max_beams(&self) -> usize {
        self.beams.as_ref().map_or(0, |b| b.count)
    }

    fn beam_count(&self, beams: usize) -> Result<usize> {
        let max = self.max_beams();
        if beams < 2 || beams > max {
            return Err(Error::bad_argument(format!("{beams} beams, where this program runs 2 to {max}")));
        }
        Ok(max)
    }

    /// Runs `prompt` from position 0 as [`Program::prefill`] does, then starts `beams` beams
    /// from it: returns the no-speech probability and the best `2 · beams` first tokens (all
    /// of beam 0), best first.
    pub async fn beam_prefill(
        &mut self,
        prompt: &[u32],
        sot: usize,
        rules: &Rules,
        beams: usize,
    ) -> Result<(f32, Vec<Candidate>)> {
        self.beam_count(beams)?;
        let out = self
            .run_prefill(prompt, sot, rules, Sampling::Greedy, &[CANDIDATES, CANDIDATE_SCORES, NO_SPEECH_PROB])
            .await?;
        let candidates = self.read_candidates(&out, 2 * beams)?;
        let no_speech = scalar_f32(&out, NO_SPEECH_PROB)?;
        let expand = &mut self.beams.as_mut().ok_or_else(|| Error::backend("no beam graphs"))?.expand;
        expand.run(&HashMap::new(), &HashMap::new(), &[]).await?;
        Ok((no_speech, candidates))
    }

    /// Runs the beam step at `position` for `beams` (at most [`Program::max_beams`]; the
    /// graph's other beams run dead, scored -inf): each beam first takes over its parent's
    /// cache, then adds its last token. Returns the best `2 · beams.len()` continuations over
    /// all beams, best first.
    pub async fn beam_step(
        &mut self,
        beams: &[BeamInput],
        position: usize,
        timestamps: bool,
    ) -> Result<Vec<Candidate>> {
        let count = self.beam_count(beams.len())?;
        if position >= self.n_text_ctx {
            return Err(Error::bad_argument(format!(
                "decoder position {position} is past the context of {}",
                self.n_text_ctx
            )));
        }
        let heads = self.decoder_heads;
        let (mut tokens, mut previous, mut latest, mut scores) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut parent_rows = Vec::with_capacity(count * heads);
        for k in 0..count {
            let (h, parent, score) = match beams.get(k) {
                Some(b) => (b.history, b.parent, b.score),
                None => (beams[0].history, 0, f32::NEG_INFINITY),
            };
            let ids = [h.last, h.previous, h.latest];
            if let Some(bad) = ids.into_iter().find(|&t| t as usize >= self.vocab) {
                return Err(Error::bad_argument(format!("token {bad} is outside the vocabulary of {}", self.vocab)));
            }
            if parent >= beams.len() {
                return Err(Error::bad_argument(format!("beam {k} continues beam {parent} of {}", beams.len())));
            }
            tokens.push(h.last);
            previous.push(h.previous);
            latest.push(h.latest as f32);
            scores.push(score);
            parent_rows.extend((0..heads).map(|r| (parent * heads + r) as u32));
        }
        let mut inputs = HashMap::from([
            (TOKENS.to_string(), Tensor::u32([count], tokens)?),
            (PREVIOUS.to_string(), Tensor::u32([count], previous)?),
            (LATEST.to_string(), Tensor::f32([count], latest)?),
            (SCORES.to_string(), Tensor::f32([count, 1], scores)?),
            (PARENT_ROWS.to_string(), Tensor::u32([count * heads], parent_rows)?),
        ]);
        for name in [TOKEN_PENALTIES, REPETITION_PENALTY] {
            if let Some(t) = self.inputs.get(name) {
                inputs.insert(name.to_string(), t.clone());
            }
        }
        let scalars =
            HashMap::from([(OFFSET.to_string(), position as u32), (TIMESTAMPS.to_string(), timestamps as u32)]);
        let step = &mut self.beams.as_mut().ok_or_else(|| Error::backend("no beam graphs"))?.step;
        let out = step.run(&inputs, &scalars, &[CANDIDATES, CANDIDATE_SCORES]).await?;
        self.read_candidates(&out, 2 * beams.len())
    }

    /// Groups the group step runs ([`ProgramSpec::groups`]; 0 without group graphs).
    pub fn max_groups(&self) -> usize {
        self.groups.as_ref().map_or(0, |g| g.count)
    }

    /// Encodes several windows' log-mels at once, each into the cross-attention rows of the
    /// group given with it (for [`Program::take_group`] and the group steps): in as few runs
    /// of the group encoders as their sizes allow, a run short of windows repeating its
    /// first (a window alone is better encoded by [`Program::encode`], which its prefill
    /// reads at once).
    pub async fn encode_groups(&mut self, windows: &[(&Tensor, usize)]) -> Result<()> {
        let count = self.max_groups();
        let heads = self.decoder_heads;
        let groups = self.groups.as_mut().ok_or_else(|| Error::bad_argument("this program has no group graphs"))?;
        if let Some((_, g)) = windows.iter().find(|(_, g)| *g >= count) {
            return Err(Error::bad_argument(format!("group {g} of {count}")));
        }
        let largest = groups.encoders.last().map_or(1, |(w, _)| *w);
        for chunk in windows.chunks(largest) {
            let (size, encoder) = groups
                .encoders
                .iter_mut()
                .find(|(w, _)| *w >= chunk.len())
                .ok_or_else(|| Error::backend("no group encoder"))?;
            let dims = chunk[0].0.shape().dims().to_vec();
            let mut values = Vec::with_capacity(*size * chunk[0].0.numel());
            let mut scalars = HashMap::new();
            for w in 0..*size {
                let (mel, g) = chunk.get(w).unwrap_or(&chunk[0]);
                if mel.shape().dims() != dims {
                    return Err(Error::bad_argument(format!(
                        "log-mels {:?} and {dims:?} in one batch",
                        mel.shape().dims()
                    )));
                }
                values.extend_from_slice(mel.as_f32().ok_or_else(|| Error::bad_argument("a log-mel of f32"))?);
                scalars.insert(window_cross_row(w), (g * heads) as u32);
            }
            let mel = Tensor::f32([*size, dims[0], dims[1]], values)?;
            encoder.run(&HashMap::from([(MEL.to_string(), mel)]), &scalars, &[]).await?;
        }
        Ok(())
    }

    /// Copies group `group`'s window, encoded by [`Program::encode_groups`], into the
    /// one-window cross-attention buffers, for its prefill.
    pub async fn take_group(&mut self, group: usize) -> Result<()> {
        let (count, heads, audio) = (self.max_groups(), self.decoder_heads, self.audio_positions);
        if group >= count {
            return Err(Error::bad_argument(format!("group {group} of {count}")));
        }
        let first = (group * heads * audio) as u32;
        let rows = Tensor::u32([heads * audio], (first..first + (heads * audio) as u32).collect())?;
        let take = &mut self.groups.as_mut().ok_or_else(|| Error::backend("no group graphs"))?.take;
        take.run(&HashMap::from([(TAKE_ROWS.to_string(), rows)]), &HashMap::new(), &[]).await?;
        Ok(())
    }

    /// Runs `prompt` from position 0 as [`Program::prefill`] does and returns the no-speech
    /// probability and the best `2 · beams` first tokens, as [`Program::beam_prefill`], without
    /// starting the one-window beams: what [`Program::join_group`] then copies into a group.
    pub async fn group_prefill(&mut self, prompt: &[u32], sot: usize, rules: &Rules) -> Result<(f32, Vec<Candidate>)> {
        let beams = self.max_beams();
        if self.max_groups() < 2 {
            return Err(Error::bad_argument("this program has no group graphs"));
        }
        let out = self
            .run_prefill(prompt, sot, rules, Sampling::Greedy, &[CANDIDATES, CANDIDATE_SCORES, NO_SPEECH_PROB])
            .await?;
        Ok((scalar_f32(&out, NO_SPEECH_PROB)?, self.read_candidates(&out, 2 * beams)?))
    }

    /// Makes the last prefill's window (its `prompt_len` tokens' caches and the encoded
    /// window) group `group`'s, for a first group step writing ring slot `slot`: the prompt's
    /// keys go to the `prompt_len` slots before it.
    pub async fn join_group(&mut self, group: usize, prompt_len: usize, slot: usize) -> Result<()> {
        let (beams, heads, ctx) = (self.max_beams(), self.decoder_heads, self.n_text_ctx);
        let count = self.max_groups();
        if group >= count || prompt_len == 0 || prompt_len >= ctx || slot >= ctx {
            return Err(Error::bad_argument(format!(
                "group {group} of {count}, a prompt of {prompt_len} tokens, slot {slot} of {ctx}"
            )));
        }
        // Slot s holds position (s - slot + prompt_len) mod ctx: the prompt's keys are the
        // prompt_len slots before `slot`; the others hold keys no row of the group sees.
        let mut rows = Vec::with_capacity(beams * heads * ctx);
        for _ in 0..beams {
            for h in 0..heads {
                rows.extend((0..ctx).map(|s| (h * ctx + (s + 2 * ctx - slot + prompt_len) % ctx) as u32));
            }
        }
        let inputs = HashMap::from([(RING_ROWS.to_string(), Tensor::u32([beams * heads * ctx], rows)?)]);
        let scalars = HashMap::from([
            (CACHE_ROW.to_string(), (group * beams * heads) as u32),
            (CROSS_ROW.to_string(), (group * heads) as u32),
        ]);
        let join = &mut self.groups.as_mut().ok_or_else(|| Error::backend("no group graphs"))?.join;
        join.run(&inputs, &scalars, &[]).await?;
        Ok(())
    }

    /// Runs one group step writing ring slot `slot`: the groups given beams (`None` for a
    /// free group, which runs dead) each take one token per beam. Returns each given group's
    /// best `2 · beams` continuations over its beams, best first.
    pub async fn group_step(
        &mut self,
        groups: &[Option<GroupInput>],
        slot: usize,
        timestamps: bool,
    ) -> Result<Vec<Option<Vec<Candidate>>>> {
        let (beams, heads, ctx) = (self.max_beams(), self.decoder_heads, self.n_text_ctx);
        let count = self.max_groups();
        if groups.len() != count || slot >= ctx {
            return Err(Error::bad_argument(format!(
                "{} groups for a program of {count}, slot {slot} of {ctx}",
                groups.len()
            )));
        }
        let rows = count * beams;
        let (mut tokens, mut previous, mut latest, mut scores) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut positions, mut parent_rows) = (Vec::with_capacity(rows), Vec::with_capacity(rows * heads));
        let (mut from, mut span) = (Vec::with_capacity(rows * heads), Vec::with_capacity(rows * heads));
        for (g, group) in groups.iter().enumerate() {
            let (seen_from, seen_span) = match group {
                Some(group) => {
                    if group.beams.len() != beams || group.position >= ctx || group.from >= ctx {
                        return Err(Error::bad_argument(format!(
                            "group {g}: {} beams of {beams} at position {} from slot {}, in a context of {ctx}",
                            group.beams.len(),
                            group.position,
                            group.from
                        )));
                    }
                    ((group.from) as f32, ((slot + ctx - group.from) % ctx) as f32)
                }
                None => (slot as f32, 0.0),
            };
            for k in 0..beams {
                let (h, parent, score, position) = match group {
                    Some(group) => {
                        let beam = group.beams[k];
                        (beam.history, beam.parent, beam.score, group.position)
                    }
                    None => (
                        History { last: 0, previous: 0, latest: self.no_timestamps, timestamps },
                        k,
                        f32::NEG_INFINITY,
                        0,
                    ),
                };
                let ids = [h.last, h.previous, h.latest];
                if let Some(bad) = ids.into_iter().find(|&t| t as usize >= self.vocab) {
                    return Err(Error::bad_argument(format!(
                        "token {bad} is outside the vocabulary of {}",
                        self.vocab
                    )));
                }
                if parent >= beams {
                    return Err(Error::bad_argument(format!("group {g}: beam {k} continues beam {parent} of {beams}")));
                }
                tokens.push(h.last);
                previous.push(h.previous);
                latest.push(h.latest as f32);
                scores.push(score);
                positions.push(position as u32);
                parent_rows.extend((0..heads).map(|r| ((g * beams + parent) * heads + r) as u32));
                from.extend(std::iter::repeat_n(seen_from, heads));
                span.extend(std::iter::repeat_n(seen_span, heads));
            }
        }
        let inputs = HashMap::from([
            (TOKENS.to_string(), Tensor::u32([rows], tokens)?),
            (PREVIOUS.to_string(), Tensor::u32([rows], previous)?),
            (LATEST.to_string(), Tensor::f32([rows], latest)?),
            (SCORES.to_string(), Tensor::f32([rows, 1], scores)?),
            (POSITIONS.to_string(), Tensor::u32([rows], positions)?),
            (PARENT_ROWS.to_string(), Tensor::u32([rows * heads], parent_rows)?),
            (SEEN_FROM.to_string(), Tensor::f32([rows * heads, 1], from)?),
            (SEEN_SPAN.to_string(), Tensor::f32([rows * heads, 1], span)?),
        ]);
        let scalars = HashMap::from([(OFFSET.to_string(), slot as u32), (TIMESTAMPS.to_string(), timestamps as u32)]);
        let step = &mut self.groups.as_mut().ok_or_else(|| Error::backend("no group graphs"))?.step;
        let out = step.run(&inputs, &scalars, &[CANDIDATES, CANDIDATE_SCORES]).await?;
        let k = 2 * beams;
        let all = self.read_candidates(&out, count * k)?;
        Ok(groups.iter().zip(all.chunks_exact(k)).map(|(group, c)| group.as_ref().map(|_| c.to_vec())).collect())
    }

    /// Whether the program has alignment graphs ([`ProgramSpec::alignment`]).
    pub fn can_align(&self) -> bool {
        !self.aligns.is_empty()
    }

    /// Runs the alignment graph on `tokens` (a whole decoded sequence, from
    /// `<|startoftranscript|>` to end of text) against the encoded window, whose audio fills
    /// `frames` encoder positions.
    pub async fn align(&mut self, tokens: &[u32], frames: usize) -> Result<Alignment> {
        let len = tokens.len();
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::bad_argument(format!("token {bad} is outside the vocabulary of {}", self.vocab)));
        }
        if frames == 0 || frames > self.audio_positions {
            return Err(Error::bad_argument(format!("{frames} audio positions of {}", self.audio_positions)));
        }
        let longest = self.aligns.last().map_or(0, |(s, _)| *s);
        let (size, exe) = self.aligns.iter_mut().find(|(s, _)| *s >= len).ok_or_else(|| {
            Error::bad_argument(format!("a sequence of {len} tokens to align, where the longest is {longest}"))
        })?;
        let size = *size;
        let mut padded = tokens.to_vec();
        padded.resize(size, self.pad_token);
        // Row r's next token, where it is text (others read token 0 and are ignored).
        let tv = self.text_vocab;
        let next: Vec<u32> = (0..size as u32)
            .map(|r| {
                let t = padded.get(r as usize + 1).copied().filter(|&t| t < tv).unwrap_or(0);
                r * tv + t
            })
            .collect();
        let inputs = HashMap::from([
            (TOKENS.to_string(), Tensor::u32([size], padded)?),
            (NEXT_INDEX.to_string(), Tensor::u32([size], next)?),
        ]);
        let scalars = HashMap::from([(OFFSET.to_string(), 0), (FRAMES.to_string(), frames as u32)]);
        let out = exe.run(&inputs, &scalars, &[ALIGNMENT, TOKEN_PROBS]).await?;
        let missing = || Error::backend("the alignment graph returned nothing");
        let all = out.get(ALIGNMENT).map(|t| t.to_f32()).ok_or_else(missing)?;
        let probs = out.get(TOKEN_PROBS).map(|t| t.to_f32()).ok_or_else(missing)?;
        let (heads, audio) = (self.alignment_heads, self.audio_positions);
        if all.len() != heads * size * audio || probs.len() != size {
            return Err(missing());
        }
        let mut weights = Vec::with_capacity(heads * len * frames);
        for h in 0..heads {
            for r in 0..len {
                let row = (h * size + r) * audio;
                weights.extend_from_slice(&all[row..row + frames]);
            }
        }
        Ok(Alignment { weights, heads, frames, next_probs: probs[..len - 1].to_vec() })
    }

    /// The first `n` candidates of a beam run's outputs.
    fn read_candidates(&self, out: &HashMap<String, Tensor>, n: usize) -> Result<Vec<Candidate>> {
        let missing = || Error::backend("the decoder returned no beam candidates");
        let ids = out.get(CANDIDATES).and_then(|t| t.as_u32()).ok_or_else(missing)?;
        let scores = out.get(CANDIDATE_SCORES).map(|t| t.to_f32()).ok_or_else(missing)?;
        if ids.len() < n || scores.len() < n {
            return Err(missing());
        }
        Ok(ids[..n]
            .iter()
            .zip(&scores[..n])
            .map(|(&id, &score)| Candidate {
                beam: id as usize / self.vocab,
                token: (id as usize % self.vocab) as u32,
                score,
            })
            .collect())
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
    use susurrus_core::ir::DType;

    use crate::load::weights::testing::{multilingual_config, small_config};

    fn spec() -> ProgramSpec {
        ProgramSpec {
            selection: Selection {
                suppress: vec![1, 3],
                blank: vec![7],
                timestamp_begin: 15,
                end_of_text: 11,
                no_timestamps: 14,
                penalties: false,
            },
            no_speech: 12,
            beams: 3,
            alignment: true,
            long_prompts: false,
            groups: 0,
        }
    }

    fn program(backend: &dyn Backend) -> Program {
        program_of(backend, small_config())
    }

    fn program_of(backend: &dyn Backend, config: crate::load::config::WhisperConfig) -> Program {
        let model = crate::load::weights::testing::random(config, DType::F16, 7);
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

    /// The best continuation of `prompt + seq` and its log-probability, from a prefill of the
    /// whole sequence: the oracle of the beam tests.
    fn after(p: &mut Program, prompt: &[u32], seq: &[u32]) -> Choice {
        let whole: Vec<u32> = prompt.iter().chain(seq).copied().collect();
        pollster::block_on(p.prefill(&whole, 0, &Rules::default(), Sampling::Greedy)).unwrap()
    }

    /// Beams as a batch: the prefill's best candidate is the greedy choice, and after each
    /// beam step every beam's best candidate is what a prefill of that beam's whole sequence
    /// chooses, its score the beam's plus the choice's log-probability — with beams that
    /// swap and share parents, so every cache row must follow its beam.
    fn beams_follow_their_sequences(backend: &dyn Backend) {
        let mut p = program(backend);
        let prompt = [10, 2];
        let greedy = after(&mut p, &prompt, &[]);
        let (no_speech, first) = pollster::block_on(p.beam_prefill(&prompt, 0, &Rules::default(), 3)).unwrap();
        assert_eq!(Some(no_speech), greedy.no_speech_prob);
        assert_eq!(first.len(), 6);
        assert!(first.iter().all(|c| c.beam == 0));
        assert_eq!(first[0].token, greedy.token);
        assert!((first[0].score - greedy.logprob).abs() < 1e-4, "{first:?} vs {greedy:?}");
        assert!(first.windows(2).all(|w| w[0].score >= w[1].score), "{first:?}");
        // Three beams from the prefill's candidates 2, 0 and 1, then three rounds in which
        // the beams continue the candidates of ranks 1, 0, 2 (whichever beams they extend).
        let mut beams: Vec<(Vec<u32>, f32)> =
            [2, 0, 1].iter().map(|&r| (vec![first[r].token], first[r].score)).collect();
        let mut parents = vec![0, 0, 0];
        for round in 0..3 {
            let position = prompt.len() + round;
            let inputs: Vec<BeamInput> = beams
                .iter()
                .zip(&parents)
                .map(|((seq, score), &parent)| BeamInput {
                    history: p.history(seq, false).unwrap(),
                    parent,
                    score: *score,
                })
                .collect();
            let got = pollster::block_on(p.beam_step(&inputs, position, false)).unwrap();
            assert_eq!(got.len(), 6);
            assert!(got.windows(2).all(|w| w[0].score >= w[1].score), "{got:?}");
            for (b, (seq, score)) in beams.iter().enumerate() {
                let Some(best) = got.iter().find(|c| c.beam == b) else { continue };
                let want = after(&mut p, &prompt, seq);
                assert_eq!(best.token, want.token, "round {round} beam {b}: {got:?}");
                assert!(
                    (best.score - (score + want.logprob)).abs() < 1e-4,
                    "round {round} beam {b}: {got:?} vs {want:?}"
                );
            }
            // The oracle's prefills overwrote the one-sequence caches only; the beams'
            // caches are theirs. Next: continue ranks 1, 0, 2.
            let next: Vec<Candidate> = [1, 0, 2].iter().map(|&r| got[r]).collect();
            beams = next.iter().map(|c| ([beams[c.beam].0.clone(), vec![c.token]].concat(), c.score)).collect();
            parents = next.iter().map(|c| c.beam).collect();
        }
        // Fewer beams than the graph has: the others run dead and never rank.
        let (_, first) = pollster::block_on(p.beam_prefill(&prompt, 0, &Rules::default(), 2)).unwrap();
        let inputs: Vec<BeamInput> = first[..2]
            .iter()
            .map(|c| BeamInput { history: p.history(&[c.token], false).unwrap(), parent: 0, score: c.score })
            .collect();
        let got = pollster::block_on(p.beam_step(&inputs, prompt.len(), false)).unwrap();
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(|c| c.beam < 2 && c.score.is_finite()), "{got:?}");
        let err = pollster::block_on(p.beam_step(&inputs[..1], prompt.len(), false)).unwrap_err().to_string();
        assert!(err.contains("1 beams, where this program runs 2 to 3"), "{err}");
    }

    /// The beams after `got` (ranked candidates) continuing ranks 1, 0, 2 of it: the
    /// sequences with their scores, and the inputs of the next beam or group step.
    fn continue_ranks(
        p: &Program,
        beams: &[(Vec<u32>, f32)],
        got: &[Candidate],
    ) -> (Vec<(Vec<u32>, f32)>, Vec<BeamInput>) {
        let next: Vec<Candidate> = [1, 0, 2].iter().map(|&r| got[r]).collect();
        let grown: Vec<(Vec<u32>, f32)> =
            next.iter().map(|c| ([beams[c.beam].0.clone(), vec![c.token]].concat(), c.score)).collect();
        let inputs = grown
            .iter()
            .zip(&next)
            .map(|((seq, score), c)| BeamInput {
                history: p.history(seq, true).unwrap(),
                parent: c.beam,
                score: *score,
            })
            .collect();
        (grown, inputs)
    }

    fn assert_same(got: &[Candidate], want: &[Candidate], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.beam, g.token), (w.beam, w.token), "{what}: {got:?} vs {want:?}");
            assert!((g.score - w.score).abs() < 1e-4, "{what}: {got:?} vs {want:?}");
        }
    }

    /// Two windows in groups, the second joining a step after the first with a longer
    /// prompt (so their positions and ring slots differ, and the ring of 5 slots wraps),
    /// a free group between them: each group's candidates at every step are those of its
    /// window's beam search run alone.
    fn groups_decode_as_windows_alone(backend: &dyn Backend) {
        let model = crate::load::weights::testing::random(small_config(), DType::F16, 7);
        let model = ModelWeights::new(&model).unwrap();
        let spec = ProgramSpec { groups: 3, ..spec() };
        let mut p = pollster::block_on(Program::compile(backend, &model, &spec)).unwrap();
        assert_eq!((p.max_groups(), p.max_beams()), (3, 3));
        let c = &model.config;
        let mel = |k: usize| {
            let values = (0..c.n_mels * c.n_frames()).map(|i| ((i * 37 + k * 13) % 11) as f32 / 11.0 - 0.5).collect();
            Tensor::f32([c.n_mels, c.n_frames()], values).unwrap()
        };
        let windows = [(mel(0), vec![10u32, 2]), (mel(1), vec![10u32, 2, 4])];
        let rules = Rules::default();
        // Alone: the prefill's candidates, then each round's, continuing ranks 1, 0, 2.
        let mut alone: Vec<Vec<Vec<Candidate>>> = Vec::new();
        for (mel, prompt) in &windows {
            pollster::block_on(p.encode(mel, false)).unwrap();
            let (_, first) = pollster::block_on(p.beam_prefill(prompt, 0, &rules, 3)).unwrap();
            let mut beams: Vec<(Vec<u32>, f32)> = vec![(vec![], 0.0)];
            let mut rounds = vec![first.clone()];
            let mut got = first;
            for position in prompt.len()..c.n_text_ctx {
                let inputs;
                (beams, inputs) = continue_ranks(&p, &beams, &got);
                got = pollster::block_on(p.beam_step(&inputs, position, true)).unwrap();
                rounds.push(got.clone());
            }
            alone.push(rounds);
        }
        // Together: window 0 joins group 0 before step 0 (slot 0), window 1 group 2 before
        // step 1 (slot 1).
        let mut beams: Vec<Vec<(Vec<u32>, f32)>> = vec![vec![(vec![], 0.0)]; 2];
        let mut got: Vec<Vec<Candidate>> = vec![Vec::new(); 2];
        let mut from = [0usize; 2];
        let ctx = c.n_text_ctx;
        for slot in 0..3 {
            if slot < 2 {
                let (mel, prompt) = &windows[slot];
                pollster::block_on(p.encode(mel, false)).unwrap();
                let (_, first) = pollster::block_on(p.group_prefill(prompt, 0, &rules)).unwrap();
                assert_same(&first, &alone[slot][0], &format!("window {slot}'s prefill"));
                pollster::block_on(p.join_group(2 * slot, prompt.len(), slot)).unwrap();
                from[slot] = (slot + ctx - prompt.len()) % ctx;
                got[slot] = first;
            }
            let mut groups: Vec<Option<GroupInput>> = vec![None; 3];
            let mut stepped = Vec::new();
            for w in 0..2 {
                let step = if slot >= w { slot - w } else { continue };
                let position = windows[w].1.len() + step;
                if position >= ctx {
                    continue;
                }
                let inputs;
                (beams[w], inputs) = continue_ranks(&p, &beams[w], &got[w]);
                groups[2 * w] = Some(GroupInput { beams: inputs, position, from: from[w] });
                stepped.push((w, step));
            }
            let out = pollster::block_on(p.group_step(&groups, slot, true)).unwrap();
            assert!(out[1].is_none());
            for (w, step) in stepped {
                got[w] = out[2 * w].clone().unwrap();
                assert_same(&got[w], &alone[w][step + 1], &format!("window {w}, step {step}"));
            }
        }
        let err = pollster::block_on(p.group_step(&[None, None], 0, true)).unwrap_err().to_string();
        assert!(err.contains("2 groups for a program of 3"), "{err}");
    }

    /// Three windows encoded together (by the encoder of 4 windows, the fourth repeating
    /// the first) into groups 4, 1 and 2 of 5: each one's prefill, taken from its group,
    /// gives what it gives on the window encoded alone.
    fn windows_encoded_together_prefill_as_alone(backend: &dyn Backend) {
        let model = crate::load::weights::testing::random(small_config(), DType::F16, 11);
        let model = ModelWeights::new(&model).unwrap();
        let spec = ProgramSpec { groups: 5, ..spec() };
        let mut p = pollster::block_on(Program::compile(backend, &model, &spec)).unwrap();
        let c = &model.config;
        let mel = |k: usize| {
            let values = (0..c.n_mels * c.n_frames()).map(|i| ((i * 29 + k * 17) % 13) as f32 / 13.0 - 0.5).collect();
            Tensor::f32([c.n_mels, c.n_frames()], values).unwrap()
        };
        let mels = [mel(0), mel(1), mel(2)];
        let (prompt, rules) = ([10u32, 2, 4], Rules::default());
        let alone: Vec<(f32, Vec<Candidate>)> = mels
            .iter()
            .map(|m| {
                pollster::block_on(p.encode(m, false)).unwrap();
                pollster::block_on(p.group_prefill(&prompt, 0, &rules)).unwrap()
            })
            .collect();
        let groups = [4, 1, 2];
        let windows: Vec<(&Tensor, usize)> = mels.iter().zip(groups).collect();
        pollster::block_on(p.encode_groups(&windows)).unwrap();
        // Taken in another order than encoded, the last encoded window's prefill in between.
        for w in [1, 0, 2] {
            pollster::block_on(p.take_group(groups[w])).unwrap();
            let (no_speech, first) = pollster::block_on(p.group_prefill(&prompt, 0, &rules)).unwrap();
            assert!((no_speech - alone[w].0).abs() < 1e-5, "window {w}: {no_speech} vs {}", alone[w].0);
            assert_same(&first, &alone[w].1, &format!("window {w}'s prefill"));
        }
        let err = pollster::block_on(p.encode_groups(&[(&mels[0], 5), (&mels[1], 0)])).unwrap_err().to_string();
        assert!(err.contains("group 5 of 5"), "{err}");
        let err = pollster::block_on(p.take_group(5)).unwrap_err().to_string();
        assert!(err.contains("group 5 of 5"), "{err}");
    }

    susurrus_testkit::for_each_backend!(fn windows_encoded_together_prefill_as_alone(backend) {
        windows_encoded_together_prefill_as_alone(backend.as_ref());
    });

    susurrus_testkit::for_each_backend!(fn groups_decode_as_windows_alone(backend) {
        groups_decode_as_windows_alone(backend.as_ref());
    });

    susurrus_testkit::for_each_backend!(fn beams_follow_their_sequences(backend) {
        beams_follow_their_sequences(backend.as_ref());
    });

    /// The alignment graph: each head's row is a softmax over the window's frames only, the
    /// next-token probabilities are probabilities, and the CPU reference and wgpu agree.
    #[test]
    fn alignment_rows_are_softmaxes_over_the_window_on_both_backends() {
        let wgpu = susurrus_testkit::backends::wgpu();
        let mut results = Vec::new();
        for backend in [&CpuBackend::new() as &dyn Backend, wgpu.as_ref()] {
            let mut p = program(backend);
            assert!(p.can_align());
            let a = pollster::block_on(p.align(&[10, 2, 4, 5, 11], 5)).unwrap();
            assert_eq!((a.heads, a.frames, a.weights.len(), a.next_probs.len()), (2, 5, 2 * 5 * 5, 4));
            for row in a.weights.chunks(5) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
            }
            assert!(a.next_probs.iter().all(|&p| p > 0.0 && p <= 1.0), "{:?}", a.next_probs);
            let err = pollster::block_on(p.align(&[10, 2], 0)).unwrap_err().to_string();
            assert!(err.contains("0 audio positions"), "{err}");
            results.push(a);
        }
        for (c, w) in results[0].weights.iter().zip(&results[1].weights) {
            assert!((c - w).abs() < 1e-4, "cpu {c} wgpu {w}");
        }
        for (c, w) in results[0].next_probs.iter().zip(&results[1].next_probs) {
            assert!((c - w).abs() < 1e-4, "cpu {c} wgpu {w}");
        }
    }

    /// More alignment heads than one kernel binds inputs (9, each head listed twice or more):
    /// the alignment graph still compiles and runs on wgpu, with the CPU's weights.
    #[test]
    fn alignment_of_many_heads_runs_on_wgpu() {
        let mut config = small_config();
        config.generation.alignment_heads = [(0, 0), (0, 1), (1, 0), (1, 1)].repeat(2);
        config.generation.alignment_heads.push((1, 1));
        let wgpu = susurrus_testkit::backends::wgpu();
        let mut weights = Vec::new();
        for backend in [&CpuBackend::new() as &dyn Backend, wgpu.as_ref()] {
            let mut p = program_of(backend, config.clone());
            let a = pollster::block_on(p.align(&[10, 2, 4, 11], 6)).unwrap();
            assert_eq!((a.heads, a.weights.len()), (9, 9 * 4 * 6));
            weights.push(a.weights);
        }
        for (c, w) in weights[0].iter().zip(&weights[1]) {
            assert!((c - w).abs() < 1e-4, "cpu {c} wgpu {w}");
        }
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
        let weights = crate::load::weights::testing::random(multilingual_config(), DType::F32, 5);
        let model = ModelWeights::new(&weights).unwrap();
        let c = &model.config;
        let spec = ProgramSpec {
            selection: Selection {
                suppress: vec![1, 2],
                blank: vec![220, 50257],
                timestamp_begin: 50365,
                end_of_text: 50257,
                no_timestamps: 50364,
                penalties: false,
            },
            no_speech: 50363,
            beams: 0,
            alignment: false,
            long_prompts: false,
            groups: 0,
        };
        let mel =
            Tensor::f32([128, c.n_frames()], (0..128 * c.n_frames()).map(|i| (i % 7) as f32 / 7.0).collect()).unwrap();
        let mut choices = Vec::new();
        let wgpu = susurrus_testkit::backends::wgpu();
        for backend in [&CpuBackend::new() as &dyn Backend, wgpu.as_ref()] {
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

    susurrus_testkit::for_each_backend!(fn steps_match_prefill(backend) {
        steps_match_prefill(backend.as_ref());
    });

    susurrus_testkit::for_each_backend!(fn chains_match_single_steps(backend) {
        chains_match_single_steps(backend.as_ref());
    });

    susurrus_testkit::for_each_backend!(fn rules_ban_tokens(backend) {
        rules_ban_tokens(backend.as_ref());
    });
}
