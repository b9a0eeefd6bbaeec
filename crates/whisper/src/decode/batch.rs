//! Many transcriptions on one model, their windows decoded together: what a server runs.
//!
//! Each transcription runs its own seek loop ([`crate::decode::transcribe`]) with a [`RemoteModel`],
//! whose device calls become [`Request`]s to the one thread that owns the [`Whisper`]. There
//! a [`Scheduler`] answers them: while two or more windows are to be decoded, each joins a
//! group of the program's group beam search ([`crate::graphs::groups`]) as soon as one is free, and
//! every group step advances all the groups' searches at once, so the decoder's weights are
//! read once per step for all of them, and the windows that join in one round are encoded
//! together (one encoder run over all of them); a window alone decodes alone (a group step
//! costs every group, free ones too). Language detection, alignment and windows whose options the groups
//! do not run (other beam counts, sampling first, token penalties) run alone between two
//! steps. A group's result goes through the options' temperature fallback
//! like any window's (the rare fallback decodes alone), so a transcription gives the text it
//! gives on its own. A device lost on the way is replaced at once: the groups' windows are
//! answered with the loss, and their transcriptions ask to go on ([`Request::Reopen`]) and
//! decode them again, as one transcription does on its own model.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::audio::mel::LogMel;
use crate::decode::beam::BeamSearch;
use crate::decode::model::Whisper;
use crate::decode::options::TranscribeOptions;
use crate::decode::window::{Decoded, NoiseRng, WindowDecoder};
use crate::decode::windows::{DecodeRequest, Host, WindowModel};
use crate::error::{Error, Result};
use crate::load::config::WhisperConfig;
use crate::program::{Alignment, BeamInput, Candidate, GroupInput};
use crate::text::tokenizer::Tokenizer;
use susurrus_core::Error as CoreError;
use susurrus_core::tensor::Tensor;

/// A device call of one transcription, with what it needs (the window's log-mel each time:
/// other transcriptions' windows come in between).
pub enum Request {
    Prepare {
        options: Arc<TranscribeOptions>,
    },
    DetectLanguage {
        window: Tensor,
    },
    Decode(Box<WindowJob>),
    Align {
        window: Tensor,
        fresh: bool,
        tokens: Vec<u32>,
        frames: usize,
    },
    /// The device was lost in this transcription's last call: it goes on once the model
    /// runs on a new one.
    Reopen,
}

/// A window to decode: its log-mel, the prompt (`<|startoftranscript|>` at `sot`), the
/// tokens the transcript is forced to start with, the options and the noise generator.
pub struct WindowJob {
    pub window: Tensor,
    pub prompt: Vec<u32>,
    pub sot: usize,
    pub forced: Vec<u32>,
    pub options: Arc<TranscribeOptions>,
    pub rng: NoiseRng,
}

/// The window decoder of `job` with the model's `tokenizer`, for a vocabulary of `vocab`.
fn decoder<'a>(tokenizer: &'a Tokenizer, vocab: usize, job: &'a WindowJob) -> WindowDecoder<'a> {
    let ids = tokenizer.special_ids();
    WindowDecoder { ids, tokenizer, options: &job.options, vocab: vocab as u32, forced: &job.forced }
}

/// The answer to a [`Request`] of the same kind.
pub enum Reply {
    Prepared,
    Reopened,
    Language(String, f32),
    /// The decoded window and the noise generator where the decoding left it.
    Decoded(Decoded, Box<NoiseRng>),
    Aligned(Alignment),
}

/// The host's share of a model, owned: what every [`RemoteModel`] of a server shares.
pub struct HostParts {
    pub tokenizer: Tokenizer,
    pub config: WhisperConfig,
    pub mel: LogMel,
}

impl Whisper {
    /// A copy of the tokenizer, sizes and front end, for transcriptions run elsewhere.
    pub fn host_parts(&self) -> HostParts {
        HostParts { tokenizer: self.tokenizer.clone(), config: self.config.clone(), mel: self.mel.clone() }
    }
}

/// A transcription's model on another thread: each device call is handed to `call` (which
/// sends it to the [`Scheduler`]'s thread and waits for its answer).
pub struct RemoteModel<F> {
    host: Arc<HostParts>,
    call: F,
}

