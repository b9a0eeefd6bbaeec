//! Reader of Hugging Face Whisper models (`model.safetensors`, `config.json` and, when present,
//! `generation_config.json`).
//!
//! The `safetensors` crate parses and validates the file (header, dtypes, offsets that cover
//! the data section exactly). Its errors do not say which tensor or byte is wrong, so when it
//! rejects a file the header is walked again here to name them. The tensor names are already
//! the canonical ones (`WhisperModel` checkpoints, saved without the `model.` prefix, get it
//! added).

use std::collections::BTreeMap;
use std::path::Path;

use half::bf16;
use safetensors::Dtype;
use safetensors::tensor::{Metadata, TensorInfo};
use serde::Deserialize;

use crate::error::Result;
use crate::error::model_error;
use crate::load::config::{GenerationConfig, LAYER_NORM_EPS};
use crate::load::file_data::FileData;
use crate::load::weights::{FileBytes, Parts, WhisperWeights};
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::tensor::{Tensor, TensorData};

/// Bytes of the header-length prefix.
const LEN_BYTES: usize = 8;

/// One tensor of a safetensors file: its data borrowed from the whole file
/// ([`parse_safetensors`]), or owned as its tensor keeps it ([`crate::load::hf_stream`]: f32 and f16
/// as they are, bf16 already widened to f32, I8 as bytes).
#[derive(Clone, Debug)]
pub struct SafeTensor<'a> {
    pub name: String,
    /// F32, F16 or BF16 (the float types a Whisper checkpoint uses), or I8 with scales.
    pub dtype: Dtype,
    pub dims: Vec<usize>,
    /// Absolute byte offset of the data in the file.
    pub offset: usize,
    pub data: FileData<'a>,
}

impl SafeTensor<'_> {
    /// The tensor, its owned data moved in; borrowed data is copied (bf16 widened exactly).
    fn into_tensor(self, file: &str) -> Result<Tensor> {
        let described = self.describe();
        let made = match (self.dtype, self.data) {
            (Dtype::F32 | Dtype::BF16, FileData::F32(values)) => Tensor::f32(self.dims.clone(), values),
            (Dtype::F16, FileData::F16(values)) => Tensor::new(self.dims.clone(), TensorData::F16(values)),
            (dtype, data) => return SafeTensor { dtype, data, ..self }.to_tensor(file),
        };
        made.map_err(|e| model_error(file, format!("{described}: {e}")))
    }

    /// The tensor of data as the file stores it: f16 stays f16, f32 stays f32, bf16 widens
    /// exactly to f32.
    fn to_tensor(&self, file: &str) -> Result<Tensor> {
        let data = self.data.bytes();
        let made = match self.dtype {
            Dtype::F32 => Tensor::from_bytes(&TensorType::new(DType::F32, self.dims.clone()), data),
            Dtype::F16 => Tensor::from_bytes(&TensorType::new(DType::F16, self.dims.clone()), data),
            _ => Tensor::f32(self.dims.clone(), widen_bf16(data)),
        };
        made.map_err(|e| model_error(file, format!("{}: {e}", self.describe())))
    }

    /// An I8 tensor and its scales (`<name>_scale`: F32, one per row, the value being
    /// `q * scale`, as `susurrus convert --quantize int8` writes them) as a q8 tensor.
    fn to_q8(&self, scale: &SafeTensor, file: &str) -> Result<Tensor> {
        let rows = self.dims.first().copied().unwrap_or(1);
        if scale.dtype != Dtype::F32 || scale.dims != [rows] {
            return Err(model_error(
                file,
                format!(
                    "{} ({} {:?}) is not one F32 scale per row of {} ({rows} rows)",
                    scale.describe(),
                    scale.dtype,
                    scale.dims,
                    self.describe()
                ),
            ));
        }
        let scales: Vec<f32> = bytemuck::pod_collect_to_vec(scale.data.bytes());
        if let Some(bad) = scales.iter().position(|s| !s.is_finite() || *s < 0.0) {
            return Err(model_error(
                file,
                format!("{}: scale {} of row {bad} is not a number >= 0", scale.describe(), scales[bad]),
            ));
        }
        Tensor::q8(self.dims.clone(), bytemuck::cast_slice(self.data.bytes()), &scales)
            .map_err(|e| model_error(file, format!("{}: {e}", self.describe())))
    }

    fn describe(&self) -> String {
        format!("tensor {} (data at byte {})", self.name, self.offset)
    }

    /// Name, dtype, shape and offset, with no data.
    fn clone_head(&self) -> SafeTensor<'static> {
        let (name, dtype, dims, offset) = (self.name.clone(), self.dtype, self.dims.clone(), self.offset);
        SafeTensor { name, dtype, dims, offset, data: FileData::Borrowed(&[]) }
    }
}

