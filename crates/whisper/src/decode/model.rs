//! [`Whisper`]: a loaded model compiled on a backend, ready to transcribe. What the web and
//! command-line crates hold.

use std::path::Path;

use crate::audio::mel::LogMel;
use crate::decode::options::TranscribeOptions;
use crate::decode::windows::Host;
use crate::error::{Error, Result};
use crate::graphs::layers::ModelWeights;
use crate::graphs::select::{Rules, Selection};
use crate::load::config::WhisperConfig;
use crate::load::load_dir;
use crate::load::weights::WhisperWeights;
use crate::program::{Program, ProgramPlans, ProgramSpec, Sampling};
use crate::text::tokenizer::Tokenizer;
use crate::vad::{Vad, VadPlan};
use susurrus_core::exec::Backend;

/// A Whisper model on a backend.
pub struct Whisper {
    pub(crate) program: Program,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) config: WhisperConfig,
    pub(crate) mel: LogMel,
    model: ModelWeights,
    backend: Box<dyn Backend>,
    spec: ProgramSpec,
    /// The VAD network, once loaded.
    pub(crate) vad: Option<Vad>,
}

/// A model made ready on the host to compile on a backend: its weights as the graphs use
/// them and every graph planned. [`Whisper::prepare`] needs no backend, so it can run while
/// one opens (the CLI does both side by side).
pub struct PreparedModel {
    model: ModelWeights,
    tokenizer: Tokenizer,
    plans: ProgramPlans,
}

impl Whisper {
    /// Compiles `weights` on `backend` with the model's default token settings.
    pub async fn new(backend: Box<dyn Backend>, weights: &WhisperWeights, tokenizer: Tokenizer) -> Result<Whisper> {
        Whisper::compile(backend, Whisper::prepare(weights, tokenizer)?).await
    }

    /// Checks that `tokenizer` belongs to `weights` and plans the model's graphs with its
    /// default token settings, on the host.
    pub fn prepare(weights: &WhisperWeights, tokenizer: Tokenizer) -> Result<PreparedModel> {
        let config = weights.config();
        if tokenizer.vocab_size() != config.n_vocab {
            return Err(Error::Model {
                file: "tokenizer".into(),
                msg: format!(
                    "the vocabulary has {} ids but the model's embedding has {} rows",
                    tokenizer.vocab_size(),
                    config.n_vocab
                ),
            });
        }
        let model = ModelWeights::new(weights)?;
        let defaults = TranscribeOptions::default();
        let spec = ProgramSpec {
            selection: default_selection(config, &tokenizer, &defaults)?,
            no_speech: tokenizer.special_ids().no_speech,
            beams: defaults.beam_size,
            alignment: defaults.word_timestamps,
            long_prompts: false,
            groups: 0,
        };
        let plans = ProgramPlans::new(&model, &spec)?;
        Ok(PreparedModel { model, tokenizer, plans })
    }

    /// Compiles a prepared model on `backend`.
    pub async fn compile(backend: Box<dyn Backend>, prepared: PreparedModel) -> Result<Whisper> {
        let PreparedModel { model, tokenizer, plans } = prepared;
        let program = Program::from_plans(backend.as_ref(), &model, &plans).await?;
        let config = model.config.clone();
        let mel = LogMel::new(config.n_mels)?;
        let spec = plans.spec().clone();
        Ok(Whisper { program, tokenizer, config, mel, model, backend, spec, vad: None })
    }

    /// Loads a model folder (CTranslate2 or Hugging Face layout) and compiles it.
    pub async fn load_dir(backend: Box<dyn Backend>, dir: &Path) -> Result<Whisper> {
        let weights = load_dir(dir)?;
        let tokenizer = Tokenizer::from_model_dir(dir)?;
        Whisper::new(backend, &weights, tokenizer).await
    }

    /// Compiles the VAD network (planned with [`VadPlan::new`]) on this model's device, for
    /// transcriptions with `vad`.
    pub async fn load_vad(&mut self, plan: &VadPlan) -> Result<()> {
        self.vad = Some(Vad::compile(self.backend.as_ref(), plan).await?);
        Ok(())
    }

