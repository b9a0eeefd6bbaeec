//! The CTranslate2 reader: a `model.bin` and the `config.json` beside it, as the browser and
//! `susurrus` load them. Input: `config.json`, a NUL byte, then `model.bin`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| susurrus_fuzz::ct2_model(data));