/// bf16 values (little-endian pairs of bytes) widened exactly to f32.
pub(crate) fn widen_bf16(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
}

/// Parses a safetensors file ([`read_header`], then each tensor's bytes); `file` names it in
/// errors. Tensors must be F32, F16, BF16 or I8; they must cover the data section exactly,
/// without gaps or overlaps, so a truncated or padded file is an error.
pub fn parse_safetensors<'a>(bytes: &'a [u8], file: &str) -> Result<Vec<SafeTensor<'a>>> {
    let n = header_length(bytes, bytes.len()).map_err(|e| model_error(file, e))?;
    let Some(header) = bytes.get(LEN_BYTES..LEN_BYTES + n) else {
        return Err(model_error(file, past_the_end(n, bytes.len())));
    };
    let tensors = read_header(header, Some(bytes.len())).map_err(|e| model_error(file, e))?;
    supported(&tensors).map_err(|e| model_error(file, e))?;
    let data_start = LEN_BYTES + n;
    tensors
        .into_iter()
        .map(|(name, info)| {
            let (begin, end) = info.data_offsets;
            // `read_header` has checked the offsets; this only keeps a slip from panicking.
            let data = bytes.get(data_start + begin..data_start + end).ok_or_else(|| {
                model_error(file, format!("tensor {name}: data_offsets [{begin}, {end}] lie outside the file"))
            })?;
            let (dtype, dims, offset) = (info.dtype, info.shape, data_start + begin);
            Ok(SafeTensor { name, dtype, dims, offset, data: FileData::Borrowed(data) })
        })
        .collect()
}

/// The most header bytes the `safetensors` crate reads (its `MAX_HEADER_SIZE`).
const MAX_HEADER: usize = 100_000_000;

/// The header's length from the first 8 of `bytes` (a file `file_len` bytes long, or its
/// start), checked against [`MAX_HEADER`].
pub(crate) fn header_length(bytes: &[u8], file_len: usize) -> std::result::Result<usize, String> {
    let Some(prefix) = bytes.get(..LEN_BYTES).and_then(|b| <[u8; LEN_BYTES]>::try_from(b).ok()) else {
        return Err(format!("{file_len} bytes are too few for the 8-byte header length"));
    };
    let n = u64::from_le_bytes(prefix);
    match usize::try_from(n) {
        Ok(n) if n <= MAX_HEADER => Ok(n),
        _ => Err(format!("header length {n} at byte 0 is above the 100 MB the safetensors crate reads")),
    }
}

/// The error of a file that ends (at `file_len` bytes) inside its `n`-byte header.
pub(crate) fn past_the_end(n: usize, file_len: usize) -> String {
    format!("header length {n} at byte 0 runs past the end of the file ({file_len} bytes)")
}

