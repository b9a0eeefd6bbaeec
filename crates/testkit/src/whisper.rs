//! A small random-weight Whisper as the files of a model folder, for tests that load and run
//! a whole model where the real one is out of reach (the browser suite) or too slow (every
//! backend against every other). The files go through the same loaders as a real model.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::rngs::StdRng;

use susurrus_core::ir::DType;
use susurrus_whisper::Result;
use susurrus_whisper::load::config::{GenerationConfig, WhisperConfig};
use susurrus_whisper::load::convert::{WeightFormat, hf_config_json, hf_generation_config_json, hf_safetensors};
/// The released sizes, defined beside the model's config; the suites import them from here.
pub use susurrus_whisper::load::sizes::Architecture;
use susurrus_whisper::load::weights::WhisperWeights;
use susurrus_whisper::text::tokenizer::byte_to_char;

use crate::random::{Dist, random_tensor_with};

/// Byte-level words of the small vocabulary, after the 256 byte tokens.
const WORDS: [&str; 4] = ["Ġhello", "Ġworld", "Ġtest", "ing"];
/// The special tokens an English-only vocabulary lists, in Whisper's order; timestamps follow
/// `<|notimestamps|>` without being listed.
const SPECIALS: [&str; 9] = [
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
];
/// Whisper's timestamp tokens: 0.00 s to 30.00 s in 0.02 s steps.
const TIMESTAMPS: usize = 1501;

/// The `vocabulary.txt` of the small model: the 256 byte tokens in GPT-2's character order,
/// [`WORDS`], [`SPECIALS`].
pub fn small_vocabulary() -> String {
    let table = byte_to_char();
    let mut lines: Vec<String> = table.iter().map(|c| c.to_string()).collect();
    lines.extend(WORDS.iter().chain(&SPECIALS).map(|s| s.to_string()));
    lines.join("\n") + "\n"
}

