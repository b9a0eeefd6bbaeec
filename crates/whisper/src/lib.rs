//! Whisper on the Susurrus graph compiler, in pipeline order: config -> weights (loaders) ->
//! tokenizer -> log-mel -> encoder and decoder graphs -> one linked program -> decoding ->
//! transcription. Graph builders call the core's IR builder only: nothing here names a
//! backend.

pub mod align;
pub mod audio;
pub mod batch;
pub mod beam;
pub mod bench;
pub mod checkpoint;
pub mod config;
pub mod convert;
pub mod ct2;
pub mod ct2_stream;
pub mod decode;
pub mod decoder;
pub mod demo;
pub mod encoder;
pub mod error;
pub mod file_data;
pub mod files;
pub mod groups;
pub mod hallucination;
pub mod hf;
pub mod hf_stream;
pub mod layers;
pub mod live;
pub mod mel;
pub mod model;
pub mod options;
pub mod program;
pub mod select;
pub mod subtitles;
pub mod tokenizer;
pub mod transcribe;
pub mod vad;
pub mod weights;
pub mod wer;
pub mod windows;
pub mod words;

pub use audio::{Audio, Pcm};
pub use checkpoint::{Checkpoint, Resume};
pub use error::{Error, Result};
pub use model::{PreparedModel, Whisper};
pub use options::{Task, TranscribeOptions};
pub use transcribe::{Event, Segment, Transcript};