/// The tensors a header describes, in data order, as the `safetensors` crate reads and
/// validates them (UTF-8, JSON, each tensor's dtype and shape against its offsets, the offsets
/// contiguous from 0), and, with the file's length, the data section covering the rest of the
/// file exactly. Errors say which tensor or byte is wrong, which the crate's leave out. The
/// streaming reader checks a header before the data arrives, its length known or not.
pub(crate) fn read_header(
    header: &[u8],
    file_len: Option<usize>,
) -> std::result::Result<Vec<(String, TensorInfo)>, String> {
    let data_start = LEN_BYTES + header.len();
    let text = std::str::from_utf8(header)
        .map_err(|e| format!("the header is not UTF-8 at byte {}", LEN_BYTES + e.valid_up_to()))?;
    let metadata: Metadata = serde_json::from_str(text).map_err(|e| {
        bad_entry(header)
            .or_else(|| misplaced(header, file_len))
            .unwrap_or_else(|| format!("bad header JSON (bytes 8..{data_start}): {e}"))
    })?;
    if let Some(file_len) = file_len.filter(|&len| len != data_start + metadata.data_len()) {
        return Err(misplaced(header, Some(file_len)).unwrap_or_else(|| {
            format!("the tensors end at byte {} but the file at byte {file_len}", data_start + metadata.data_len())
        }));
    }
    let tensors = metadata.offset_keys().into_iter().filter_map(|name| {
        let info = metadata.info(&name)?.clone();
        Some((name, info))
    });
    Ok(tensors.collect())
}

/// The first tensor, in data order, of a dtype this reader does not take.
pub(crate) fn supported(tensors: &[(String, TensorInfo)]) -> std::result::Result<(), String> {
    match tensors.iter().find(|(_, info)| !matches!(info.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16 | Dtype::I8)) {
        Some((name, info)) => {
            Err(format!("tensor {name}: dtype {} is not supported (F32, F16, BF16, I8 with scales)", info.dtype))
        }
        None => Ok(()),
    }
}

/// The header's entries: the tensors and, under `__metadata__`, free-form strings.
fn header_entries(header: &[u8]) -> Option<BTreeMap<String, serde_json::Value>> {
    serde_json::from_slice(header).ok()
}

/// The first tensor entry of a JSON header that is no tensor description.
fn bad_entry(header: &[u8]) -> Option<String> {
    header_entries(header)?.into_iter().filter(|(name, _)| name != "__metadata__").find_map(|(name, value)| {
        let e = serde_json::from_value::<TensorInfo>(value).err()?;
        Some(format!("header entry of tensor {name}: {e}"))
    })
}

/// The first tensor, in data order, whose bytes are not where the header says or do not fit
/// its shape, or the bytes no tensor covers, in a file of `file_len` bytes (unknown: only the
/// tensors' own order and shapes are checked).
fn misplaced(header: &[u8], file_len: Option<usize>) -> Option<String> {
    let data_start = LEN_BYTES + header.len();
    let data_len = file_len.map(|len| len.saturating_sub(data_start));
    let mut tensors: Vec<(String, TensorInfo)> = header_entries(header)?
        .into_iter()
        .filter(|(name, _)| name != "__metadata__")
        .filter_map(|(name, value)| Some((name, serde_json::from_value(value).ok()?)))
        .collect();
    tensors.sort_by_key(|(_, info)| info.data_offsets);
    let mut covered = 0;
    for (name, info) in &tensors {
        let (begin, end) = info.data_offsets;
        if begin != covered {
            return Some(format!(
                "tensor {name} (data at byte {}) does not start where the previous tensor ends (byte {})",
                data_start + begin,
                data_start + covered
            ));
        }
        if end < begin || data_len.is_some_and(|len| end > len) {
            let file_len = file_len.unwrap_or(0);
            return Some(format!(
                "tensor {name}: data_offsets [{begin}, {end}] lie outside the data section (bytes {data_start}..{file_len})"
            ));
        }
        let bits = info.shape.iter().try_fold(info.dtype.bitsize() as u128, |acc, &d| acc.checked_mul(d as u128));
        if bits != Some((end - begin) as u128 * 8) {
            return Some(format!(
                "tensor {name} (data at byte {}): {} bytes do not match shape {:?} of {}",
                data_start + begin,
                end - begin,
                info.shape,
                info.dtype
            ));
        }
        covered = end;
    }
    let data_len = data_len?;
    (covered != data_len)
        .then(|| format!("{} bytes after the last tensor, from byte {}", data_len - covered, data_start + covered))
}

