//! Text: the tokenizer (Whisper's byte-level BPE and its special tokens) and the word error
//! rate the tests and benchmarks score transcripts with.

pub mod tokenizer;
pub mod wer;

pub use tokenizer::Tokenizer;
