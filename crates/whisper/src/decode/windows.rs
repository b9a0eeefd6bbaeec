//! What a transcription asks of the device, a window at a time ([`WindowModel`]): the seek
//! loop ([`crate::decode::transcribe`]) runs on any implementation. [`Whisper`] runs each request on
//! its own compiled program; a server hands them to the thread that owns the program, which
//! batches the windows of many transcriptions into one beam search ([`crate::decode::batch`]).

use std::future::Future;

use crate::audio::mel::LogMel;
use crate::decode::model::Whisper;
use crate::decode::options::TranscribeOptions;
use crate::decode::window::{Decoded, NoiseRng, WindowDecoder};
use crate::error::Result;
use crate::load::config::WhisperConfig;
use crate::program::Alignment;
use crate::text::tokenizer::Tokenizer;
use susurrus_core::tensor::Tensor;

/// The host's share of a model: what the seek loop reads between device calls.
#[derive(Clone, Copy)]
pub struct Host<'a> {
    pub tokenizer: &'a Tokenizer,
    pub config: &'a WhisperConfig,
    pub mel: &'a LogMel,
}

/// One window's decoding: the prompt (`<|startoftranscript|>` at `sot`), the tokens the
/// transcript is forced to start with (the prompt's last ones) and the options.
#[derive(Clone, Copy)]
pub struct DecodeRequest<'a> {
    pub prompt: &'a [u32],
    pub sot: usize,
    pub forced: &'a [u32],
    pub options: &'a TranscribeOptions,
}

/// The device calls of a transcription. Each takes the window's log-mel and whether the
/// window differs from the one of the call before in this transcription (`fresh`): a model
/// that keeps the last window encoded encodes only fresh ones; one shared with other
/// transcriptions encodes whenever another window came in between.
pub trait WindowModel {
    /// The tokenizer, sizes and front end.
    fn host(&self) -> Host<'_>;

    /// Makes the model ready for `options` (graphs they need that it lacks), or says why it
    /// cannot run them.
    fn prepare(&mut self, options: &TranscribeOptions) -> impl Future<Output = Result<()>>;

    /// The most likely language of `window` and its probability among the languages.
    fn detect_language(&mut self, window: &Tensor, fresh: bool) -> impl Future<Output = Result<(String, f32)>>;

    /// Decodes `window` with the options' temperature fallback.
    fn decode(
        &mut self,
        window: &Tensor,
        fresh: bool,
        request: &DecodeRequest<'_>,
        rng: &mut NoiseRng,
    ) -> impl Future<Output = Result<Decoded>>;

    /// The alignment of `tokens` (a whole sequence) over the first `frames` encoder positions
    /// of `window` ([`crate::program::Program::align`]).
    fn align(
        &mut self,
        window: &Tensor,
        fresh: bool,
        tokens: &[u32],
        frames: usize,
    ) -> impl Future<Output = Result<Alignment>>;

    /// Opens the device again after it was lost, with the model compiled on it.
    fn reopen(&mut self) -> impl Future<Output = Result<()>>;
}

impl WindowModel for Whisper {
    fn host(&self) -> Host<'_> {
        Host { tokenizer: &self.tokenizer, config: &self.config, mel: &self.mel }
    }

    async fn prepare(&mut self, options: &TranscribeOptions) -> Result<()> {
        self.prepare_selection(options).await
    }

    async fn detect_language(&mut self, window: &Tensor, fresh: bool) -> Result<(String, f32)> {
        if fresh {
            self.program.encode(window, false).await?;
        }
        Whisper::detect_language(self).await
    }

    async fn decode(
        &mut self,
        window: &Tensor,
        fresh: bool,
        request: &DecodeRequest<'_>,
        rng: &mut NoiseRng,
    ) -> Result<Decoded> {
        if fresh {
            self.program.encode(window, false).await?;
        }
        let ids = self.tokenizer.special_ids();
        let vocab = self.config.n_vocab as u32;
        let decoder =
            WindowDecoder { ids, tokenizer: &self.tokenizer, options: request.options, vocab, forced: request.forced };
        decoder.decode_with_fallback(&mut self.program, request.prompt, request.sot, rng).await
    }

    async fn align(&mut self, window: &Tensor, fresh: bool, tokens: &[u32], frames: usize) -> Result<Alignment> {
        if fresh {
            self.program.encode(window, false).await?;
        }
        self.program.align(tokens, frames).await
    }

    async fn reopen(&mut self) -> Result<()> {
        self.reopen_device().await
    }
}