/// The model settings of a Hugging Face `config.json`; the sizes are optional because the
/// shapes carry them, but where stated they must agree.
#[derive(Deserialize)]
struct HfConfig {
    model_type: Option<String>,
    encoder_attention_heads: usize,
    decoder_attention_heads: usize,
    d_model: Option<usize>,
    encoder_layers: Option<usize>,
    decoder_layers: Option<usize>,
    encoder_ffn_dim: Option<usize>,
    decoder_ffn_dim: Option<usize>,
    vocab_size: Option<usize>,
    num_mel_bins: Option<usize>,
    max_source_positions: Option<usize>,
    max_target_positions: Option<usize>,
    activation_function: Option<String>,
    scale_embedding: Option<bool>,
    #[serde(flatten)]
    generation: HfGeneration,
}

/// Generation settings, found in `config.json` (older checkpoints) and `generation_config.json`.
#[derive(Deserialize, Default)]
struct HfGeneration {
    suppress_tokens: Option<Vec<u32>>,
    begin_suppress_tokens: Option<Vec<u32>>,
    alignment_heads: Option<Vec<(usize, usize)>>,
    lang_to_id: Option<BTreeMap<String, u32>>,
}

impl HfGeneration {
    /// Fills `g` with what this file states.
    fn apply(self, g: &mut GenerationConfig) {
        if let Some(v) = self.suppress_tokens {
            g.suppress_ids = v;
        }
        if let Some(v) = self.begin_suppress_tokens {
            g.suppress_ids_begin = v;
        }
        if let Some(v) = self.alignment_heads {
            g.alignment_heads = v;
        }
        if let Some(langs) = self.lang_to_id {
            let mut ids: Vec<u32> = langs.into_values().collect();
            ids.sort_unstable();
            g.lang_ids = ids;
        }
    }
}

/// Loads a Hugging Face Whisper model from the bytes of `model.safetensors` and `config.json`
/// (the browser's path; [`load_hf_dir`] reads a folder).
pub fn load_hf(safetensors: &[u8], config_json: &[u8]) -> Result<WhisperWeights> {
    load_named(safetensors, "model.safetensors", config_json, "config.json", None)
}

/// Like [`load_hf`], with `generation_config.json` (alignment heads, languages, suppressed
/// tokens), which overrides the same settings in `config.json`.
pub fn load_hf_with_generation(
    safetensors: &[u8],
    config_json: &[u8],
    generation_config_json: &[u8],
) -> Result<WhisperWeights> {
    let generation = Some((generation_config_json, "generation_config.json"));
    load_named(safetensors, "model.safetensors", config_json, "config.json", generation)
}

/// Loads `model.safetensors`, `config.json` and, if present, `generation_config.json` from a
/// Hugging Face model folder.
pub fn load_hf_dir(dir: &Path) -> Result<WhisperWeights> {
    let path = |name: &str| (dir.join(name), dir.join(name).display().to_string());
    let read = |(path, name): &(std::path::PathBuf, String)| crate::files::read_small(path, name);
    let (model, config, generation) = (path("model.safetensors"), path("config.json"), path("generation_config.json"));
    let generation_bytes = if generation.0.exists() { Some(read(&generation)?) } else { None };
    load_named(
        &FileBytes::open(&model.0, &model.1)?,
        &model.1,
        &read(&config)?,
        &config.1,
        generation_bytes.as_deref().map(|b| (b, generation.1.as_str())),
    )
}

/// The canonical name of a checkpoint tensor (`WhisperModel` saves without `model.`).
fn canonical(name: &str) -> String {
    if name.starts_with("encoder.") || name.starts_with("decoder.") {
        format!("model.{name}")
    } else {
        name.to_string()
    }
}

fn load_named(
    safetensors: &[u8],
    model_file: &str,
    config_json: &[u8],
    config_file: &str,
    generation_json: Option<(&[u8], &str)>,
) -> Result<WhisperWeights> {
    let settings = settings(config_json, config_file, generation_json)?;
    load_parsed(parse_safetensors(safetensors, model_file)?, model_file, settings, config_file)
}