impl<F: FnMut(Request) -> Result<Reply>> RemoteModel<F> {
    pub fn new(host: Arc<HostParts>, call: F) -> RemoteModel<F> {
        RemoteModel { host, call }
    }
}

fn unexpected() -> Error {
    Error::backend("the model thread answered another request")
}

impl<F: FnMut(Request) -> Result<Reply>> WindowModel for RemoteModel<F> {
    fn host(&self) -> Host<'_> {
        Host { tokenizer: &self.host.tokenizer, config: &self.host.config, mel: &self.host.mel }
    }

    async fn prepare(&mut self, options: &TranscribeOptions) -> Result<()> {
        match (self.call)(Request::Prepare { options: Arc::new(options.clone()) })? {
            Reply::Prepared => Ok(()),
            _ => Err(unexpected()),
        }
    }

    async fn detect_language(&mut self, window: &Tensor, _fresh: bool) -> Result<(String, f32)> {
        match (self.call)(Request::DetectLanguage { window: window.clone() })? {
            Reply::Language(language, p) => Ok((language, p)),
            _ => Err(unexpected()),
        }
    }

    async fn decode(
        &mut self,
        window: &Tensor,
        _fresh: bool,
        request: &DecodeRequest<'_>,
        rng: &mut NoiseRng,
    ) -> Result<Decoded> {
        let request = Request::Decode(Box::new(WindowJob {
            window: window.clone(),
            prompt: request.prompt.to_vec(),
            sot: request.sot,
            forced: request.forced.to_vec(),
            options: Arc::new(request.options.clone()),
            rng: rng.clone(),
        }));
        match (self.call)(request)? {
            Reply::Decoded(decoded, after) => {
                *rng = *after;
                Ok(decoded)
            }
            _ => Err(unexpected()),
        }
    }

    async fn align(&mut self, window: &Tensor, fresh: bool, tokens: &[u32], frames: usize) -> Result<Alignment> {
        let request = Request::Align { window: window.clone(), fresh, tokens: tokens.to_vec(), frames };
        match (self.call)(request)? {
            Reply::Aligned(alignment) => Ok(alignment),
            _ => Err(unexpected()),
        }
    }

    async fn reopen(&mut self) -> Result<()> {
        match (self.call)(Request::Reopen)? {
            Reply::Reopened => Ok(()),
            _ => Err(unexpected()),
        }
    }
}

/// A window in a group: its job and its beam search.
struct Group<T> {
    tag: T,
    job: Box<WindowJob>,
    search: BeamSearch,
    alive: Vec<Vec<u32>>,
    candidates: Vec<Candidate>,
    no_speech_prob: f32,
    /// The ring slot its prompt's keys start at.
    from: usize,
    step: usize,
    max_steps: usize,
}

/// A request waiting for the model, with whom it came from.
struct Waiting<T> {
    client: u64,
    request: Request,
    tag: T,
}

/// Answers the [`Request`]s of many transcriptions on one [`Whisper`] (see the module's
/// text). `T` tags each request with where its answer goes.
pub struct Scheduler<T> {
    groups: Vec<Option<Group<T>>>,
    /// The ring slot the next group step writes.
    slot: usize,
    waiting: VecDeque<Waiting<T>>,
    /// The client whose window the encoder last ran on (an alignment of the window it just
    /// decoded alone needs no encoding again).
    encoded: Option<u64>,
    /// False after the device was lost and no new one opened (a [`Request::Reopen`] tries
    /// again).
    usable: bool,
    /// Group steps run and the groups they ran, for the server's metrics.
    steps: u64,
    group_windows: u64,
}

/// What one [`Scheduler::work`] did: the answers it has, and how many groups its step ran.
pub struct Work<T> {
    pub answers: Vec<(T, Result<Reply>)>,
    /// The windows the group step decoded together (0 when none ran).
    pub batch: usize,
    /// The windows that joined groups encoded together (0 when fewer than two joined).
    pub encoded: usize,
}

