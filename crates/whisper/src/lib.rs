//! Whisper on the Susurrus graph compiler. Folders in pipeline order, each importing only the
//! ones before it (`crates/testkit/tests/layering.rs` checks it):
//!
//! `error`, `constants`, `files` (reading a model's files) -> [`text`] (tokenizer) -> [`audio`] (samples, resampling, log-mel) ->
//! [`load`] (config, weights, the CTranslate2 and Hugging Face readers) -> [`graphs`] (encoder,
//! decoder step, alignment, selection; the core's IR builder only, no backend named) ->
//! [`program`] (the graphs compiled and linked on a backend) -> [`vad`] (Silero) ->
//! [`decode`] ([`Whisper`], a model compiled on a backend, and what it runs: windows, beams, the
//! seek loop, words, batching) -> [`live`] (streaming) -> [`bench`] on top.
//!
//! The facade below is what most callers need: load a [`Whisper`] on a backend, transcribe
//! [`Pcm`] with [`TranscribeOptions`], receive [`Event`]s and a [`Transcript`] of
//! [`Segment`]s.

pub mod constants;
mod error;
pub mod files;

pub mod text;

pub mod audio;

pub mod load;

pub mod graphs;

pub mod program;

pub mod vad;

pub mod decode;

pub mod live;

pub mod bench;

pub use audio::{Audio, Pcm};
pub use decode::checkpoint::{Checkpoint, Resume};
pub use decode::model::{PreparedModel, Whisper};
pub use decode::options::{Task, TranscribeOptions};
pub use decode::transcribe::{Event, Segment, Transcript};
pub use error::{Error, Result};
pub use load::{WhisperConfig, WhisperWeights, load_dir, load_files};
pub use text::Tokenizer;
