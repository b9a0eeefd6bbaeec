//! The command-line crate's one error type: the core's and the model's errors plus what only the command meets
//! (files, audio, the command line). Every message says what was wrong and where.

use std::path::Path;

/// Errors of the `susurrus` command and library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Graph compilation and execution on a backend.
    #[error(transparent)]
    Core(#[from] susurrus_core::Error),
    /// Model loading, transcription options, decoding.
    #[error(transparent)]
    Whisper(#[from] susurrus_whisper::Error),
    /// Audio that cannot be decoded or resampled: `source` is the file name (or `-` for
    /// standard input).
    #[error("{source_name}: {msg}")]
    Audio { source_name: String, msg: String },
    /// A file or stream that cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A model by name that could not be downloaded from the Hugging Face hub: `msg` names the
    /// file and the cause.
    #[error("model {model} ({repo}): {msg}")]
    Download { model: String, repo: String, msg: String },
    /// A command-line value the parser accepted but the command cannot use.
    #[error("{0}")]
    Usage(String),
    /// The HTTP server of `susurrus serve`: it cannot listen on `addr`, or cannot start serving there.
    #[error("{action} {addr}: {source}")]
    Server {
        action: &'static str,
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The program reading standard output stopped reading (`| head`): the command stops
    /// without a message and exits with status 141, as a program ended by SIGPIPE does, so
    /// that a pipeline (`set -o pipefail`) sees that output was lost.
    #[error("standard output was closed by the program reading it")]
    ReaderGone,
    /// A batch in which some inputs failed (each was reported as it failed).
    #[error("{failed} of {total} files failed")]
    FilesFailed { failed: usize, total: usize },
    /// The batch went on in a new process (the GPU was lost to this one), which reported its
    /// own errors and ended with status `code`: this process ends with it.
    #[error("the process the batch was handed to ended with status {code}")]
    HandedOver { code: u8 },
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.display().to_string(), source }
    }

    /// The command's exit status for this error: 141 for [`Error::ReaderGone`], the new
    /// process's for [`Error::HandedOver`], 1 otherwise
    /// (the argument parser's own errors exit with 2).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::ReaderGone => 141,
            Error::HandedOver { code } => *code,
            _ => 1,
        }
    }

    /// Whether the error is worth a message on stderr: not when the reader of standard output
    /// left, which it knows.
    pub fn is_reported(&self) -> bool {
        !matches!(self, Error::ReaderGone | Error::HandedOver { .. })
    }

    /// An [`Error::Audio`] for the input named `source_name`.
    pub fn audio(source_name: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Audio { source_name: source_name.into(), msg: msg.into() }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