impl<T> Scheduler<T> {
    /// A scheduler for `whisper`, whose program has [`Whisper::max_groups`] groups (none:
    /// every window decodes alone).
    pub fn new(whisper: &Whisper) -> Scheduler<T> {
        Scheduler {
            groups: (0..whisper.program.max_groups()).map(|_| None).collect(),
            slot: 0,
            waiting: VecDeque::new(),
            encoded: None,
            usable: true,
            steps: 0,
            group_windows: 0,
        }
    }

    /// Takes `request` from `client` (one transcription), answered by a later [`Scheduler::work`].
    pub fn submit(&mut self, client: u64, request: Request, tag: T) {
        self.waiting.push_back(Waiting { client, request, tag });
    }

    /// Whether nothing waits and no group is decoding.
    pub fn idle(&self) -> bool {
        self.waiting.is_empty() && self.active() == 0
    }

    /// Windows decoding in groups now.
    pub fn active(&self) -> usize {
        self.groups.iter().flatten().count()
    }

    /// Group steps run so far, and the windows they decoded summed over the steps.
    pub fn steps(&self) -> (u64, u64) {
        (self.steps, self.group_windows)
    }

    /// Whether a window decoded with `options` can join the groups now: they exist and run
    /// its beam search (beam search first, as many beams, no token penalties, the same
    /// timestamp rule as the groups decoding).
    fn groups_run(&self, whisper: &Whisper, options: &TranscribeOptions) -> bool {
        let program = &whisper.program;
        let timestamps = self.groups.iter().flatten().next().map(|g| g.job.options.timestamps);
        program.max_groups() >= 2
            && options.beam_size == program.max_beams()
            && options.temperatures.first() == Some(&0.0)
            && options.repetition_penalty == 1.0
            && options.no_repeat_ngram_size == 0
            && timestamps.is_none_or(|t| t == options.timestamps)
    }

    /// Answers what can be answered now, in the order it came: windows join free groups
    /// (those that cannot wait for one), everything else runs alone; then one group step
    /// advances every group, and the groups whose search ended are answered.
    pub async fn work(&mut self, whisper: &mut Whisper) -> Work<T> {
        let mut answers = Vec::new();
        let mut kept = VecDeque::new();
        // A window with no other to decode beside it decodes alone: a group step costs all
        // the groups, free ones too.
        let joinable = self
            .waiting
            .iter()
            .filter(|w| matches!(&w.request, Request::Decode(job) if self.groups_run(whisper, &job.options)))
            .count();
        let together = joinable + self.active() >= 2;
        let mut joining: Vec<(usize, Box<WindowJob>, T)> = Vec::new();
        while let Some(w) = self.waiting.pop_front() {
            let joins = match &w.request {
                Request::Decode(job) => together && self.groups_run(whisper, &job.options),
                // A recompile waits for the groups to finish (it would drop their caches).
                Request::Prepare { options } => {
                    !whisper.supports(options) && (self.active() > 0 || !joining.is_empty())
                }
                _ => false,
            };
            let free = (0..self.groups.len())
                .find(|&g| self.groups[g].is_none() && joining.iter().all(|(taken, ..)| *taken != g));
            match (w.request, joins, free) {
                (Request::Decode(job), true, Some(g)) => joining.push((g, job, w.tag)),
                (request, true, _) => kept.push_back(Waiting { request, ..w }),
                (request, false, _) => {
                    let answer = self.alone(whisper, w.client, request).await;
                    answers.push((w.tag, answer));
                }
            }
        }
        self.waiting = kept;
        let encoded = if joining.len() >= 2 { joining.len() } else { 0 };
        answers.extend(self.join(whisper, joining).await);
        let batch = self.active();
        if batch > 0 {
            answers.extend(self.step(whisper).await);
        }
        let lost = answers.iter().find_map(|(_, a)| match a {
            Err(e @ Error::Core(CoreError::DeviceLost(_))) => Some(e.clone()),
            _ => None,
        });
        if let Some(lost) = lost {
            self.reopen(whisper, lost, &mut answers).await;
        }
        Work { answers, batch, encoded }
    }

    /// The device was lost: every group's window is answered with the loss (its
    /// transcription asks for [`Request::Reopen`] and runs it again) and the model is
    /// compiled on a new device. Where that fails, the next call's error says so.
    async fn reopen(&mut self, whisper: &mut Whisper, lost: Error, answers: &mut Vec<(T, Result<Reply>)>) {
        for slot in self.groups.iter_mut() {
            if let Some(g) = slot.take() {
                answers.push((g.tag, Err(lost.clone())));
            }
        }
        self.encoded = None;
        self.usable = whisper.reopen_device().await.is_ok();
    }

