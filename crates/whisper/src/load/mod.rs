//! Loading a model: the config, the one naming of weights the graph builders read
//! ([`weights`]), the CTranslate2 and Hugging Face readers (whole or streamed), the folder
//! and file-set dispatch ([`files`]) and the conversion between the two formats ([`convert`]).
//! The readers end in [`weights::WhisperWeights`], so nothing above this folder knows a format.

pub mod config;
pub mod convert;
pub mod ct2;
pub mod ct2_stream;
pub mod file_data;
pub mod files;
pub mod hf;
pub mod hf_stream;
pub mod weights;

pub use config::WhisperConfig;
pub use files::{ModelFormat, load_files};
pub use weights::{WhisperWeights, load_dir};
