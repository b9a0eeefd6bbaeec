pub mod config;
pub mod convert;
pub mod ct2;
pub mod decode;
pub mod decoder;
pub mod encoder;
pub mod hf;
pub mod layers;
pub mod mel;
pub mod options;
pub mod program;
pub mod select;
pub mod tokenizer;
pub mod weights;

pub use options::{Task, TranscribeOptions};