    /// Runs one request alone.
    async fn alone(&mut self, whisper: &mut Whisper, client: u64, request: Request) -> Result<Reply> {
        let encoded = self.encoded.take();
        let reply = match request {
            Request::Prepare { options } => {
                whisper.prepare_selection(&options).await?;
                return Ok(Reply::Prepared);
            }
            Request::Reopen => {
                if !self.usable {
                    whisper.reopen_device().await?;
                    self.usable = true;
                }
                return Ok(Reply::Reopened);
            }
            Request::DetectLanguage { window } => {
                let (language, p) = WindowModel::detect_language(whisper, &window, true).await?;
                Reply::Language(language, p)
            }
            Request::Decode(mut job) => {
                let j = &mut *job;
                let request = DecodeRequest { prompt: &j.prompt, sot: j.sot, forced: &j.forced, options: &j.options };
                let decoded = whisper.decode(&j.window, true, &request, &mut j.rng).await?;
                Reply::Decoded(decoded, Box::new(job.rng))
            }
            Request::Align { window, fresh, tokens, frames } => {
                let again = fresh || encoded != Some(client);
                Reply::Aligned(whisper.align(&window, again, &tokens, frames).await?)
            }
        };
        self.encoded = Some(client);
        Ok(reply)
    }

    /// Starts the beam searches of windows joining free groups: their encoder (together
    /// when several join, so that its products have all their rows), then each one's
    /// prefill and join. Returns the answers of those that failed.
    async fn join(
        &mut self,
        whisper: &mut Whisper,
        joining: Vec<(usize, Box<WindowJob>, T)>,
    ) -> Vec<(T, Result<Reply>)> {
        if joining.is_empty() {
            return Vec::new();
        }
        self.encoded = None;
        let together = joining.len() >= 2;
        if together {
            let windows: Vec<(&Tensor, usize)> = joining.iter().map(|(g, job, _)| (&job.window, *g)).collect();
            if let Err(error) = whisper.program.encode_groups(&windows).await {
                return joining.into_iter().map(|(.., tag)| (tag, Err(error.clone()))).collect();
            }
        }
        let mut failed = Vec::new();
        for (g, job, tag) in joining {
            let (no_speech_prob, candidates, max_steps) = match self.start(whisper, g, &job, together).await {
                Ok(started) => started,
                Err(error) => {
                    failed.push((tag, Err(error)));
                    continue;
                }
            };
            let ctx = whisper.program.n_text_ctx();
            let o = &job.options;
            let search = BeamSearch::new(
                o.beam_size,
                o.finished_hypotheses(),
                o.length_penalty,
                whisper.tokenizer.special_ids().end_of_text,
            );
            self.groups[g] = Some(Group {
                tag,
                from: (self.slot + ctx - job.prompt.len()) % ctx,
                alive: vec![job.forced.clone()],
                job,
                search,
                candidates,
                no_speech_prob,
                step: 0,
                max_steps,
            });
        }
        failed
    }

    /// Runs a joining window's prefill on its encoded window (encoded with others:
    /// `together`, in group `g`'s rows; else now) and makes it group `g`'s. Returns its
    /// no-speech probability, first candidates and most steps.
    async fn start(
        &self,
        whisper: &mut Whisper,
        g: usize,
        job: &WindowJob,
        together: bool,
    ) -> Result<(f32, Vec<Candidate>, usize)> {
        let program = &mut whisper.program;
        match together {
            true => program.take_group(g).await?,
            false => program.encode(&job.window, false).await.map(drop)?,
        }
        let decoder = decoder(&whisper.tokenizer, whisper.config.n_vocab, job);
        let (no_speech_prob, candidates) = program.group_prefill(&job.prompt, job.sot, &decoder.first_rules()).await?;
        program.join_group(g, job.prompt.len(), self.slot).await?;
        Ok((no_speech_prob, candidates, decoder.max_steps(program, &job.prompt)))
    }