    /// True once [`Whisper::load_vad`] has run.
    /// The loaded VAD network compiled again for blocks of `windows` windows, with states of
    /// its own (a live stream's).
    pub(crate) async fn vad_with_windows(&self, windows: usize) -> Result<Vad> {
        let vad = self.vad.as_ref().ok_or_else(|| {
            Error::bad_option("vad: the Silero VAD network is not loaded (load it, or stream with vad off)")
        })?;
        vad.with_windows(self.backend.as_ref(), windows).await
    }

    pub fn has_vad(&self) -> bool {
        self.vad.is_some()
    }

    pub fn config(&self) -> &WhisperConfig {
        &self.config
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The backend's name (`cpu`, `wgpu`, ...).
    pub fn backend_name(&self) -> &str {
        self.program.backend()
    }

    /// The compiled program, to run its pieces directly (benchmarks time the encoder and a
    /// decoder step this way). A transcription afterwards starts over, as always.
    pub fn program_mut(&mut self) -> &mut Program {
        &mut self.program
    }

    /// The log-mel front end of this model.
    pub fn log_mel(&self) -> &LogMel {
        &self.mel
    }

    /// Loses the backend's device on purpose ([`Backend::lose_device`]), as a driver reset
    /// would: how the device-loss suites force one between two windows.
    pub fn lose_device(&self) -> Result<()> {
        Ok(self.backend.lose_device()?)
    }

    /// Opens the backend's device again after it was lost ([`Backend::reopen`]) and compiles
    /// the program as it was (and the VAD network, when loaded) on it. Nothing changes when
    /// that fails: the error says why.
    pub(crate) async fn reopen_device(&mut self) -> Result<()> {
        let backend = self.backend.reopen().await?;
        let program = Program::compile(backend.as_ref(), &self.model, &self.spec).await?;
        let vad = match &self.vad {
            Some(vad) => Some(vad.recompile(backend.as_ref()).await?),
            None => None,
        };
        (self.program, self.vad, self.backend) = (program, vad, backend);
        Ok(())
    }

    /// The program spec `options` need: this one, or one with their always-suppressed
    /// tokens, more beams (a program with more beams runs fewer), the word-timestamp
    /// alignment graphs or a prefill for long prompts (graphs it keeps once built).
    fn spec_for(&self, options: &TranscribeOptions) -> Result<ProgramSpec> {
        let selection = default_selection(&self.config, &self.tokenizer, options)?;
        Ok(ProgramSpec {
            selection,
            no_speech: self.spec.no_speech,
            beams: self.spec.beams.max(options.beam_size),
            alignment: self.spec.alignment || options.word_timestamps,
            long_prompts: self.spec.long_prompts || options.hotwords.as_ref().is_some_and(|h| !h.is_empty()),
            groups: self.spec.groups,
        })
    }

    /// Whether the compiled program runs `options` as it is (else a transcription with them
    /// compiles it again first).
    pub fn supports(&self, options: &TranscribeOptions) -> bool {
        self.spec_for(options).is_ok_and(|spec| spec == self.spec)
    }

    /// Recompiles when `options` need graphs the program lacks ([`Whisper::supports`]).
    pub(crate) async fn prepare_selection(&mut self, options: &TranscribeOptions) -> Result<()> {
        let spec = self.spec_for(options)?;
        if spec != self.spec {
            self.program = Program::compile(self.backend.as_ref(), &self.model, &spec).await?;
            self.spec = spec;
        }
        Ok(())
    }

    /// Compiles the program again with `groups` groups of beam search over as many windows
    /// at once ([`crate::decode::batch`]), and the graphs `options` need.
    pub async fn compile_groups(&mut self, groups: usize, options: &TranscribeOptions) -> Result<()> {
        let spec = ProgramSpec { groups, ..self.spec_for(options)? };
        self.program = Program::compile(self.backend.as_ref(), &self.model, &spec).await?;
        self.spec = spec;
        Ok(())
    }

    /// The most likely language after `<|startoftranscript|>` on the window the encoder last
    /// ran on, and its probability among the language tokens (the softmax of their logits
    /// alone, as the reference computes it: the selection bans every other id, so the chosen
    /// token's log-probability is exactly that).
    pub(crate) async fn detect_language(&mut self) -> Result<(String, f32)> {
        let langs = self.tokenizer.languages();
        let (lo, hi) = match (langs.iter().map(|l| l.1).min(), langs.iter().map(|l| l.1).max()) {
            (Some(lo), Some(hi)) => (lo, hi + 1),
            _ => return Err(Error::Model { file: "tokenizer".into(), msg: "no language tokens".into() }),
        };
        let rules = Rules { banned: vec![(0, lo), (hi, self.config.n_vocab as u32)], blank: false };
        let sot = self.tokenizer.special_ids().start_of_transcript;
        let choice = self.program.prefill(&[sot], 0, &rules, Sampling::Greedy).await?;
        if !choice.logprob.is_finite() {
            return Err(Error::Model {
                file: "the model".into(),
                msg: format!(
                    "language detection gave a non-finite probability ({}): its weights hold values it cannot \
                     compute with",
                    choice.logprob.exp()
                ),
            });
        }
        langs
            .iter()
            .find(|l| l.1 == choice.token)
            .map(|l| (l.0.clone(), choice.logprob.exp()))
            .ok_or_else(|| Error::backend(format!("language detection chose token {}", choice.token)))
    }
}

impl Host<'_> {
    /// The language the options fix: English on English-only models (another language is an
    /// error), the given one on multilingual models (checked), `None` when it is to be detected.
    pub fn fixed_language(&self, options: &TranscribeOptions) -> Result<Option<String>> {
        if !self.config.is_multilingual() {
            return match options.language.as_deref() {
                None | Some("en") => Ok(Some("en".into())),
                Some(other) => Err(Error::bad_option(format!("language '{other}': this model is English-only"))),
            };
        }
        match &options.language {
            Some(l) if self.tokenizer.language_id(l).is_some() => Ok(Some(l.clone())),
            Some(l) => Err(Error::bad_option(format!("language '{l}' is not one this model knows"))),
            None => Ok(None),
        }
    }
}