/// A `tokenizer.json` for the small model, numbered as [`small_vocabulary`]: the byte tokens
/// and [`WORDS`] in `model.vocab`, [`SPECIALS`] as added tokens. It has no merges (the words
/// would need their parts in the vocabulary), so text encodes to byte tokens; it lets tests
/// (the browser's among them) encode through `tokenizers` without the real model.
pub fn small_tokenizer_json() -> String {
    let tokens = byte_to_char().into_iter().map(String::from).chain(WORDS.iter().map(|w| w.to_string()));
    let vocab: serde_json::Map<String, serde_json::Value> = tokens.zip(0u32..).map(|(t, id)| (t, id.into())).collect();
    let first_special = (256 + WORDS.len()) as u32;
    let added: Vec<serde_json::Value> = SPECIALS
        .iter()
        .zip(first_special..)
        .map(|(content, id)| {
            serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                               "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                                        "use_regex": true});
    serde_json::json!({
        "version": "1.0",
        "added_tokens": added,
        "pre_tokenizer": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    })
    .to_string()
}

/// An English-only Whisper with 1 s windows (100 encoder positions), 64 wide, 2 + 2 layers,
/// the vocabulary of [`small_vocabulary`] with timestamps.
pub fn small_config() -> WhisperConfig {
    let eot = (256 + WORDS.len()) as u32;
    WhisperConfig {
        n_mels: 80,
        n_audio_ctx: 50,
        n_text_ctx: 48,
        d_model: 64,
        encoder_layers: 2,
        decoder_layers: 2,
        encoder_heads: 4,
        decoder_heads: 4,
        encoder_ffn: 256,
        decoder_ffn: 256,
        n_vocab: 256 + WORDS.len() + SPECIALS.len() + TIMESTAMPS,
        layer_norm_eps: 1e-5,
        generation: GenerationConfig {
            suppress_ids: vec![0, 1],
            suppress_ids_begin: vec![eot],
            lang_ids: vec![],
            alignment_heads: vec![(1, 0)],
        },
    }
}

/// A model of `config` with seeded random weights of `dtype`, uniform in [-0.5, 0.5): graph
/// builders and backends tested at any model size, including the sizes that exist nowhere
/// here as files.
pub fn random_model(config: WhisperConfig, dtype: DType, seed: u64) -> Result<WhisperWeights> {
    let mut rng = StdRng::seed_from_u64(seed);
    let dist = Dist::Uniform { lo: -0.5, hi: 0.5 };
    WhisperWeights::from_fn(config, dtype, |ty| random_tensor_with(ty, dist, &mut rng))
}

/// The small model's folder as Hugging Face files (`model.safetensors` with f16 weights
/// uniform in [-0.5, 0.5) from `seed`, `config.json`, `generation_config.json`) with a CTranslate2 `vocabulary.txt`.
pub fn small_model_files(seed: u64) -> Result<BTreeMap<String, Vec<u8>>> {
    small_model_files_as(seed, WeightFormat::F16)
}

/// [`small_model_files`] with the weights stored as `format` (int8: as `susurrus convert
/// --quantize int8` writes them).
pub fn small_model_files_as(seed: u64, format: WeightFormat) -> Result<BTreeMap<String, Vec<u8>>> {
    model_files(small_config(), seed, format)
}

/// [`small_model_files_as`] for another configuration of the small model's vocabulary (a
/// longer audio context: the real 30 s windows at the small model's width).
pub fn model_files(config: WhisperConfig, seed: u64, format: WeightFormat) -> Result<BTreeMap<String, Vec<u8>>> {
    let weights = random_model(config.clone(), DType::F16, seed)?;
    let eot = (256 + WORDS.len()) as u32;
    let tokens = SPECIALS.iter().zip(eot..).map(|(s, id)| (s.to_string(), id)).collect();
    Ok(BTreeMap::from([
        ("model.safetensors".to_string(), hf_safetensors(&weights, format)?),
        ("config.json".to_string(), hf_config_json(&config, &tokens).into_bytes()),
        ("generation_config.json".to_string(), hf_generation_config_json(&config, &tokens)?.into_bytes()),
        ("vocabulary.txt".to_string(), small_vocabulary().into_bytes()),
    ]))
}

/// A released size's folder as Hugging Face files with random f16 weights (`seed`) and
/// `layers` layers each side (at most the size's own count: large-v3-turbo keeps at most 4
/// decoder layers), stored as `format`: `model.safetensors`, `config.json`,
/// `generation_config.json`, and `tokenizer.json` made from the multilingual base model's
/// (`base_tokenizer_json`, from scripts/models/fetch_model.sh base) — for large-v3's 51866 tokens
/// with its extra language `<|yue|>` inserted at 50358 and every later added token one id up,
/// as in large-v3's own tokenizer. What the demo page loads to show a large model fits a
/// browser (`examples/random_model.rs` writes it).
pub fn released_shape_files(
    arch: Architecture,
    layers: usize,
    base_tokenizer_json: &[u8],
    format: WeightFormat,
    seed: u64,
) -> std::result::Result<BTreeMap<String, Vec<u8>>, String> {
    let mut config = arch.config();
    config.encoder_layers = layers.min(config.encoder_layers);
    config.decoder_layers = layers.min(config.decoder_layers);
    config.generation.alignment_heads = vec![(config.decoder_layers - 1, 0)];
    let mut doc: serde_json::Value =
        serde_json::from_slice(base_tokenizer_json).map_err(|e| format!("the base tokenizer.json: {e}"))?;
    const YUE: u64 = 50358;
    if config.n_vocab == 51866 {
        let added = doc["added_tokens"].as_array_mut().ok_or("the base tokenizer.json has no added_tokens")?;
        let mut yue = added.iter().find(|t| t["id"] == YUE).ok_or("the base tokenizer has no id 50358")?.clone();
        yue["content"] = "<|yue|>".into();
        for token in added.iter_mut() {
            let id = token["id"].as_u64().ok_or("an added token without an id")?;
            if id >= YUE {
                token["id"] = (id + 1).into();
            }
        }
        added.push(yue);
        added.sort_by_key(|t| t["id"].as_u64());
    }
    let tokens: BTreeMap<String, u32> = doc["added_tokens"]
        .as_array()
        .ok_or("no added_tokens")?
        .iter()
        .filter_map(|t| Some((t["content"].as_str()?.to_string(), t["id"].as_u64()? as u32)))
        .collect();
    let weights = random_model(config.clone(), DType::F16, seed).map_err(|e| e.to_string())?;
    let fail = |e: susurrus_whisper::Error| e.to_string();
    Ok(BTreeMap::from([
        ("model.safetensors".to_string(), hf_safetensors(&weights, format).map_err(fail)?),
        ("config.json".to_string(), hf_config_json(&config, &tokens).into_bytes()),
        ("generation_config.json".to_string(), hf_generation_config_json(&config, &tokens).map_err(fail)?.into_bytes()),
        ("tokenizer.json".to_string(), doc.to_string().into_bytes()),
    ]))
}

/// Three seconds of a gliding tone with a little noise: three one-second windows of the small
/// model, on which it says something in each (the device-loss suites lose the device after
/// the first).
pub fn three_windows_of_tone() -> Vec<f32> {
    (0..48000)
        .map(|i| {
            let t = i as f32 / 16000.0;
            0.3 * (2.0 * std::f32::consts::PI * (200.0 + 60.0 * t) * t).sin()
                + 0.01 * ((i * 7919 % 101) as f32 - 50.0) / 50.0
        })
        .collect()
}

/// Tokens the small model is kept from with `suppress_tokens` so that it decodes text only,
/// window after window: -1 (the non-speech symbols) and every timestamp token (a random
/// model's would jump to the end of the audio).
pub fn small_model_text_only() -> Vec<i64> {
    let n_vocab = small_config().n_vocab as i64;
    std::iter::once(-1).chain(n_vocab - TIMESTAMPS as i64..n_vocab).collect()
}

/// The 44-byte header of a 16-bit PCM WAV file of `samples` 16 kHz mono samples (the samples
/// follow it as little-endian i16s).
pub fn wav_header(samples: usize) -> Vec<u8> {
    let data = (samples * 2) as u32;
    let mut bytes = Vec::with_capacity(44);
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + data).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    // Chunk size 16, PCM, one channel, 16 kHz, 32000 bytes a second, 2-byte frames of 16 bits.
    for field in [16u32, 1 | (1 << 16), 16_000, 32_000, 2 | (16 << 16)] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&data.to_le_bytes());
    bytes
}