    /// One group step: every group's search takes its last candidates; those that go on
    /// run one token; those that ended are answered.
    async fn step(&mut self, whisper: &mut Whisper) -> Vec<(T, Result<Reply>)> {
        let mut ended = Vec::new();
        let mut inputs: Vec<Option<GroupInput>> = Vec::with_capacity(self.groups.len());
        let mut timestamps = true;
        for slot in self.groups.iter_mut() {
            let Some(group) = slot else {
                inputs.push(None);
                continue;
            };
            timestamps = group.job.options.timestamps;
            match advance(&whisper.program, group) {
                Ok(Some(input)) => inputs.push(Some(input)),
                Ok(None) => {
                    ended.push(slot.take().map(Ok));
                    inputs.push(None);
                }
                Err(error) => {
                    ended.push(slot.take().map(|g| Err((g.tag, error))));
                    inputs.push(None);
                }
            }
        }
        let running = inputs.iter().flatten().count();
        if running > 0 {
            self.steps += 1;
            self.group_windows += running as u64;
            match whisper.program.group_step(&inputs, self.slot, timestamps).await {
                Ok(candidates) => {
                    for (group, c) in self.groups.iter_mut().zip(candidates) {
                        if let (Some(group), Some(c)) = (group, c) {
                            group.candidates = c;
                            group.step += 1;
                        }
                    }
                }
                Err(error) => {
                    // The step failed for every group in it (a lost device stays one: the
                    // server sees it in each answer).
                    for slot in self.groups.iter_mut() {
                        if let Some(g) = slot.take() {
                            ended.push(Some(Err((g.tag, error.clone()))));
                        }
                    }
                }
            }
            self.slot = (self.slot + 1) % whisper.program.n_text_ctx();
        }
        let mut answers = Vec::new();
        for group in ended.into_iter().flatten() {
            match group {
                Ok(group) => {
                    let tag_answer = self.finish(whisper, group).await;
                    answers.push(tag_answer);
                }
                Err((tag, error)) => answers.push((tag, Err(error))),
            }
        }
        answers
    }

    /// A group's search ended: its best hypothesis, through the temperature fallback.
    async fn finish(&mut self, whisper: &mut Whisper, group: Group<T>) -> (T, Result<Reply>) {
        let Group { tag, job, search, no_speech_prob, .. } = group;
        let WindowJob { window, prompt, sot, rng, .. } = &*job;
        let mut rng = rng.clone();
        let answer = async {
            let decoder = decoder(&whisper.tokenizer, whisper.config.n_vocab, &job);
            let first = decoder.beam_result(search, no_speech_prob)?;
            if !decoder.falls_back(&first) {
                return Ok(Reply::Decoded(first, Box::new(rng)));
            }
            // The rare fallback decodes alone, on its window encoded again.
            whisper.program.encode(window, false).await?;
            let decoded = decoder.fallback_from(Some(first), &mut whisper.program, prompt, *sot, &mut rng).await?;
            Ok(Reply::Decoded(decoded, Box::new(rng)))
        }
        .await;
        (tag, answer)
    }
}

/// Takes a group's last candidates into its search: the inputs of its next step, or `None`
/// when its search is over.
fn advance<T>(program: &crate::program::Program, group: &mut Group<T>) -> Result<Option<GroupInput>> {
    let last = group.step + 1 == group.max_steps;
    if group.step >= group.max_steps {
        return Ok(None);
    }
    let Some(next) = group.search.advance(&group.candidates, &group.alive, last)? else { return Ok(None) };
    let mut beams = Vec::with_capacity(next.len());
    let mut grown = Vec::with_capacity(next.len());
    for c in next {
        let mut seq = group
            .alive
            .get(c.beam)
            .ok_or_else(|| Error::backend(format!("a candidate extends beam {} of {}", c.beam, group.alive.len())))?
            .clone();
        seq.push(c.token);
        beams.push(BeamInput {
            history: program.history(&seq[group.job.forced.len()..], group.job.options.timestamps)?,
            parent: c.beam,
            score: c.score,
        });
        grown.push(seq);
    }
    group.alive = grown;
    Ok(Some(GroupInput { beams, position: group.job.prompt.len() + group.step, from: group.from }))
}
