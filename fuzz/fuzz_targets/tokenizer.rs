//! The tokenizer files: `vocabulary.txt` (CTranslate2) and `tokenizer.json` (Hugging Face).
//! An input without a NUL byte is read as each file alone; `vocabulary.txt`, NUL,
//! `tokenizer.json` is read as the pair a model folder holds.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| susurrus_fuzz::tokenizer(data));
