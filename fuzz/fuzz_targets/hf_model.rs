//! The Hugging Face reader: `model.safetensors` with its `config.json` and, when not empty,
//! `generation_config.json`. Input: `config.json`, NUL, `generation_config.json`, NUL, then
//! `model.safetensors`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| susurrus_fuzz::hf_model(data));
