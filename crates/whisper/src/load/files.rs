//! A model given as named files in memory: what the browser holds after fetching a model
//! folder or reading the files a user picked. One place says which format a set of files is,
//! which files each format needs, and loads weights and tokenizer from them, so the web crate
//! never guesses.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::Result;
use crate::error::model_error;
use crate::load::ct2::{Ct2File, load_ct2, load_ct2_parsed};
use crate::load::hf::{SafeTensor, load_hf, load_hf_parsed, load_hf_with_generation};
use crate::load::weights::WhisperWeights;
use crate::text::tokenizer::Tokenizer;

/// The two folder layouts a Whisper model comes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelFormat {
    /// CTranslate2 / faster-whisper: `model.bin`, `config.json`, `vocabulary.txt`.
    Ct2,
    /// Hugging Face: `model.safetensors`, `config.json`, `tokenizer.json`.
    HuggingFace,
}

impl ModelFormat {
    /// The format of a folder whose `config.json` holds `config_json`: a Hugging Face config
    /// describes the architecture (`d_model`), a CTranslate2 one only generation settings
    /// (the architecture is in `model.bin`).
    pub fn from_config_json(config_json: &[u8]) -> Result<ModelFormat> {
        let value: Value =
            serde_json::from_slice(config_json).map_err(|e| model_error("config.json", format!("bad JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(model_error("config.json", "is not a JSON object"));
        };
        Ok(if map.contains_key("d_model") { ModelFormat::HuggingFace } else { ModelFormat::Ct2 })
    }

    /// The format of a set of files, by which weights file is among them.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<ModelFormat> {
        let names: Vec<&str> = names.into_iter().collect();
        let has = |n: &str| names.contains(&n);
        match (has("model.bin"), has("model.safetensors")) {
            (true, false) => Ok(ModelFormat::Ct2),
            (false, true) => Ok(ModelFormat::HuggingFace),
            (true, true) => {
                Err(model_error("model files", "both model.bin and model.safetensors given; pick one model"))
            }
            (false, false) => Err(model_error(
                "model files",
                format!(
                    "no model.bin (CTranslate2) or model.safetensors (Hugging Face) among {}",
                    if names.is_empty() { "no files".to_string() } else { names.join(", ") }
                ),
            )),
        }
    }

    /// Files a model of this format cannot load without.
    pub fn required_files(self) -> &'static [&'static str] {
        match self {
            ModelFormat::Ct2 => &["model.bin", "config.json"],
            ModelFormat::HuggingFace => &["model.safetensors", "config.json"],
        }
    }

    /// Files loaded when present. One of the tokenizer files (`vocabulary.txt`,
    /// `tokenizer.json`) must be there; [`load_files`] says so when neither is.
    pub fn optional_files(self) -> &'static [&'static str] {
        match self {
            ModelFormat::Ct2 => &["vocabulary.txt", "tokenizer.json"],
            ModelFormat::HuggingFace => &["tokenizer.json", "generation_config.json", "vocabulary.txt"],
        }
    }
}

/// Loads weights and tokenizer from files by name (`model.bin`, `config.json`, ...; other
/// names are ignored). Every missing or corrupt file is an error naming it.
pub fn load_files(files: &BTreeMap<String, Vec<u8>>) -> Result<(WhisperWeights, Tokenizer)> {
    let format = ModelFormat::from_names(files.keys().map(String::as_str))?;
    let get = |name: &str| files.get(name).map(Vec::as_slice);
    let need = |name: &str| get(name).ok_or_else(|| model_error(name, "missing: the model's files must include it"));
    for name in format.required_files() {
        need(name)?;
    }
    let weights = match format {
        ModelFormat::Ct2 => load_ct2(need("model.bin")?, need("config.json")?)?,
        ModelFormat::HuggingFace => match get("generation_config.json") {
            Some(generation) => load_hf_with_generation(need("model.safetensors")?, need("config.json")?, generation)?,
            None => load_hf(need("model.safetensors")?, need("config.json")?)?,
        },
    };
    Ok((weights, tokenizer(files)?))
}

/// A model's weights file parsed as it arrived ([`crate::load::ct2_stream`],
/// [`crate::load::hf_stream`]): its data is owned as the tensors keep it.
pub enum ParsedWeights {
    Ct2(Ct2File<'static>),
    Hf(Vec<SafeTensor<'static>>),
}

impl ParsedWeights {
    /// The file it was parsed from.
    pub fn file_name(&self) -> &'static str {
        match self {
            ParsedWeights::Ct2(_) => "model.bin",
            ParsedWeights::Hf(_) => "model.safetensors",
        }
    }
}

/// [`load_files`] for a model whose weights file was parsed as it arrived (its data moves
/// into the tensors), with its other files by name: the same checks of the set of files and
/// the same errors.
pub fn load_files_with_parsed(
    parsed: ParsedWeights,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<(WhisperWeights, Tokenizer)> {
    let weights_file = parsed.file_name();
    let format = ModelFormat::from_names(files.keys().map(String::as_str).chain([weights_file]))?;
    let need = |name: &str| {
        files
            .get(name)
            .map(Vec::as_slice)
            .ok_or_else(|| model_error(name, "missing: the model's files must include it"))
    };
    for name in format.required_files().iter().filter(|&&n| n != weights_file) {
        need(name)?;
    }
    let weights = match parsed {
        ParsedWeights::Ct2(file) => load_ct2_parsed(file, weights_file, need("config.json")?)?,
        ParsedWeights::Hf(tensors) => {
            load_hf_parsed(tensors, need("config.json")?, files.get("generation_config.json").map(Vec::as_slice))?
        }
    };
    Ok((weights, tokenizer(files)?))
}

/// The tokenizer of a model's files (`vocabulary.txt` or `tokenizer.json`).
fn tokenizer(files: &BTreeMap<String, Vec<u8>>) -> Result<Tokenizer> {
    let named = |name: &'static str| files.get(name).map(|bytes| (bytes.as_slice(), name));
    Tokenizer::from_files(named("vocabulary.txt"), named("tokenizer.json"), "the model's files")
}
