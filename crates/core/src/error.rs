//! The one error type of the core crate.
//!
//! Every failure a caller can provoke (a wrong shape, a missing input, an op a backend lacks)
//! is a value of [`Error`] with a message that says what was wrong and where; nothing in the
//! core panics on user input.

/// Errors of the graph compiler and runtime.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An op was given inputs whose shapes or dtypes it cannot take.
    #[error("{op}: {msg}")]
    Shape { op: String, msg: String },
    /// A graph breaks an invariant (found by the verifier or a graph edit).
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// A backend cannot run an op or feature.
    #[error("{op} is not supported by the {backend} backend")]
    Unsupported { op: String, backend: String },
    /// A value the run needs was not supplied, or was supplied with the wrong type.
    #[error("bad run argument: {0}")]
    BadArgument(String),
    /// Tensor data that does not match its declared type.
    #[error("bad tensor: {0}")]
    BadTensor(String),
    /// An op failed while running (e.g. an index out of range).
    #[error("{op} failed at run time: {msg}")]
    Runtime { op: String, msg: String },
    /// The GPU device was lost; the executor must be rebuilt on a new device.
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// The GPU device was lost and this process cannot open it again (a CUDA context that
    /// met a sticky error is unusable until the process ends): the work goes on only in a new
    /// process, from where it stood ([`crate`] users: the whisper crate's checkpoints).
    #[error("GPU device lost to this process: {0}")]
    DeviceLostToProcess(String),
    /// A backend could not be created or a resource could not be allocated.
    #[error("backend error: {0}")]
    Backend(String),
    /// An option (of a backend, of a model run) that cannot be honoured.
    #[error("invalid option: {0}")]
    BadOption(String),
    /// The caller stopped the work (e.g. an aborted browser request).
    #[error("cancelled")]
    Cancelled,
}

/// Result alias used throughout the core crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shape/type error raised by an op's shape inference.
    pub fn shape(op: &str, msg: impl Into<String>) -> Self {
        Error::Shape { op: op.to_string(), msg: msg.into() }
    }

    /// Run-time failure of an op.
    pub fn runtime(op: &str, msg: impl Into<String>) -> Self {
        Error::Runtime { op: op.to_string(), msg: msg.into() }
    }
}
