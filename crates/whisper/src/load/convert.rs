//! Conversion of a CTranslate2 Whisper folder into a Hugging Face one: `model.safetensors`
//! (every tensor f16, under the canonical names, which are Hugging Face's), `config.json`,
//! `generation_config.json` and `tokenizer.json` copied as is.
//!
//! The converter reuses the loader: the CTranslate2 model is loaded (fused tensors split, key
//! bias dropped) and written back out, so a converted folder loads to the same weights.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use crate::error::Result;
use crate::error::model_error;
use crate::load::config::WhisperConfig;
use crate::load::ct2::load_ct2;
use crate::load::weights::WhisperWeights;
use susurrus_core::ir::DType;
use susurrus_core::tensor::{Q8Data, Tensor, TensorData};

/// The files of a Hugging Face Whisper folder, in memory.
#[derive(Clone, Debug)]
pub struct HfFiles {
    pub safetensors: Vec<u8>,
    pub config_json: String,
    pub generation_config_json: String,
}

/// The tokens a Hugging Face config names, looked up by their text in `tokenizer.json`.
#[derive(Deserialize)]
struct TokenizerJson {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
}

#[derive(Deserialize)]
struct AddedToken {
    id: u32,
    content: String,
}

/// How the converter stores the weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// Every tensor f16.
    F16,
    /// The matrices (linear, convolution and token embedding weights) int8 with one f32 scale
    /// per row (CTranslate2's int8 rule: `amax / 127`), as `<name>` (I8) and `<name>_scale`
    /// (F32, the value being `q * scale`); vectors and position tables f16. A model that is
    /// int8 already keeps its values and scales.
    Int8,
}

/// `model.safetensors` bytes of `weights`, every tensor rounded to f16 (exact for f16 models)
/// or, with [`WeightFormat::Int8`], the matrices quantized. A tied output projection is left
/// out, as Hugging Face checkpoints do.
pub fn hf_safetensors(weights: &WhisperWeights, format: WeightFormat) -> Result<Vec<u8>> {
    const FILE: &str = "model.safetensors";
    let mut stored: Vec<(String, Vec<usize>, Vec<u8>, safetensors::Dtype)> = Vec::new();
    for (name, t) in weights.tensors() {
        let dims = t.shape().dims().to_vec();
        let matrix = dims.len() >= 2 && !name.ends_with("embed_positions.weight");
        if format == WeightFormat::Int8 && matrix {
            let q = match t.data() {
                TensorData::Q8(q) => q.clone(),
                _ => Q8Data::quantize(&t.to_f32(), dims[0])?,
            };
            let values = bytemuck::cast_slice::<i8, u8>(q.values()).to_vec();
            stored.push((name.clone(), dims, values, safetensors::Dtype::I8));
            let scales = bytemuck::cast_slice::<f32, u8>(q.scales()).to_vec();
            stored.push((format!("{name}_scale"), vec![q.scales().len()], scales, safetensors::Dtype::F32));
            continue;
        }
        let half = match t.dtype() {
            DType::F16 => t.to_bytes(),
            _ => Tensor::from_f32(DType::F16, t.shape().clone(), t.to_f32())?.to_bytes(),
        };
        stored.push((name.clone(), dims, half, safetensors::Dtype::F16));
    }
    let mut views = Vec::with_capacity(stored.len());
    for (name, dims, bytes, dtype) in &stored {
        let view = safetensors::tensor::TensorView::new(*dtype, dims.clone(), bytes)
            .map_err(|e| model_error(FILE, format!("tensor {name}: {e}")))?;
        views.push((name.as_str(), view));
    }
    let metadata = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(metadata)).map_err(|e| model_error(FILE, e.to_string()))
}

/// A Hugging Face `config.json` for `config`; token ids for the special tokens come from the
/// tokenizer when it has them.
pub fn hf_config_json(config: &WhisperConfig, tokens: &BTreeMap<String, u32>) -> String {
    let mut out = json!({
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "d_model": config.d_model,
        "encoder_layers": config.encoder_layers,
        "decoder_layers": config.decoder_layers,
        "encoder_attention_heads": config.encoder_heads,
        "decoder_attention_heads": config.decoder_heads,
        "encoder_ffn_dim": config.encoder_ffn,
        "decoder_ffn_dim": config.decoder_ffn,
        "vocab_size": config.n_vocab,
        "num_mel_bins": config.n_mels,
        "max_source_positions": config.n_audio_ctx,
        "max_target_positions": config.n_text_ctx,
        "activation_function": "gelu",
        "scale_embedding": false,
        "tie_word_embeddings": true,
        "torch_dtype": "float16",
        "suppress_tokens": config.generation.suppress_ids,
        "begin_suppress_tokens": config.generation.suppress_ids_begin,
    });
    if let Some(&eot) = tokens.get("<|endoftext|>") {
        out["eos_token_id"] = eot.into();
        out["pad_token_id"] = eot.into();
    }
    if let Some(&sot) = tokens.get("<|startoftranscript|>") {
        out["bos_token_id"] = sot.into();
        out["decoder_start_token_id"] = sot.into();
    }
    format!("{out:#}")
}

