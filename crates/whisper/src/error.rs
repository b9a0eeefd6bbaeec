//! The whisper crate's error type: the core's errors (graphs, backends, runs) plus what only a
//! model meets (its files and audio). Every message says what was wrong
//! and where.

use susurrus_core::Error as CoreError;

/// Errors of loading and running Whisper.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Graph building, compilation and execution (including [`CoreError::Cancelled`]).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// A model file (weights, config, tokenizer) is missing, corrupt or does not match the
    /// model; `msg` says what and where (tensor, line, byte offset).
    #[error("{file}: {msg}")]
    Model { file: String, msg: String },
    /// Audio that cannot be transcribed (e.g. NaN samples).
    #[error("bad audio: {0}")]
    BadAudio(String),
    /// Audio kept outside memory (a temporary file) that could not be read back.
    #[error("reading the audio: {0}")]
    AudioRead(String),
}

/// Result alias used throughout the whisper crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A value the model or a run needs that was not given, or not as it must be.
    pub fn bad_argument(msg: impl Into<String>) -> Self {
        Error::Core(CoreError::BadArgument(msg.into()))
    }

    /// A backend that did not return what the model asked of it.
    pub fn backend(msg: impl Into<String>) -> Self {
        Error::Core(CoreError::Backend(msg.into()))
    }

    /// A transcription option that cannot be honoured.
    pub fn bad_option(msg: impl Into<String>) -> Self {
        Error::Core(CoreError::BadOption(msg.into()))
    }

    /// The caller stopped the work.
    pub const CANCELLED: Error = Error::Core(CoreError::Cancelled);

    /// True when the caller stopped the work.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Core(CoreError::Cancelled))
    }
}

/// An error about a model file.
pub(crate) fn model_error(file: &str, msg: impl Into<String>) -> Error {
    Error::Model { file: file.to_string(), msg: msg.into() }
}
