//! Loading a model from named files in memory (what the browser has): the format each set of
//! files is, and errors that name the missing or corrupt file.

use susurrus_testkit::whisper::small_model_files;
use susurrus_whisper::files::{ModelFormat, load_files};

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