/// A Hugging Face `generation_config.json`: alignment heads, suppressed tokens and the
/// languages as `lang_to_id`, whose token texts come from the tokenizer.
pub fn hf_generation_config_json(config: &WhisperConfig, tokens: &BTreeMap<String, u32>) -> Result<String> {
    let by_id: BTreeMap<u32, &str> = tokens.iter().map(|(text, &id)| (id, text.as_str())).collect();
    let mut lang_to_id = serde_json::Map::new();
    for &id in &config.generation.lang_ids {
        let text = by_id.get(&id).ok_or_else(|| {
            model_error("tokenizer.json", format!("no added token has id {id}, a language id of config.json"))
        })?;
        lang_to_id.insert(text.to_string(), id.into());
    }
    let out = json!({
        "alignment_heads": config.generation.alignment_heads,
        "suppress_tokens": config.generation.suppress_ids,
        "begin_suppress_tokens": config.generation.suppress_ids_begin,
        "lang_to_id": lang_to_id,
        "is_multilingual": config.is_multilingual(),
    });
    Ok(format!("{out:#}"))
}

/// The added (special) tokens of a `tokenizer.json`, text -> id.
fn added_tokens(tokenizer_json: &[u8]) -> Result<BTreeMap<String, u32>> {
    let parsed: TokenizerJson =
        serde_json::from_slice(tokenizer_json).map_err(|e| model_error("tokenizer.json", format!("bad JSON: {e}")))?;
    Ok(parsed.added_tokens.into_iter().map(|t| (t.content, t.id)).collect())
}

/// Converts a CTranslate2 model in memory (`model.bin`, `config.json`, `tokenizer.json`).
pub fn convert_ct2_to_hf(
    model_bin: &[u8],
    config_json: &[u8],
    tokenizer_json: &[u8],
    format: WeightFormat,
) -> Result<HfFiles> {
    let weights = load_ct2(model_bin, config_json)?;
    let tokens = added_tokens(tokenizer_json)?;
    Ok(HfFiles {
        safetensors: hf_safetensors(&weights, format)?,
        config_json: hf_config_json(weights.config(), &tokens),
        generation_config_json: hf_generation_config_json(weights.config(), &tokens)?,
    })
}