/// `samples` (16 kHz mono) as a 16-bit PCM WAV file.
pub fn wav_file(samples: &[f32]) -> Vec<u8> {
    let mut bytes = wav_header(samples.len());
    for s in samples {
        bytes.extend_from_slice(&((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use susurrus_whisper::load::files::load_files;
    use susurrus_whisper::text::tokenizer::{SpecialTokens, Tokenizer};

    #[test]
    fn small_model_loads_with_its_config_and_tokens() {
        let files = small_model_files(3).unwrap();
        let (weights, tokenizer) = load_files(&files).unwrap();
        assert_eq!(weights.config(), &small_config());
        assert_eq!(tokenizer.vocab_size(), small_config().n_vocab);
        let ids = tokenizer.special_ids();
        assert_eq!((ids.end_of_text, ids.start_of_transcript, ids.no_timestamps), (260, 261, 268));
        assert_eq!(ids.timestamp_begin, 269);
        assert_eq!(
            tokenizer.decode(&[256, 257], susurrus_whisper::text::tokenizer::SpecialTokens::Keep).unwrap(),
            " hello world"
        );
    }

    /// The large-v3-shaped folder loads as large-v3 (widths, 128 mels, 51866 tokens) with
    /// large-v3's special ids: <|yue|> at 50358 as the 100th language, <|notimestamps|> at
    /// 50364, timestamps from 50365; with int8 matrices too.
    #[test]
    fn large_v3_shaped_files_load_with_large_v3s_tokens() {
        let base = std::fs::read(crate::golden::Set::Base.model_dir().join("tokenizer.json")).unwrap();
        for format in [WeightFormat::F16, WeightFormat::Int8] {
            let files = released_shape_files(Architecture::LargeV3, 1, &base, format, 0).unwrap();
            let (weights, tokenizer) = load_files(&files).unwrap();
            let config = weights.config();
            assert_eq!((config.d_model, config.n_mels, config.n_vocab), (1280, 128, 51866));
            assert_eq!((config.encoder_layers, config.decoder_layers, config.encoder_heads), (1, 1, 20));
            assert_eq!(tokenizer.languages().len(), 100);
            assert_eq!(tokenizer.language_id("yue"), Some(50358));
            let ids = tokenizer.special_ids();
            assert_eq!(
                (ids.translate, ids.transcribe, ids.no_timestamps, ids.timestamp_begin),
                (50359, 50360, 50364, 50365)
            );
            let embedding = weights.get("model.decoder.embed_tokens.weight").unwrap().dtype();
            assert_eq!(embedding, if format == WeightFormat::Int8 { DType::Q8 } else { DType::F16 });
        }
    }

    #[test]
    fn small_tokenizer_json_matches_the_vocabulary_and_encodes() {
        let vocabulary = Tokenizer::from_vocabulary(small_vocabulary().as_bytes(), "vocabulary.txt").unwrap();
        let json = Tokenizer::from_tokenizer_json(small_tokenizer_json().as_bytes(), "tokenizer.json").unwrap();
        assert_eq!(json.special_ids(), vocabulary.special_ids());
        assert_eq!(json.vocab_size(), vocabulary.vocab_size());
        assert_eq!(json.decode(&[256, 257], SpecialTokens::Keep).unwrap(), " hello world");
        assert_eq!(json.encode(" hello<|endoftext|>").unwrap(), [32, 104, 101, 108, 108, 111, 260]);
    }
}