/// Loads a Hugging Face Whisper model from a `model.safetensors` parsed as it arrived
/// ([`crate::load::hf_stream`]: its data moves into the tensors), `config.json` and, when given,
/// `generation_config.json`.
pub fn load_hf_parsed(
    tensors: Vec<SafeTensor>,
    config_json: &[u8],
    generation_config_json: Option<&[u8]>,
) -> Result<WhisperWeights> {
    let generation = generation_config_json.map(|bytes| (bytes, "generation_config.json"));
    let settings = settings(config_json, "config.json", generation)?;
    load_parsed(tensors, "model.safetensors", settings, "config.json")
}

/// `config.json`, checked, and the generation settings it and `generation_config.json` give.
fn settings(
    config_json: &[u8],
    config_file: &str,
    generation_json: Option<(&[u8], &str)>,
) -> Result<(HfConfig, GenerationConfig)> {
    let mut json: HfConfig =
        serde_json::from_slice(config_json).map_err(|e| model_error(config_file, format!("bad JSON: {e}")))?;
    if let Some(kind) = json.model_type.as_deref().filter(|&k| k != "whisper") {
        return Err(model_error(config_file, format!("model_type is {kind:?}, not \"whisper\"")));
    }
    if let Some(f) = json.activation_function.as_deref().filter(|&f| f != "gelu") {
        return Err(model_error(config_file, format!("activation_function is {f:?}: Whisper needs \"gelu\"")));
    }
    if json.scale_embedding == Some(true) {
        return Err(model_error(config_file, "scale_embedding is true: Whisper's embeddings are unscaled"));
    }
    let mut generation = GenerationConfig::default();
    std::mem::take(&mut json.generation).apply(&mut generation);
    if let Some((bytes, file)) = generation_json {
        let extra: HfGeneration =
            serde_json::from_slice(bytes).map_err(|e| model_error(file, format!("bad JSON: {e}")))?;
        extra.apply(&mut generation);
    }
    Ok((json, generation))
}

/// The weights of parsed tensors (in data order), each tensor's owned data moved in.
fn load_parsed(
    mut tensors: Vec<SafeTensor>,
    model_file: &str,
    (json, generation): (HfConfig, GenerationConfig),
    config_file: &str,
) -> Result<WhisperWeights> {
    let mut parts = Parts::new(model_file, |_| None);
    for i in 0..tensors.len() {
        let t = &tensors[i];
        if let Some(weight) = t.name.strip_suffix("_scale") {
            if !tensors.iter().any(|w| w.name == weight && w.dtype == Dtype::I8) {
                return Err(model_error(model_file, format!("{} scales no I8 tensor {weight}", t.describe())));
            }
            continue;
        }
        let (name, described) = (canonical(&t.name), t.describe());
        let tensor = if t.dtype == Dtype::I8 {
            let scale = tensors.iter().find(|s| s.name == format!("{}_scale", t.name)).ok_or_else(|| {
                model_error(model_file, format!("{} is I8 but the file has no {}_scale", t.describe(), t.name))
            })?;
            t.to_q8(scale, model_file)?
        } else {
            // Taken, so owned data moves into the tensor (scales and I8 tensors, which other
            // tensors look up, are never taken).
            let head = tensors[i].clone_head();
            std::mem::replace(&mut tensors[i], head).into_tensor(model_file)?
        };
        parts.insert(name, tensor, described)?;
    }
    let config =
        parts.derive_config(json.encoder_attention_heads, json.decoder_attention_heads, LAYER_NORM_EPS, generation)?;
    let stated = [
        ("d_model", json.d_model, config.d_model),
        ("encoder_layers", json.encoder_layers, config.encoder_layers),
        ("decoder_layers", json.decoder_layers, config.decoder_layers),
        ("encoder_ffn_dim", json.encoder_ffn_dim, config.encoder_ffn),
        ("decoder_ffn_dim", json.decoder_ffn_dim, config.decoder_ffn),
        ("vocab_size", json.vocab_size, config.n_vocab),
        ("num_mel_bins", json.num_mel_bins, config.n_mels),
        ("max_source_positions", json.max_source_positions, config.n_audio_ctx),
        ("max_target_positions", json.max_target_positions, config.n_text_ctx),
    ];
    for (key, said, found) in stated {
        if let Some(said) = said.filter(|&s| s != found) {
            return Err(model_error(config_file, format!("{key} is {said} but {model_file}'s tensors give {found}")));
        }
    }
    config.validate(config_file)?;
    parts.finish(config)
}

