pub mod config;
pub mod convert;
pub mod ct2;
pub mod hf;
pub mod mel;
pub mod tokenizer;
pub mod weights;
