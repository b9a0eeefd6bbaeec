//! Loading a model from named files in memory (what the browser has): the format each set of
//! files is, and errors that name the missing or corrupt file.

use std::collections::BTreeMap;

use susurrus_testkit::golden;
use susurrus_testkit::whisper::small_model_files;
use susurrus_whisper::load::ct2::parse_model_bin;
use susurrus_whisper::load::files::{ModelFormat, load_files};

#[test]
fn formats_follow_the_config_and_the_file_names() {
    let hf = br#"{"d_model": 384, "model_type": "whisper"}"#;
    let ct2 = br#"{"alignment_heads": [[2, 2]], "suppress_ids": [1]}"#;
    assert_eq!(ModelFormat::from_config_json(hf).unwrap(), ModelFormat::HuggingFace);
    assert_eq!(ModelFormat::from_config_json(ct2).unwrap(), ModelFormat::Ct2);
    let err = ModelFormat::from_config_json(b"[1]").unwrap_err().to_string();
    assert_eq!(err, "config.json: is not a JSON object");
    let err = ModelFormat::from_config_json(b"{").unwrap_err().to_string();
    assert!(err.starts_with("config.json: bad JSON: EOF while parsing"), "{err}");

    assert_eq!(ModelFormat::from_names(["config.json", "model.bin"]).unwrap(), ModelFormat::Ct2);
    assert_eq!(ModelFormat::from_names(["model.safetensors"]).unwrap(), ModelFormat::HuggingFace);
    let err = ModelFormat::from_names(["model.bin", "model.safetensors"]).unwrap_err().to_string();
    assert_eq!(err, "model files: both model.bin and model.safetensors given; pick one model");
    let err = ModelFormat::from_names([]).unwrap_err().to_string();
    assert_eq!(err, "model files: no model.bin (CTranslate2) or model.safetensors (Hugging Face) among no files");
}

#[test]
fn missing_and_corrupt_files_are_named() {
    let files = small_model_files(1).unwrap();
    let without = |name: &str| {
        let mut f = files.clone();
        f.remove(name);
        load_files(&f).err().map(|e| e.to_string())
    };
    assert_eq!(without("config.json").as_deref(), Some("config.json: missing: the model's files must include it"));
    assert_eq!(
        without("vocabulary.txt").as_deref(),
        Some("the model's files: no vocabulary.txt or tokenizer.json in this folder")
    );
    // generation_config.json is optional: the model loads without its alignment heads.
    assert!(without("generation_config.json").is_none());

    let mut corrupt = files.clone();
    let weights = corrupt.get_mut("model.safetensors").unwrap();
    weights.truncate(weights.len() / 2);
    let err = load_files(&corrupt).unwrap_err().to_string();
    assert!(err.starts_with("model.safetensors: "), "{err}");
}

/// The real tiny.en folder's files, by name, as the browser holds them.
fn tiny_en_files() -> BTreeMap<String, Vec<u8>> {
    let dir = golden::model_dir();
    ["model.bin", "config.json", "vocabulary.txt", "tokenizer.json"]
        .into_iter()
        .map(|name| (name.to_string(), std::fs::read(dir.join(name)).unwrap()))
        .collect()
}

/// Where variable `name`'s data starts in `bin`, its record's byte and its f16 element count.
fn variable_in(bin: &[u8], name: &str) -> (usize, usize, usize) {
    let parsed = parse_model_bin(bin, "model.bin").unwrap();
    let v = parsed.variables.iter().find(|v| v.name == name).unwrap();
    (v.data.bytes().as_ptr() as usize - bin.as_ptr() as usize, v.offset, v.data.bytes().len() / 2)
}

/// Damaged weights are refused with the tensor's name before any work: four NaN and infinite
/// f16 values written into an encoder layer of the real tiny.en `model.bin` (which loaded and
/// gave text like "!!!!!!" before), and one NaN in the small model's safetensors.
#[test]
fn non_finite_weights_are_errors_naming_the_tensor() {
    let mut files = tiny_en_files();
    let bin = files.get_mut("model.bin").unwrap();
    let name = "encoder/layer_1/ffn/linear_0/weight";
    let (data, record, _) = variable_in(bin, name);
    for (element, bits) in [(1000, 0x7e00u16), (1001, 0x7c00), (5000, 0xfc00), (9000, 0x7e00)] {
        bin[data + 2 * element..data + 2 * element + 2].copy_from_slice(&bits.to_le_bytes());
    }
    let err = load_files(&files).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "model.bin: variable {name} at byte {record} holds 4 non-finite values (the first, NaN, at element \
             1000): the file is damaged"
        )
    );

    let mut files = small_model_files(1).unwrap();
    let safetensors = files.get_mut("model.safetensors").unwrap();
    let header_len = u64::from_le_bytes(safetensors[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&safetensors[8..8 + header_len]).unwrap();
    let tensor = "model.decoder.layers.1.fc2.weight";
    let start = 8 + header_len + header[tensor]["data_offsets"][0].as_u64().unwrap() as usize;
    safetensors[start + 6..start + 8].copy_from_slice(&0x7c00u16.to_le_bytes());
    let err = load_files(&files).unwrap_err().to_string();
    assert!(err.starts_with(&format!("model.safetensors: tensor {tensor} (data at byte ")), "{err}");
    assert!(err.ends_with("holds 1 non-finite value (the first, inf, at element 3): the file is damaged"), "{err}");
}

/// Damage that stays finite is refused too: the top exponent bit of 2,000 values of the real
/// tiny.en's token embedding set (each value 65,536 times larger; the model loaded and decoded
/// " Buddhism Buddhism…" before). The real models' own largest values pass (their suites load
/// them).
#[test]
fn flipped_exponent_bits_are_errors_naming_the_tensor() {
    let mut files = tiny_en_files();
    let bin = files.get_mut("model.bin").unwrap();
    let name = "decoder/embeddings/weight";
    let (data, record, len) = variable_in(bin, name);
    // 2,000 elements spread over the embedding by a multiplicative hash.
    for k in 0..2000u64 {
        let element = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize % len;
        let at = data + 2 * element;
        let bits = u16::from_le_bytes([bin[at], bin[at + 1]]) | 0x4000;
        bin[at..at + 2].copy_from_slice(&bits.to_le_bytes());
    }
    let err = load_files(&files).unwrap_err().to_string();
    let prefix = format!("model.bin: variable {name} at byte {record} holds a value of magnitude ");
    assert!(err.starts_with(&prefix), "{err}");
    assert!(
        err.ends_with(
            "real Whisper weights stay within a few hundred times): the file is damaged, fetch or convert the model \
             again"
        ),
        "{err}"
    );
}