#[cfg(test)]
pub(crate) mod writer {
    use crate::load::weights::WhisperWeights;

    /// Edits the header JSON of a safetensors file and rebuilds the length prefix.
    pub fn with_header(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        edit(&mut header);
        let text = header.to_string();
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend(text.as_bytes());
        out.extend(&bytes[8 + n..]);
        out
    }

    /// A safetensors file of the stored tensors of `w`, each in its own dtype.
    pub fn safetensors(w: &WhisperWeights) -> Vec<u8> {
        let views: Vec<(String, Vec<u8>, Vec<usize>, safetensors::Dtype)> = w
            .tensors()
            .iter()
            .map(|(name, t)| {
                let dtype = if t.dtype() == susurrus_core::ir::DType::F16 {
                    safetensors::Dtype::F16
                } else {
                    safetensors::Dtype::F32
                };
                (name.clone(), t.to_bytes(), t.shape().dims().to_vec(), dtype)
            })
            .collect();
        let views = views.iter().map(|(name, bytes, dims, dtype)| {
            (name.as_str(), safetensors::tensor::TensorView::new(*dtype, dims.clone(), bytes).unwrap())
        });
        safetensors::serialize(views, None).unwrap()
    }

    /// A Hugging Face `config.json` for `w`.
    pub fn config_json(w: &WhisperWeights) -> Vec<u8> {
        let c = w.config();
        serde_json::json!({
            "model_type": "whisper",
            "d_model": c.d_model,
            "encoder_layers": c.encoder_layers,
            "decoder_layers": c.decoder_layers,
            "encoder_attention_heads": c.encoder_heads,
            "decoder_attention_heads": c.decoder_heads,
            "encoder_ffn_dim": c.encoder_ffn,
            "decoder_ffn_dim": c.decoder_ffn,
            "vocab_size": c.n_vocab,
            "num_mel_bins": c.n_mels,
            "max_source_positions": c.n_audio_ctx,
            "max_target_positions": c.n_text_ctx,
            "activation_function": "gelu",
            "scale_embedding": false,
            "suppress_tokens": c.generation.suppress_ids,
            "begin_suppress_tokens": c.generation.suppress_ids_begin,
            "alignment_heads": c.generation.alignment_heads,
        })
        .to_string()
        .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::writer::{config_json, safetensors, with_header};
    use super::*;
    use crate::load::names::{EMBED_TOKENS, PROJ_OUT};
    use crate::load::weights::testing::{multilingual_config, small_config};

    fn small(dtype: DType) -> WhisperWeights {
        crate::load::weights::testing::random(small_config(), dtype, 11)
    }

    fn err(model: &[u8], config: &[u8]) -> String {
        load_hf(model, config).unwrap_err().to_string()
    }

    /// The int8 file of `w` rebuilt from its tensors, `edit` applied to the (name, dtype,
    /// dims, bytes) list first.
    fn int8_edited(w: &WhisperWeights, edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>)) -> Vec<u8> {
        let bytes = crate::load::convert::hf_safetensors(w, crate::load::convert::WeightFormat::Int8).unwrap();
        let mut tensors: Vec<_> = parse_safetensors(&bytes, "model.safetensors")
            .unwrap()
            .into_iter()
            .map(|t| (t.name, t.dtype, t.dims, t.data.bytes().to_vec()))
            .collect();
        edit(&mut tensors);
        let views = tensors.iter().map(|(name, dtype, dims, data)| {
            (name.as_str(), safetensors::tensor::TensorView::new(*dtype, dims.clone(), data).unwrap())
        });
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn int8_tensors_need_their_scales() {
        let w = small(DType::F16);
        let config = config_json(&w);
        let fc1 = "model.decoder.layers.1.fc1.weight";
        assert_eq!(load_hf(&int8_edited(&w, |_| {}), &config).unwrap().get(fc1).unwrap().dtype(), DType::Q8);
        let unscaled = int8_edited(&w, |t| t.retain(|(n, ..)| *n != format!("{fc1}_scale")));
        let msg = err(&unscaled, &config);
        assert!(msg.starts_with(&format!("model.safetensors: tensor {fc1} (data at byte ")), "{msg}");
        assert!(msg.ends_with(&format!(") is I8 but the file has no {fc1}_scale")), "{msg}");
        let orphan = int8_edited(&w, |t| t.push(("extra_scale".into(), Dtype::F32, vec![1], vec![0; 4])));
        assert!(err(&orphan, &config).ends_with(") scales no I8 tensor extra"), "{}", err(&orphan, &config));
        let short = int8_edited(&w, |t| {
            let s = t.iter_mut().find(|(n, ..)| *n == format!("{fc1}_scale")).unwrap();
            s.2 = vec![s.2[0] - 1];
            s.3.truncate(s.3.len() - 4);
        });
        let msg = err(&short, &config);
        assert!(msg.contains(" (F32 [11]) is not one F32 scale per row of tensor "), "{msg}");
        let negative = int8_edited(&w, |t| {
            let s = t.iter_mut().find(|(n, ..)| *n == format!("{fc1}_scale")).unwrap();
            s.3[..4].copy_from_slice(&(-1.0f32).to_le_bytes());
        });
        assert!(
            err(&negative, &config).ends_with("scale -1 of row 0 is not a number >= 0"),
            "{}",
            err(&negative, &config)
        );
    }

    #[test]
    fn written_models_load_back_equal() {
        let multi = crate::load::weights::testing::random(multilingual_config(), DType::F16, 5);
        for w in [small(DType::F16), small(DType::F32), multi] {
            let (bytes, config) = (safetensors(&w), config_json(&w));
            // The languages are only in generation_config.json.
            let back = load_hf(&bytes, &config).unwrap();
            let mut without_langs = w.config().clone();
            without_langs.generation.lang_ids.clear();
            assert_eq!(back.config(), &without_langs);
            assert_eq!((back.tensors(), back.aliases()), (w.tensors(), w.aliases()));
            let langs = &w.config().generation.lang_ids;
            let lang_to_id: BTreeMap<String, u32> = langs.iter().map(|&id| (format!("<|{id}|>"), id)).collect();
            let generation = serde_json::json!({ "lang_to_id": lang_to_id }).to_string();
            assert_eq!(load_hf_with_generation(&bytes, &config, generation.as_bytes()).unwrap(), w);
        }
    }

    #[test]
    fn model_prefix_and_stored_projection() {
        let w = small(DType::F32);
        let bytes = safetensors(&w);
        let unprefixed = with_header(&bytes, |h| {
            let map = h.as_object_mut().unwrap();
            let names: Vec<String> = map.keys().cloned().collect();
            for name in names {
                let entry = map.remove(&name).unwrap();
                map.insert(name.strip_prefix("model.").map_or(name.clone(), str::to_string), entry);
            }
        });
        assert_eq!(load_hf(&unprefixed, &config_json(&w)).unwrap(), w);

        // A separately stored projection (same shape as the embedding) is kept as a tensor.
        let mut tensors = w.tensors().clone();
        tensors.insert(PROJ_OUT.into(), w.get(EMBED_TOKENS).unwrap().clone());
        let views: Vec<_> = tensors.iter().map(|(n, t)| (n.clone(), t.to_bytes(), t.shape().dims().to_vec())).collect();
        let file = safetensors::serialize(
            views.iter().map(|(n, b, d)| {
                (n.as_str(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, d.clone(), b).unwrap())
            }),
            None,
        )
        .unwrap();
        let back = load_hf(&file, &config_json(&w)).unwrap();
        assert!(back.aliases().is_empty());
        assert_eq!(back.get(PROJ_OUT).unwrap(), w.get(EMBED_TOKENS).unwrap());
    }

    #[test]
    fn errors_name_file_tensor_and_offset() {
        let w = small(DType::F16);
        let (bytes, config) = (safetensors(&w), config_json(&w));
        assert_eq!(err(&bytes[..5], &config), "model.safetensors: 5 bytes are too few for the 8-byte header length");
        let mut long = bytes.clone();
        long[3] = 1;
        assert_eq!(
            err(&long, &config),
            format!(
                "model.safetensors: header length {} at byte 0 runs past the end of the file ({} bytes)",
                u64::from_le_bytes(long[..8].try_into().unwrap()),
                bytes.len()
            )
        );
        // Above the crate's limit whatever the file's length (the crate checks that first).
        long[5] = 1;
        assert_eq!(
            err(&long, &config),
            format!(
                "model.safetensors: header length {} at byte 0 is above the 100 MB the safetensors crate reads",
                u64::from_le_bytes(long[..8].try_into().unwrap()),
            )
        );
        let bf = with_header(&bytes, |h| h["model.encoder.conv1.bias"]["dtype"] = "I16".into());
        assert_eq!(
            err(&bf, &config),
            "model.safetensors: tensor model.encoder.conv1.bias: dtype I16 is not supported (F32, F16, BF16, I8 with scales)"
        );
        let shape = with_header(&bytes, |h| h["model.encoder.conv1.bias"]["shape"] = serde_json::json!([4]));
        let msg = err(&shape, &config);
        assert!(msg.starts_with("model.safetensors: tensor model.encoder.conv1.bias (data at byte "), "{msg}");
        assert!(msg.ends_with("): 16 bytes do not match shape [4] of F16"), "{msg}");
        let missing = with_header(&bytes, |h| {
            let entry = h.as_object_mut().unwrap().remove("model.decoder.layers.1.fc2.bias").unwrap();
            h["model.decoder.layers.1.fc3.bias"] = entry;
        });
        assert_eq!(err(&missing, &config), "model.safetensors: missing tensor model.decoder.layers.1.fc2.bias");
        let mut trailing = bytes.clone();
        trailing.extend([0, 0]);
        assert_eq!(
            err(&trailing, &config),
            format!("model.safetensors: 2 bytes after the last tensor, from byte {}", bytes.len())
        );
        let cut = &bytes[..bytes.len() - 2];
        assert!(err(cut, &config).contains("lie outside the data section"));

        let json = |edit: fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_slice(&config).unwrap();
            edit(&mut v);
            v.to_string().into_bytes()
        };
        assert_eq!(
            err(&bytes, &json(|v| v["d_model"] = 16.into())),
            "config.json: d_model is 16 but model.safetensors's tensors give 8"
        );
        assert_eq!(
            err(&bytes, &json(|v| v["max_target_positions"] = 448.into())),
            "config.json: max_target_positions is 448 but model.safetensors's tensors give 5"
        );
        assert_eq!(
            err(&bytes, &json(|v| v["activation_function"] = "relu".into())),
            "config.json: activation_function is \"relu\": Whisper needs \"gelu\""
        );
        assert_eq!(
            err(&bytes, &json(|v| v["decoder_attention_heads"] = 3.into())),
            "config.json: decoder heads 3 do not divide d_model 8"
        );
        assert!(
            err(
                &bytes,
                &json(|v| {
                    v.as_object_mut().unwrap().remove("encoder_attention_heads");
                })
            )
            .starts_with("config.json: bad JSON: missing field `encoder_attention_heads`")
        );
        assert_eq!(
            err(&bytes, &json(|v| v["model_type"] = "bart".into())),
            "config.json: model_type is \"bart\", not \"whisper\""
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        let w = small(DType::F16);
        let (bytes, config) = (safetensors(&w), config_json(&w));
        assert!(load_hf(&bytes, &config).is_ok());
        for len in 0..bytes.len() {
            assert!(load_hf(&bytes[..len], &config).is_err(), "prefix of {len} bytes loaded");
        }
    }

    #[test]
    fn header_bit_flips_are_errors() {
        let w = small(DType::F16);
        let (bytes, config) = (safetensors(&w), config_json(&w));
        let header_end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        for at in 0..header_end {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[at] ^= 1 << bit;
                assert!(load_hf(&bad, &config).is_err(), "flipping bit {bit} of byte {at} still loads");
            }
        }
    }
}