/// The tokens a transcription never produces and those it never starts with.
fn default_selection(config: &WhisperConfig, tokenizer: &Tokenizer, options: &TranscribeOptions) -> Result<Selection> {
    let ids = tokenizer.special_ids();
    let list = options.suppress_tokens.as_deref().unwrap_or(&[-1]);
    let mut suppress = Vec::with_capacity(list.len() + config.generation.suppress_ids.len());
    for &id in list {
        match u32::try_from(id) {
            Ok(id) => suppress.push(id),
            Err(_) if id == -1 => suppress.extend(&config.generation.suppress_ids),
            Err(_) => {
                return Err(Error::bad_option(format!(
                    "suppress_tokens: {id} is not a token id (-1 stands for the model's list)"
                )));
            }
        }
    }
    suppress.extend([ids.transcribe, ids.translate, ids.start_of_transcript, ids.start_of_prev, ids.no_speech]);
    suppress.extend(ids.start_of_lm);
    suppress.sort_unstable();
    suppress.dedup();
    if let Some(&bad) = suppress.iter().find(|&&t| t as usize >= config.n_vocab) {
        return Err(Error::bad_option(format!(
            "suppress_tokens: {bad} is outside the vocabulary of {}",
            config.n_vocab
        )));
    }
    let blank = if config.generation.suppress_ids_begin.is_empty() {
        let mut blank = tokenizer.encode(" ").unwrap_or_default();
        blank.push(ids.end_of_text);
        blank
    } else {
        config.generation.suppress_ids_begin.clone()
    };
    Ok(Selection {
        suppress,
        blank,
        timestamp_begin: ids.timestamp_begin,
        end_of_text: ids.end_of_text,
        no_timestamps: ids.no_timestamps,
        penalties: options.repetition_penalty != 1.0 || options.no_repeat_ngram_size > 0,
    })
}