/// Converts the CTranslate2 folder `src` into a Hugging Face folder `dst` (created if needed).
pub fn convert_ct2_dir_to_hf(src: &Path, dst: &Path) -> Result<()> {
    let read = |name: &str| crate::files::read_small(&src.join(name), &src.join(name).display().to_string());
    let tokenizer = read("tokenizer.json")?;
    let model = src.join("model.bin");
    let model_bin = crate::load::weights::FileBytes::open(&model, &model.display().to_string())?;
    let files = convert_ct2_to_hf(&model_bin, &read("config.json")?, &tokenizer, WeightFormat::F16)?;
    std::fs::create_dir_all(dst)
        .map_err(|e| model_error(&dst.display().to_string(), format!("cannot create the folder: {e}")))?;
    let outputs: [(&str, &[u8]); 4] = [
        ("model.safetensors", &files.safetensors),
        ("config.json", files.config_json.as_bytes()),
        ("generation_config.json", files.generation_config_json.as_bytes()),
        ("tokenizer.json", &tokenizer),
    ];
    for (name, bytes) in outputs {
        let path = dst.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| model_error(&path.display().to_string(), format!("cannot write: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::ct2::load_ct2_dir;
    use crate::load::ct2::writer::{config_json, model_bin};
    use crate::load::hf::{load_hf, load_hf_dir, load_hf_with_generation};
    use crate::load::weights::testing::{multilingual_config, small_config, tiny_en_dir};

    /// A tokenizer.json with the given added tokens.
    fn tokenizer(tokens: &[(&str, u32)]) -> Vec<u8> {
        let added: Vec<_> = tokens.iter().map(|(c, id)| json!({"id": id, "content": c, "special": true})).collect();
        json!({ "added_tokens": added }).to_string().into_bytes()
    }

    #[test]
    fn tiny_en_converts_to_equal_weights() {
        let src = tiny_en_dir();
        let dst = std::env::temp_dir().join(format!("susurrus-convert-test-{}", std::process::id()));
        convert_ct2_dir_to_hf(&src, &dst).unwrap();
        let original = load_ct2_dir(&src).unwrap();
        let converted = load_hf_dir(&dst).unwrap();
        let tokenizer_copied = std::fs::read(dst.join("tokenizer.json")).unwrap();
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dst.join("config.json")).unwrap()).unwrap();
        std::fs::remove_dir_all(&dst).unwrap();
        assert_eq!(converted, original);
        assert_eq!(tokenizer_copied, std::fs::read(src.join("tokenizer.json")).unwrap());
        assert_eq!(
            (config["eos_token_id"].as_u64(), config["decoder_start_token_id"].as_u64()),
            (Some(50256), Some(50257))
        );
    }

    #[test]
    fn f16_models_convert_exactly_and_f32_rounds_to_f16() {
        let multi = crate::load::weights::testing::random(multilingual_config(), DType::F16, 9);
        let langs = [("<|en|>", 50259), ("<|zh|>", 50260), ("<|de|>", 50261)];
        let files =
            convert_ct2_to_hf(&model_bin(&multi), &config_json(&multi), &tokenizer(&langs), WeightFormat::F16).unwrap();
        let back = load_hf_with_generation(
            &files.safetensors,
            files.config_json.as_bytes(),
            files.generation_config_json.as_bytes(),
        );
        assert_eq!(back.unwrap(), multi);

        let w = crate::load::weights::testing::random(small_config(), DType::F32, 9);
        let files = convert_ct2_to_hf(&model_bin(&w), &config_json(&w), &tokenizer(&[]), WeightFormat::F16).unwrap();
        let back = load_hf_with_generation(
            &files.safetensors,
            files.config_json.as_bytes(),
            files.generation_config_json.as_bytes(),
        )
        .unwrap();
        assert_eq!(back.config(), w.config());
        // Without generation_config.json the alignment heads are unknown.
        let bare = load_hf(&files.safetensors, files.config_json.as_bytes()).unwrap();
        assert!(bare.config().generation.alignment_heads.is_empty());
        for (name, t) in w.tensors() {
            let half = back.get(name).unwrap();
            assert_eq!(half.dtype(), DType::F16, "{name}");
            let rounded: Vec<f32> = t.to_f32().iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
            assert_eq!(half.to_f32(), rounded, "{name}");
        }
    }

    /// Int8: every matrix comes back q8 with the values and scales of CTranslate2's rule
    /// applied to the original (`Tensor::quantized_q8`), vectors and position tables f16.
    #[test]
    fn int8_conversion_quantizes_the_matrices() {
        let multi = crate::load::weights::testing::random(multilingual_config(), DType::F16, 9);
        let langs = [("<|en|>", 50259), ("<|zh|>", 50260), ("<|de|>", 50261)];
        let files = convert_ct2_to_hf(&model_bin(&multi), &config_json(&multi), &tokenizer(&langs), WeightFormat::Int8)
            .unwrap();
        let back = load_hf_with_generation(
            &files.safetensors,
            files.config_json.as_bytes(),
            files.generation_config_json.as_bytes(),
        )
        .unwrap();
        assert_eq!(back.config(), multi.config());
        let mut quantized = 0;
        for (name, t) in multi.tensors() {
            let got = back.get(name).unwrap();
            if t.shape().rank() >= 2 && !name.ends_with("embed_positions.weight") {
                assert_eq!(got, &t.quantized_q8().unwrap(), "{name}");
                quantized += 1;
            } else {
                assert_eq!(got, t, "{name}");
            }
        }
        assert!(quantized > 10, "{quantized} matrices");
        // An int8 model converted again keeps its values (nothing is quantized twice).
        let again = hf_safetensors(&back, WeightFormat::Int8).unwrap();
        assert_eq!(again, files.safetensors);
    }

    #[test]
    fn conversion_errors() {
        let multi = crate::load::weights::testing::random(multilingual_config(), DType::F16, 9);
        let e = convert_ct2_to_hf(
            &model_bin(&multi),
            &config_json(&multi),
            &tokenizer(&[("<|en|>", 50259)]),
            WeightFormat::F16,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "tokenizer.json: no added token has id 50260, a language id of config.json");
        let e = convert_ct2_to_hf(&model_bin(&multi), &config_json(&multi), b"[", WeightFormat::F16).unwrap_err();
        assert!(e.to_string().starts_with("tokenizer.json: bad JSON: "), "{e}");
        let missing = std::env::temp_dir().join("susurrus-no-such-model-folder");
        let e = convert_ct2_dir_to_hf(&missing, &missing.join("out")).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!("{}: cannot read: ", missing.join("tokenizer.json").display())),
            "{e}"
        );
    }
}
