//! The fuzz targets' bodies: each feeds one input to a reader of untrusted files and exercises
//! what it returns. Any panic is a bug; errors are the expected outcome of most inputs. Shared by
//! the cargo-fuzz targets (`fuzz/fuzz_targets/`, coverage-guided, on demand through
//! `scripts/fuzz.sh`) and the short seeded mutation run in the test suite
//! (`crates/cli/tests/fuzz_inputs.rs`, which includes this file), so both run the same code.

use susurrus_cli::audio::decode_bytes;
use susurrus_whisper::load::ct2::{load_ct2, parse_model_bin};
use susurrus_whisper::load::ct2_stream::Ct2Stream;
use susurrus_whisper::load::files::ModelFormat;
use susurrus_whisper::load::hf::{load_hf, load_hf_with_generation, parse_safetensors};
use susurrus_whisper::load::hf_stream::SafetensorsStream;
use susurrus_whisper::text::tokenizer::{SpecialTokens, Tokenizer};
use susurrus_whisper::vad::VadWeights;

/// A target: its name (its folder under `fuzz/corpus/`), its body, and the longest input it is
/// given (a little above its largest seed, so that mutations stay near real files).
pub type Target = (&'static str, fn(&[u8]), usize);

/// Every target.
pub const TARGETS: [Target; 5] = [
    ("ct2_model", ct2_model, 16384),
    ("hf_model", hf_model, 16384),
    ("tokenizer", tokenizer, 16384),
    ("audio", audio, 32768),
    ("vad_onnx", vad_onnx, 8192),
];

/// Splits an input into `N` files at its first `N - 1` NUL bytes (JSON and text files have
/// none, so a model or config file can come after them); files past the last NUL are empty.
/// `fuzz/make_corpus.py` joins the seed files the same way.
pub fn files<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out = [&data[..0]; N];
    let mut rest = data;
    for (i, slot) in out.iter_mut().enumerate() {
        if i + 1 == N {
            *slot = rest;
            break;
        }
        match rest.iter().position(|&b| b == 0) {
            Some(at) => {
                *slot = &rest[..at];
                rest = &rest[at + 1..];
            }
            None => {
                *slot = rest;
                rest = &rest[rest.len()..];
            }
        }
    }
    out
}

/// `config.json NUL model.bin`: the CTranslate2 container alone (every variable and alias),
/// then the whole load: names, settings, int8 scales, row splits, the config derived from the
/// shapes and checked against them.
pub fn ct2_model(data: &[u8]) {
    let [config, model] = files::<2>(data);
    let whole = parse_model_bin(model, "model.bin");
    if let Ok(file) = &whole {
        for var in &file.variables {
            let _ = var.ints();
        }
    }
    assert_eq!(streamed(model), whole.as_ref().map(|_| ()).map_err(ToString::to_string), "the streamed parse");
    let _ = load_ct2(model, config);
}

/// `model` through [`Ct2Stream`] as the browser reads a download: in chunks of a size the
/// input picks, with its length known or not. It must end as the whole file's parse does.
fn streamed(model: &[u8]) -> Result<(), String> {
    let pick = model.iter().fold(0usize, |h, &b| h.wrapping_mul(31).wrapping_add(b as usize));
    let chunk = 1 + pick % 61;
    let mut stream = Ct2Stream::new("model.bin", (pick % 2 == 0).then_some(model.len()));
    for piece in model.chunks(chunk) {
        stream.push(piece).map_err(|e| e.to_string())?;
    }
    stream.finish().map(|_| ()).map_err(|e| e.to_string())
}

/// `config.json NUL generation_config.json NUL model.safetensors`: the config's format, the
/// safetensors container alone (the header, and the explanation of a rejected one), the same
/// bytes streamed (which must end as the whole parse does), then the whole load.
pub fn hf_model(data: &[u8]) {
    let [config, generation, model] = files::<3>(data);
    let _ = ModelFormat::from_config_json(config);
    let whole = parse_safetensors(model, "model.safetensors").map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(streamed_safetensors(model), whole, "the streamed parse");
    let _ = match generation {
        [] => load_hf(model, config),
        generation => load_hf_with_generation(model, config, generation),
    };
}

/// `model` through [`SafetensorsStream`] as the browser reads a download (chunks and a known
/// or unknown length as [`streamed`] picks them). It must end as the whole file's parse does.
fn streamed_safetensors(model: &[u8]) -> Result<(), String> {
    let pick = model.iter().fold(0usize, |h, &b| h.wrapping_mul(31).wrapping_add(b as usize));
    let mut stream = SafetensorsStream::new("model.safetensors", (pick % 2 == 0).then_some(model.len()));
    for piece in model.chunks(1 + pick % 61) {
        stream.push(piece).map_err(|e| e.to_string())?;
    }
    stream.finish().map(|_| ()).map_err(|e| e.to_string())
}

/// A `vocabulary.txt` or a `tokenizer.json` alone, or `vocabulary.txt NUL tokenizer.json`;
/// a tokenizer that loads decodes ids from the input (around the vocabulary's end too, where
/// the unlisted timestamps and the errors are) and encodes text from it.
pub fn tokenizer(data: &[u8]) {
    let loaded = if data.contains(&0) {
        let [vocabulary, json] = files::<2>(data);
        vec![Tokenizer::from_files(Some((vocabulary, "vocabulary.txt")), Some((json, "tokenizer.json")), "fuzz")]
    } else {
        vec![Tokenizer::from_vocabulary(data, "vocabulary.txt"), Tokenizer::from_tokenizer_json(data, "tokenizer.json")]
    };
    for tokenizer in loaded.iter().flatten() {
        let range = tokenizer.vocab_size() as u32 + 8;
        let ids: Vec<u32> =
            data.chunks_exact(2).take(256).map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])) % range).collect();
        for special in [SpecialTokens::Skip, SpecialTokens::Keep] {
            let _ = tokenizer.decode(&ids, special);
        }
        for &id in &ids {
            let _ = tokenizer.token_bytes(id);
            let _ = tokenizer.timestamp_seconds(id);
        }
        let _ = tokenizer.encode(&String::from_utf8_lossy(&data[..data.len().min(128)]));
    }
}

/// Any bytes through the audio front end as the server and standard input hand files to it,
/// without an extension hint: symphonia's probe, demuxers and decoders for WAV, FLAC, MP3 and
/// OGG Vorbis, the downmix, the 16 kHz resampler.
pub fn audio(data: &[u8]) {
    let _ = decode_bytes(data.to_vec(), "fuzz", None);
}

/// The Silero VAD's ONNX file: protobuf, graph structure, weights.
pub fn vad_onnx(data: &[u8]) {
    let _ = VadWeights::from_onnx(data, "silero_vad_v6.onnx");
}
