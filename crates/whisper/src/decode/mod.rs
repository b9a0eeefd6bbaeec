//! Decoding, as faster-whisper does it: [`model::Whisper`] (a model's program compiled on a
//! backend, with its tokenizer and options) and everything it runs: the options, one window's token loop with the
//! temperature fallback ([`window`]), beam search's bookkeeping ([`beam`]), the seek loop over
//! a recording's windows ([`transcribe`], on any [`windows::WindowModel`]), checkpoints to
//! resume from, word timestamps, the hallucination guards, the batch scheduler that decodes
//! many transcriptions' windows together, subtitles of the result, and a segment as JSON shows it
//! ([`view`]).

pub mod batch;
pub mod beam;
pub mod checkpoint;
pub mod hallucination;
pub mod model;
pub mod options;
pub mod subtitles;
pub mod transcribe;
pub mod view;
pub mod window;
pub mod windows;
pub mod words;
