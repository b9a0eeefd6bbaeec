//! Reader of CTranslate2 Whisper models (`model.bin`, binary version 6, and `config.json`), as
//! faster-whisper distributes them.
//!
//! `model.bin` is little-endian: `u32` version, the spec name and `u32` revision, then the
//! variables `{name, u8 rank, u32 dims[rank], u8 dtype, u32 n_bytes, data}` and the aliases
//! `{alias, target}`; strings are a `u16` length that counts a trailing NUL. Float variables
//! with a shape are weights; scalars and integer variables are settings (`encoder/num_heads`,
//! `decoder/activation`, ...). Weights are mapped onto the canonical names of
//! [`super::weights`]: fused Q|K|V and cross-attention K|V are split by rows and the key bias,
//! which CTranslate2 stores as zeros, is dropped. Dropping it is exact whatever its value: a
//! key bias adds `q·b` to every score of a query alike, which softmax cancels.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use half::bf16;
use serde::Deserialize;

use crate::error::Result;
use crate::error::model_error;
use crate::load::config::{GenerationConfig, LAYER_NORM_EPS, parse_index};
use crate::load::file_data::FileData;
use crate::load::weights::{FileBytes, Parts, WhisperWeights, split_rows};
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::tensor::{Tensor, TensorData};

/// The only binary version read.
pub const BINARY_VERSION: u32 = 6;
/// The spec name of Whisper models.
pub const WHISPER_SPEC: &str = "WhisperSpec";
/// The revision of [`WHISPER_SPEC`] whose variables this reader maps (current CTranslate2).
pub const WHISPER_SPEC_REVISION: u32 = 3;
/// CTranslate2's code for GELU in `*/activation`.
const ACTIVATION_GELU: i64 = 3;

/// Element types of CTranslate2 variables, by their code in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ct2DType {
    F32,
    I8,
    I16,
    I32,
    F16,
    BF16,
}

impl Ct2DType {
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Ct2DType::F32,
            1 => Ct2DType::I8,
            2 => Ct2DType::I16,
            3 => Ct2DType::I32,
            4 => Ct2DType::F16,
            5 => Ct2DType::BF16,
            _ => return None,
        })
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn size(self) -> usize {
        match self {
            Ct2DType::I8 => 1,
            Ct2DType::I16 | Ct2DType::F16 | Ct2DType::BF16 => 2,
            Ct2DType::F32 | Ct2DType::I32 => 4,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Ct2DType::F32 | Ct2DType::F16 | Ct2DType::BF16)
    }
}

/// One variable of a `model.bin`.
#[derive(Clone, Debug)]
pub struct Ct2Variable<'a> {
    pub name: String,
    pub dims: Vec<usize>,
    pub dtype: Ct2DType,
    /// Byte offset of the variable's record (its name) in the file.
    pub offset: usize,
    pub data: FileData<'a>,
}

impl Ct2Variable<'_> {
    /// Integer values (little-endian, sign-extended); `None` for float variables.
    pub fn ints(&self) -> Option<Vec<i64>> {
        let data = self.data.bytes();
        let values = match self.dtype {
            Ct2DType::I8 => data.iter().map(|&b| i64::from(b as i8)).collect(),
            Ct2DType::I16 => data.chunks_exact(2).map(|c| i64::from(i16::from_le_bytes([c[0], c[1]]))).collect(),
            Ct2DType::I32 => {
                data.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect()
            }
            Ct2DType::F32 | Ct2DType::F16 | Ct2DType::BF16 => return None,
        };
        Some(values)
    }

    /// The variable as a tensor, its owned data moved in (f16 and f32), else copied.
    fn into_tensor(self, file: &str) -> Result<Tensor> {
        let made = match (self.dtype, self.data) {
            (Ct2DType::F16, FileData::F16(values)) => Tensor::new(self.dims.clone(), TensorData::F16(values)),
            (Ct2DType::F32, FileData::F32(values)) => Tensor::f32(self.dims.clone(), values),
            (dtype, data) => return Ct2Variable { data, dtype, ..self }.to_tensor(file),
        };
        made.map_err(|e| model_error(file, format!("variable {} at byte {}: {e}", self.name, self.offset)))
    }

    /// The variable as a tensor: f16 stays f16, f32 stays f32, bf16 widens exactly to f32.
    fn to_tensor(&self, file: &str) -> Result<Tensor> {
        let data = self.data.bytes();
        let made = match self.dtype {
            Ct2DType::F32 => Tensor::from_bytes(&TensorType::new(DType::F32, self.dims.clone()), data),
            Ct2DType::F16 => Tensor::from_bytes(&TensorType::new(DType::F16, self.dims.clone()), data),
            Ct2DType::BF16 => {
                let values = data.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect();
                Tensor::f32(self.dims.clone(), values)
            }
            Ct2DType::I8 | Ct2DType::I16 | Ct2DType::I32 => {
                return Err(model_error(file, format!("{}: integer weights are not supported", self.describe())));
            }
        };
        made.map_err(|e| model_error(file, format!("{}: {e}", self.describe())))
    }

    /// An int8 weight and its CTranslate2 scales (`weight_scale`: one per row, `q / scale`
    /// being the value) as a q8 tensor, whose scales are their reciprocals (`q * scale`).
    fn to_q8(&self, scale: &Ct2Variable, file: &str) -> Result<Tensor> {
        let rows = self.dims.first().copied().unwrap_or(1);
        let scales = match scale.to_tensor(file) {
            Ok(t) if scale.dims == [rows] => t.to_f32(),
            _ => {
                return Err(model_error(
                    file,
                    format!(
                        "{} ({:?} {:?}) is not one float scale per row of {} ({rows} rows)",
                        scale.describe(),
                        scale.dtype,
                        scale.dims,
                        self.describe()
                    ),
                ));
            }
        };
        if let Some(bad) = scales.iter().position(|s| !s.is_finite() || *s <= 0.0) {
            return Err(model_error(
                file,
                format!("{}: scale {} of row {bad} is not a positive number", scale.describe(), scales[bad]),
            ));
        }
        let inverse: Vec<f32> = scales.iter().map(|s| 1.0 / s).collect();
        Tensor::q8(self.dims.clone(), bytemuck::cast_slice(self.data.bytes()), &inverse)
            .map_err(|e| model_error(file, format!("{}: {e}", self.describe())))
    }

    fn describe(&self) -> String {
        format!("variable {} at byte {}", self.name, self.offset)
    }
}

/// The parsed contents of a `model.bin`.
#[derive(Clone, Debug)]
pub struct Ct2File<'a> {
    pub spec_name: String,
    pub spec_revision: u32,
    pub variables: Vec<Ct2Variable<'a>>,
    /// (alias, target, byte offset of the record).
    pub aliases: Vec<(String, String, usize)>,
}

/// A bounds-checked little-endian reader over bytes `base..` of a file; errors name the file
/// and the byte offset. `short` records that a read ran past the bytes it has: for a whole
/// file that is a truncation, for [`crate::load::ct2_stream`] a wait for the next chunk.
pub(crate) struct Reader<'a> {
    pub bytes: &'a [u8],
    /// Position in `bytes`.
    pub pos: usize,
    /// Where `bytes` starts in the file.
    pub base: usize,
    pub file: &'a str,
    pub short: bool,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], base: usize, file: &'a str) -> Self {
        Reader { bytes, pos: 0, base, file, short: false }
    }

    /// The position in the file.
    pub fn at(&self) -> usize {
        self.base + self.pos
    }

    pub fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        let slice = self.pos.checked_add(n).and_then(|end| self.bytes.get(self.pos..end));
        let Some(slice) = slice else {
            self.short = true;
            return Err(truncated(self.file, &what(), self.at(), n, self.base + self.bytes.len()));
        };
        self.pos += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u8(&mut self, what: &dyn Fn() -> String) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let at = self.at();
        let len = u16::from_le_bytes(self.array(what)?);
        let bytes = self.take(usize::from(len), what)?;
        let Some((&0, text)) = bytes.split_last() else {
            return Err(model_error(self.file, format!("{} at byte {at} is not NUL-terminated", what())));
        };
        String::from_utf8(text.to_vec())
            .map_err(|e| model_error(self.file, format!("{} at byte {at} is not UTF-8: {e}", what())))
    }
}

/// The error of a read of `need` bytes of `what` at byte `at` of a file that ends at `end`.
pub(crate) fn truncated(file: &str, what: &str, at: usize, need: usize, end: usize) -> crate::error::Error {
    model_error(file, format!("{what} at byte {at} needs {need} bytes but the file ends at byte {end} (truncated?)"))
}

/// The head of a `model.bin`: binary version (checked), spec name and revision, variable count.
pub(crate) fn read_head(r: &mut Reader) -> Result<(String, u32, u32)> {
    let version = r.u32(&|| "the binary version".into())?;
    if version != BINARY_VERSION {
        return Err(model_error(
            r.file,
            format!("binary version {version} at byte 0 is not supported (only {BINARY_VERSION})"),
        ));
    }
    let spec_name = r.string(&|| "the spec name".into())?;
    let spec_revision = r.u32(&|| "the spec revision".into())?;
    let count = r.u32(&|| "the variable count".into())?;
    Ok((spec_name, spec_revision, count))
}

/// A variable's record before its data.
pub(crate) struct VarHead {
    pub name: String,
    pub dims: Vec<usize>,
    pub dtype: Ct2DType,
    /// Byte offset of the record in the file.
    pub offset: usize,
    pub n_bytes: usize,
}

impl VarHead {
    /// What reading its data is, in errors.
    pub fn data_what(&self) -> String {
        format!("the data of variable {} (at byte {})", self.name, self.offset)
    }
}

/// Variable `i`'s record up to its data: name, shape, dtype, and a byte size that must match
/// them.
pub(crate) fn read_var_head(r: &mut Reader, i: u32) -> Result<VarHead> {
    let offset = r.at();
    let name = r.string(&|| format!("the name of variable {i}"))?;
    let what = || format!("variable {name} (at byte {offset})");
    let rank = r.u8(&|| format!("the rank of {}", what()))?;
    let mut dims = Vec::with_capacity(usize::from(rank));
    for _ in 0..rank {
        dims.push(r.u32(&|| format!("a dimension of {}", what()))? as usize);
    }
    let code_at = r.at();
    let code = r.u8(&|| format!("the dtype of {}", what()))?;
    let dtype = Ct2DType::from_code(code)
        .ok_or_else(|| model_error(r.file, format!("{}: unknown dtype code {code} at byte {code_at}", what())))?;
    let size_at = r.at();
    let n_bytes = r.u32(&|| format!("the byte size of {}", what()))? as usize;
    let expected = dims.iter().try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
    if expected != Some(n_bytes) {
        return Err(model_error(
            r.file,
            format!(
                "{}: {n_bytes} data bytes (size at byte {size_at}) do not match shape {dims:?} of {dtype:?}",
                what()
            ),
        ));
    }
    Ok(VarHead { name, dims, dtype, offset, n_bytes })
}

/// The alias count.
pub(crate) fn read_alias_count(r: &mut Reader) -> Result<u32> {
    r.u32(&|| "the alias count".into())
}

/// Alias `i`: (alias, target, byte offset of the record).
pub(crate) fn read_alias(r: &mut Reader, i: u32) -> Result<(String, String, usize)> {
    let offset = r.at();
    let alias = r.string(&|| format!("alias {i}"))?;
    let target = r.string(&|| format!("the target of alias {alias}"))?;
    Ok((alias, target, offset))
}

/// The error for bytes after the last alias: `extra` of them from byte `at`.
pub(crate) fn trailing(file: &str, extra: usize, at: usize) -> crate::error::Error {
    model_error(file, format!("{extra} unexpected bytes after the last alias, from byte {at}"))
}

/// Parses a `model.bin` (any spec); `file` names it in errors. Fails on anything but binary
/// version 6, on unknown dtype codes, on sizes that disagree with shapes and on truncated or
/// over-long files.
pub fn parse_model_bin<'a>(bytes: &'a [u8], file: &'a str) -> Result<Ct2File<'a>> {
    let mut r = Reader::new(bytes, 0, file);
    let (spec_name, spec_revision, count) = read_head(&mut r)?;
    let mut variables = Vec::new();
    for i in 0..count {
        let head = read_var_head(&mut r, i)?;
        let data = r.take(head.n_bytes, &|| head.data_what())?;
        let VarHead { name, dims, dtype, offset, .. } = head;
        variables.push(Ct2Variable { name, dims, dtype, offset, data: FileData::Borrowed(data) });
    }
    let count = read_alias_count(&mut r)?;
    let mut aliases = Vec::new();
    for i in 0..count {
        aliases.push(read_alias(&mut r, i)?);
    }
    if r.pos != bytes.len() {
        return Err(trailing(file, bytes.len() - r.pos, r.pos));
    }
    Ok(Ct2File { spec_name, spec_revision, variables, aliases })
}

/// How a CTranslate2 weight becomes canonical tensors: whole, or split by rows into parts
/// (`None` for a part that is dropped: the key bias).
enum Target {
    One(String),
    Split(Vec<Option<String>>),
}

/// CTranslate2 name -> canonical name, for the tensors outside the layers.
const GLOBALS: [(&str, &str); 12] = [
    ("encoder/conv1/weight", "model.encoder.conv1.weight"),
    ("encoder/conv1/bias", "model.encoder.conv1.bias"),
    ("encoder/conv2/weight", "model.encoder.conv2.weight"),
    ("encoder/conv2/bias", "model.encoder.conv2.bias"),
    ("encoder/position_encodings/encodings", "model.encoder.embed_positions.weight"),
    ("encoder/layer_norm/gamma", "model.encoder.layer_norm.weight"),
    ("encoder/layer_norm/beta", "model.encoder.layer_norm.bias"),
    ("decoder/embeddings/weight", "model.decoder.embed_tokens.weight"),
    ("decoder/projection/weight", "proj_out.weight"),
    ("decoder/position_encodings/encodings", "model.decoder.embed_positions.weight"),
    ("decoder/layer_norm/gamma", "model.decoder.layer_norm.weight"),
    ("decoder/layer_norm/beta", "model.decoder.layer_norm.bias"),
];

/// CTranslate2 name inside a layer -> canonical suffixes of its row blocks, for both stacks.
const LAYER: [(&str, &[Option<&str>]); 12] = [
    ("self_attention/layer_norm/gamma", &[Some("self_attn_layer_norm.weight")]),
    ("self_attention/layer_norm/beta", &[Some("self_attn_layer_norm.bias")]),
    (
        "self_attention/linear_0/weight",
        &[Some("self_attn.q_proj.weight"), Some("self_attn.k_proj.weight"), Some("self_attn.v_proj.weight")],
    ),
    ("self_attention/linear_0/bias", &[Some("self_attn.q_proj.bias"), None, Some("self_attn.v_proj.bias")]),
    ("self_attention/linear_1/weight", &[Some("self_attn.out_proj.weight")]),
    ("self_attention/linear_1/bias", &[Some("self_attn.out_proj.bias")]),
    ("ffn/layer_norm/gamma", &[Some("final_layer_norm.weight")]),
    ("ffn/layer_norm/beta", &[Some("final_layer_norm.bias")]),
    ("ffn/linear_0/weight", &[Some("fc1.weight")]),
    ("ffn/linear_0/bias", &[Some("fc1.bias")]),
    ("ffn/linear_1/weight", &[Some("fc2.weight")]),
    ("ffn/linear_1/bias", &[Some("fc2.bias")]),
];

/// The decoder's cross-attention, in decoder layers only.
const CROSS: [(&str, &[Option<&str>]); 8] = [
    ("attention/layer_norm/gamma", &[Some("encoder_attn_layer_norm.weight")]),
    ("attention/layer_norm/beta", &[Some("encoder_attn_layer_norm.bias")]),
    ("attention/linear_0/weight", &[Some("encoder_attn.q_proj.weight")]),
    ("attention/linear_0/bias", &[Some("encoder_attn.q_proj.bias")]),
    ("attention/linear_1/weight", &[Some("encoder_attn.k_proj.weight"), Some("encoder_attn.v_proj.weight")]),
    ("attention/linear_1/bias", &[None, Some("encoder_attn.v_proj.bias")]),
    ("attention/linear_2/weight", &[Some("encoder_attn.out_proj.weight")]),
    ("attention/linear_2/bias", &[Some("encoder_attn.out_proj.bias")]),
];

/// The table of layer entries of a stack.
fn layer_table(stack: &str) -> impl Iterator<Item = &'static (&'static str, &'static [Option<&'static str>])> {
    let cross: &[_] = if stack == "decoder" { &CROSS } else { &[] };
    LAYER.iter().chain(cross)
}

/// Maps a CTranslate2 weight name to its canonical tensors; `None` for unknown names.
fn target(name: &str) -> Option<Target> {
    if let Some((_, canonical)) = GLOBALS.iter().find(|(ct2, _)| *ct2 == name) {
        return Some(Target::One(canonical.to_string()));
    }
    let (stack, rest) = name.split_once('/')?;
    let (layer, rest) = rest.split_once('/')?;
    let index = parse_index(layer.strip_prefix("layer_")?)?;
    let prefix = match stack {
        "encoder" => "model.encoder.layers",
        "decoder" => "model.decoder.layers",
        _ => return None,
    };
    let (_, suffixes) = layer_table(stack).find(|(ct2, _)| *ct2 == rest)?;
    let names: Vec<Option<String>> = suffixes.iter().map(|s| s.map(|s| format!("{prefix}.{index}.{s}"))).collect();
    match names.as_slice() {
        [Some(one)] => Some(Target::One(one.clone())),
        _ => Some(Target::Split(names)),
    }
}

/// The CTranslate2 variable that holds canonical tensor `canonical`, for "missing" messages.
fn source_name(canonical: &str) -> Option<String> {
    if let Some((ct2, _)) = GLOBALS.iter().find(|(_, c)| *c == canonical) {
        return Some(format!("variable {ct2}"));
    }
    let (stack, rest) = canonical.strip_prefix("model.")?.split_once(".layers.")?;
    let (index, suffix) = rest.split_once('.')?;
    let (ct2, parts) = layer_table(stack).find(|(_, parts)| parts.contains(&Some(suffix)))?;
    let which = if parts.len() > 1 { " (split by rows)" } else { "" };
    Some(format!("variable {stack}/layer_{index}/{ct2}{which}"))
}

/// The settings a CTranslate2 `config.json` carries.
#[derive(Deserialize)]
struct Ct2Json {
    #[serde(default)]
    alignment_heads: Vec<(usize, usize)>,
    #[serde(default)]
    lang_ids: Vec<u32>,
    #[serde(default)]
    suppress_ids: Vec<u32>,
    #[serde(default)]
    suppress_ids_begin: Vec<u32>,
    layer_norm_epsilon: Option<f32>,
}

/// Loads a CTranslate2 Whisper model from the bytes of its `model.bin` and `config.json`
/// (the browser's path; [`load_ct2_dir`] reads a folder).
pub fn load_ct2(model_bin: &[u8], config_json: &[u8]) -> Result<WhisperWeights> {
    load_named(model_bin, "model.bin", config_json, "config.json")
}

/// Loads `model.bin` and `config.json` from a faster-whisper / CTranslate2 model folder.
pub fn load_ct2_dir(dir: &Path) -> Result<WhisperWeights> {
    let model = dir.join("model.bin");
    let config = dir.join("config.json");
    let (model_name, config_name) = (model.display().to_string(), config.display().to_string());
    let config_bytes = crate::files::read_small(&config, &config_name)?;
    load_named(&FileBytes::open(&model, &model_name)?, &model_name, &config_bytes, &config_name)
}

fn load_named(model_bin: &[u8], model_file: &str, config_json: &[u8], config_file: &str) -> Result<WhisperWeights> {
    let json: Ct2Json =
        serde_json::from_slice(config_json).map_err(|e| model_error(config_file, format!("bad JSON: {e}")))?;
    load_parsed(parse_model_bin(model_bin, model_file)?, model_file, json, config_file)
}

/// Loads a CTranslate2 Whisper model from its parsed `model.bin` (here [`crate::load::ct2_stream`]'s,
/// whose variables own their data: each weight's moves into its tensor) and `config.json`.
pub fn load_ct2_parsed(parsed: Ct2File, model_file: &str, config_json: &[u8]) -> Result<WhisperWeights> {
    let json: Ct2Json =
        serde_json::from_slice(config_json).map_err(|e| model_error("config.json", format!("bad JSON: {e}")))?;
    load_parsed(parsed, model_file, json, "config.json")
}

fn load_parsed(parsed: Ct2File, model_file: &str, json: Ct2Json, config_file: &str) -> Result<WhisperWeights> {
    if parsed.spec_name != WHISPER_SPEC {
        return Err(model_error(model_file, format!("spec {:?} at byte 4 is not {WHISPER_SPEC}", parsed.spec_name)));
    }
    if parsed.spec_revision != WHISPER_SPEC_REVISION {
        return Err(model_error(
            model_file,
            format!("{WHISPER_SPEC} revision {} is not supported (only {WHISPER_SPEC_REVISION})", parsed.spec_revision),
        ));
    }
    let mut parts = Parts::new(model_file, source_name);
    let mut settings: BTreeMap<String, Ct2Variable> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    // int8 models (CTranslate2's `int8`, `int8_float16`, ...): each int8 weight has its
    // scales beside it as `<weight>_scale` (one float per row: copied, they are small), the
    // last record of that name, by its position.
    let mut scales: BTreeMap<String, (usize, Ct2Variable)> = BTreeMap::new();
    for (at, var) in parsed.variables.iter().enumerate() {
        if let Some(weight) = var.name.strip_suffix("_scale").filter(|w| w.ends_with("/weight")) {
            if !parsed.variables.iter().any(|v| v.name == weight && v.dtype == Ct2DType::I8) {
                return Err(model_error(model_file, format!("{} scales no int8 {weight}", var.describe())));
            }
            scales.insert(weight.to_string(), (at, var.clone()));
        }
    }
    // By value, so that each weight's data moves into its tensor and is gone from here.
    for (at, var) in parsed.variables.into_iter().enumerate() {
        if !seen.insert(var.name.clone()) {
            return Err(model_error(model_file, format!("{} repeats an earlier variable", var.describe())));
        }
        if var.name.strip_suffix("_scale").and_then(|w| scales.get(w)).is_some_and(|(first, _)| *first == at) {
            continue;
        }
        let quantized = var.dtype == Ct2DType::I8 && !var.dims.is_empty();
        if var.dims.is_empty() || !(var.dtype.is_float() || quantized) {
            if !var.dtype.is_float() && var.name.ends_with("/weight") {
                return Err(model_error(
                    model_file,
                    format!(
                        "{} is {:?}: this quantization is not supported (int8 and int8_float16 are)",
                        var.describe(),
                        var.dtype
                    ),
                ));
            }
            settings.insert(var.name.clone(), var);
            continue;
        }
        let target = target(&var.name)
            .ok_or_else(|| model_error(model_file, format!("unexpected {} for a Whisper model", var.describe())))?;
        let (describe, dims) = (var.describe(), var.dims.clone());
        let tensor = if quantized {
            let (_, scale) = scales.get(var.name.as_str()).ok_or_else(|| {
                model_error(model_file, format!("{} is int8 but the file has no {}_scale", var.describe(), var.name))
            })?;
            var.to_q8(scale, model_file)?
        } else {
            var.into_tensor(model_file)?
        };
        match target {
            Target::One(name) => parts.insert(name, tensor, describe)?,
            Target::Split(names) => {
                let blocks = split_rows(&tensor, names.len()).ok_or_else(|| {
                    model_error(
                        model_file,
                        format!("{} with shape {:?} cannot be split into {} row blocks", describe, dims, names.len()),
                    )
                })?;
                let rows = blocks.first().map_or(0, |b| b.shape().dims()[0]);
                for (k, (name, block)) in names.into_iter().zip(blocks).enumerate() {
                    if let Some(name) = name {
                        let origin = format!("rows {}..{} of {describe}", k * rows, (k + 1) * rows);
                        parts.insert(name, block, origin)?;
                    }
                }
            }
        }
    }
    for (alias, aliased, offset) in &parsed.aliases {
        let origin = format!("alias {alias} at byte {offset}");
        match (target(alias), target(aliased)) {
            (Some(Target::One(a)), Some(Target::One(t))) => parts.alias(a, t, &origin)?,
            _ => return Err(model_error(model_file, format!("unexpected {origin} -> {aliased}"))),
        }
    }

    let setting = |name: &str| -> Result<Option<i64>> {
        let Some(var) = settings.get(name) else { return Ok(None) };
        match var.ints().as_deref() {
            Some([v]) => Ok(Some(*v)),
            _ => Err(model_error(model_file, format!("{} should be one integer", var.describe()))),
        }
    };
    let heads = |name: &str| -> Result<usize> {
        let value = setting(name)?.ok_or_else(|| model_error(model_file, format!("missing variable {name}")))?;
        usize::try_from(value).map_err(|_| model_error(model_file, format!("{name} is {value}")))
    };
    // The settings that change the math: the first four are in every CTranslate2 Whisper
    // file and must be there; the rest may be absent and then mean what Whisper needs.
    for (name, want, required, meaning) in [
        ("decoder/activation", ACTIVATION_GELU, true, "GELU"),
        ("decoder/pre_norm", 1, true, "pre-norm layers"),
        ("decoder/scale_embeddings", 0, true, "unscaled embeddings"),
        ("encoder/activation", ACTIVATION_GELU, false, "GELU"),
        ("decoder/alibi", 0, false, "learned positions, no ALiBi"),
        ("decoder/start_from_zero_embedding", 0, false, "no zero start embedding"),
    ] {
        match setting(name)? {
            None if required => return Err(model_error(model_file, format!("missing variable {name}"))),
            Some(value) if value != want => {
                return Err(model_error(model_file, format!("{name} is {value}: Whisper needs {want} ({meaning})")));
            }
            _ => {}
        }
    }
    let generation = GenerationConfig {
        suppress_ids: json.suppress_ids,
        suppress_ids_begin: json.suppress_ids_begin,
        lang_ids: json.lang_ids,
        alignment_heads: json.alignment_heads,
    };
    let eps = json.layer_norm_epsilon.unwrap_or(LAYER_NORM_EPS);
    let config = parts.derive_config(heads("encoder/num_heads")?, heads("decoder/num_heads")?, eps, generation)?;
    config.validate_generation(config_file)?;
    parts.finish(config)
}

/// A minimal `model.bin` writer for tests: hand-written CTranslate2 names (independent of the
/// reader's tables), fused Q|K|V and K|V with a zero key bias, settings as CTranslate2 stores
/// them (i16 heads, i8 flags) and the projection alias.
#[cfg(test)]
pub(crate) mod writer {
    use super::*;
    use crate::load::names::{EMBED_TOKENS, PROJ_OUT, decoder_layer, encoder_layer};

    /// A variable to write: name, dims, dtype code, raw data.
    pub type Var = (String, Vec<usize>, u8, Vec<u8>);

    /// The raw data of a tensor in its own dtype.
    fn float_var(name: &str, t: &Tensor) -> Var {
        let code = if t.dtype() == DType::F16 { Ct2DType::F16 } else { Ct2DType::F32 };
        (name.to_string(), t.shape().dims().to_vec(), code.code(), t.to_bytes())
    }

    fn concat_rows(parts: &[Tensor]) -> Tensor {
        let rows: usize = parts.iter().map(|t| t.shape().dims()[0]).sum();
        let mut dims = parts[0].shape().dims().to_vec();
        dims[0] = rows;
        let bytes: Vec<u8> = parts.iter().flat_map(|t| t.to_bytes()).collect();
        Tensor::from_bytes(&TensorType::new(parts[0].dtype(), dims), &bytes).unwrap()
    }

    /// The variables of `w` in CTranslate2's naming (without the settings).
    pub fn variables(w: &WhisperWeights) -> Vec<Var> {
        let get = |n: &str| w.get(n).unwrap().clone();
        let zeros = |like: &Tensor| Tensor::zeros(&like.ty());
        let mut vars = Vec::new();
        let mut push = |name: String, t: Tensor| vars.push(float_var(&name, &t));
        let norm = |push: &mut dyn FnMut(String, Tensor), ct2: String, canonical: String| {
            push(format!("{ct2}/gamma"), get(&format!("{canonical}.weight")));
            push(format!("{ct2}/beta"), get(&format!("{canonical}.bias")));
        };
        let linear = |push: &mut dyn FnMut(String, Tensor), ct2: String, canonical: String| {
            push(format!("{ct2}/weight"), get(&format!("{canonical}.weight")));
            push(format!("{ct2}/bias"), get(&format!("{canonical}.bias")));
        };
        push("encoder/conv1/weight".into(), get("model.encoder.conv1.weight"));
        push("encoder/conv1/bias".into(), get("model.encoder.conv1.bias"));
        push("encoder/conv2/weight".into(), get("model.encoder.conv2.weight"));
        push("encoder/conv2/bias".into(), get("model.encoder.conv2.bias"));
        push("encoder/position_encodings/encodings".into(), get("model.encoder.embed_positions.weight"));
        let c = w.config();
        let stacks = [("encoder", c.encoder_layers), ("decoder", c.decoder_layers)];
        for (stack, layers) in stacks {
            for i in 0..layers {
                let ct2 = |s: &str| format!("{stack}/layer_{i}/{s}");
                let hf = |s: &str| if stack == "encoder" { encoder_layer(i, s) } else { decoder_layer(i, s) };
                norm(&mut push, ct2("self_attention/layer_norm"), hf("self_attn_layer_norm"));
                let (q, k, v) = (
                    get(&hf("self_attn.q_proj.weight")),
                    get(&hf("self_attn.k_proj.weight")),
                    get(&hf("self_attn.v_proj.weight")),
                );
                push(ct2("self_attention/linear_0/weight"), concat_rows(&[q, k, v]));
                let (qb, vb) = (get(&hf("self_attn.q_proj.bias")), get(&hf("self_attn.v_proj.bias")));
                push(ct2("self_attention/linear_0/bias"), concat_rows(&[qb.clone(), zeros(&qb), vb]));
                linear(&mut push, ct2("self_attention/linear_1"), hf("self_attn.out_proj"));
                if stack == "decoder" {
                    norm(&mut push, ct2("attention/layer_norm"), hf("encoder_attn_layer_norm"));
                    linear(&mut push, ct2("attention/linear_0"), hf("encoder_attn.q_proj"));
                    let (k, v) = (get(&hf("encoder_attn.k_proj.weight")), get(&hf("encoder_attn.v_proj.weight")));
                    push(ct2("attention/linear_1/weight"), concat_rows(&[k, v]));
                    let vb = get(&hf("encoder_attn.v_proj.bias"));
                    push(ct2("attention/linear_1/bias"), concat_rows(&[zeros(&vb), vb]));
                    linear(&mut push, ct2("attention/linear_2"), hf("encoder_attn.out_proj"));
                }
                norm(&mut push, ct2("ffn/layer_norm"), hf("final_layer_norm"));
                linear(&mut push, ct2("ffn/linear_0"), hf("fc1"));
                linear(&mut push, ct2("ffn/linear_1"), hf("fc2"));
            }
            if stack == "encoder" {
                norm(&mut push, "encoder/layer_norm".into(), "model.encoder.layer_norm".into());
            } else {
                norm(&mut push, "decoder/layer_norm".into(), "model.decoder.layer_norm".into());
            }
            if stack == "encoder" {
                push("decoder/embeddings/weight".into(), get(EMBED_TOKENS));
                push("decoder/position_encodings/encodings".into(), get("model.decoder.embed_positions.weight"));
            }
        }
        assert_eq!(w.aliases().get(PROJ_OUT).map(String::as_str), Some(EMBED_TOKENS));
        vars
    }

    /// The settings CTranslate2 writes for Whisper: (name, dtype code, little-endian value).
    pub fn settings(w: &WhisperWeights) -> Vec<Var> {
        let c = w.config();
        let i16_var = |name: &str, v: i16| (name.to_string(), vec![], Ct2DType::I16.code(), v.to_le_bytes().to_vec());
        let i8_var = |name: &str, v: i8| (name.to_string(), vec![], Ct2DType::I8.code(), v.to_le_bytes().to_vec());
        vec![
            i8_var("decoder/activation", 3),
            i8_var("decoder/pre_norm", 1),
            i8_var("decoder/scale_embeddings", 0),
            i16_var("decoder/alignment_layer", -1),
            i16_var("decoder/num_heads", c.decoder_heads as i16),
            i16_var("encoder/num_heads", c.encoder_heads as i16),
        ]
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend(((s.len() + 1) as u16).to_le_bytes());
        out.extend(s.as_bytes());
        out.push(0);
    }

    /// Serializes variables and the projection alias into a version-6 `model.bin`.
    pub fn write(vars: &[Var]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(6u32.to_le_bytes());
        string(&mut out, "WhisperSpec");
        out.extend(3u32.to_le_bytes());
        out.extend((vars.len() as u32).to_le_bytes());
        for (name, dims, code, data) in vars {
            string(&mut out, name);
            out.push(dims.len() as u8);
            for &d in dims {
                out.extend((d as u32).to_le_bytes());
            }
            out.push(*code);
            out.extend((data.len() as u32).to_le_bytes());
            out.extend(data);
        }
        out.extend(1u32.to_le_bytes());
        string(&mut out, "decoder/projection/weight");
        string(&mut out, "decoder/embeddings/weight");
        out
    }

    /// A whole `model.bin` for `w`.
    pub fn model_bin(w: &WhisperWeights) -> Vec<u8> {
        let mut vars = settings(w);
        vars.extend(variables(w));
        write(&vars)
    }

    /// The `config.json` CTranslate2 writes for `w`.
    pub fn config_json(w: &WhisperWeights) -> Vec<u8> {
        let g = &w.config().generation;
        serde_json::json!({
            "alignment_heads": g.alignment_heads,
            "lang_ids": g.lang_ids,
            "suppress_ids": g.suppress_ids,
            "suppress_ids_begin": g.suppress_ids_begin,
        })
        .to_string()
        .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::writer::{Var, config_json, model_bin, settings, variables, write};
    use super::*;
    use crate::load::names::{EMBED_TOKENS, PROJ_OUT};
    use crate::load::weights::testing::{multilingual_config, small_config, tiny_en_dir};

    fn small(dtype: DType) -> WhisperWeights {
        crate::load::weights::testing::random(small_config(), dtype, 7)
    }

    fn err(model: &[u8], config: &[u8]) -> String {
        load_ct2(model, config).unwrap_err().to_string()
    }

    #[test]
    fn tiny_en_loads_with_its_dimensions() {
        let w = load_ct2_dir(&tiny_en_dir()).unwrap();
        let c = w.config();
        assert_eq!((c.d_model, c.encoder_layers, c.decoder_layers), (384, 4, 4));
        assert_eq!((c.encoder_heads, c.decoder_heads, c.encoder_ffn, c.decoder_ffn), (6, 6, 1536, 1536));
        assert_eq!((c.n_vocab, c.n_mels, c.n_audio_ctx, c.n_text_ctx), (51864, 80, 1500, 448));
        assert!(!c.is_multilingual());
        assert_eq!(c.generation.suppress_ids.len(), 90);
        assert_eq!(c.generation.suppress_ids_begin, vec![220, 50256]);
        assert_eq!(c.generation.alignment_heads.len(), 8);
        assert_eq!(w.tensors().len(), crate::load::weights::layout(c).len());
        for (name, dims) in [
            ("model.encoder.conv1.weight", vec![384, 80, 3]),
            ("model.encoder.layers.3.self_attn.k_proj.weight", vec![384, 384]),
            ("model.decoder.layers.0.encoder_attn.v_proj.bias", vec![384]),
            (PROJ_OUT, vec![51864, 384]),
        ] {
            let t = w.get(name).unwrap();
            assert_eq!(t.shape().dims(), dims.as_slice(), "{name}");
            assert_eq!(t.dtype(), DType::F16, "{name}");
            assert!(t.to_f32().iter().all(|v| v.is_finite()), "{name}");
        }
        // Layer norms are near 1, sinusoidal encoder positions lie in [-1, 1] and start sin 0, cos 1.
        let gamma = w.get("model.encoder.layer_norm.weight").unwrap().to_f32();
        assert!(gamma.iter().sum::<f32>() / 384.0 > 0.3);
        let pos = w.get("model.encoder.embed_positions.weight").unwrap().to_f32();
        assert!(pos.iter().all(|v| v.abs() <= 1.0));
        assert_eq!((pos[0], pos[383]), (0.0, 1.0));
    }

    #[test]
    fn tiny_en_stores_zero_key_biases() {
        let bytes = std::fs::read(tiny_en_dir().join("model.bin")).unwrap();
        let parsed = parse_model_bin(&bytes, "model.bin").unwrap();
        assert_eq!((parsed.spec_name.as_str(), parsed.spec_revision), ("WhisperSpec", 3));
        let fused: Vec<_> = parsed
            .variables
            .iter()
            .filter(|v| v.name.ends_with("linear_0/bias") && v.name.contains("self_attention"))
            .collect();
        assert_eq!(fused.len(), 8);
        for v in fused {
            let key = &v.data.bytes()[384 * 2..768 * 2];
            assert!(key.iter().all(|&b| b == 0), "{}", v.name);
        }
    }

    #[test]
    fn written_models_load_back_equal() {
        for w in [
            small(DType::F16),
            small(DType::F32),
            crate::load::weights::testing::random(multilingual_config(), DType::F16, 3),
        ] {
            let back = load_ct2(&model_bin(&w), &config_json(&w)).unwrap();
            assert_eq!(back, w);
        }
    }

    #[test]
    fn fused_rows_split_in_q_k_v_order() {
        let w = small(DType::F32);
        let mut vars = settings(&w);
        for (name, dims, code, mut data) in variables(&w) {
            if name == "decoder/layer_1/self_attention/linear_0/weight" {
                let values: Vec<f32> = (0..24 * 8).map(|i| (i / 8) as f32).collect();
                data = bytemuck::cast_slice(&values).to_vec();
            }
            vars.push((name, dims, code, data));
        }
        let back = load_ct2(&write(&vars), b"{}").unwrap();
        for (proj, first_row) in [("q_proj", 0.0), ("k_proj", 8.0), ("v_proj", 16.0)] {
            let t = back.get(&format!("model.decoder.layers.1.self_attn.{proj}.weight")).unwrap().to_f32();
            assert_eq!((t[0], t[63]), (first_row, first_row + 7.0), "{proj}");
        }
    }

    #[test]
    fn bf16_widens_to_f32() {
        let w = small(DType::F32);
        let mut vars = settings(&w);
        for (name, dims, code, data) in variables(&w) {
            if name == "encoder/conv1/bias" {
                let values = [1.5f32, -2.0, 0.0, 3.0, 1.0, 2.0, 4.0, -8.0];
                let bytes = values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect();
                vars.push((name, dims, Ct2DType::BF16.code(), bytes));
            } else {
                vars.push((name, dims, code, data));
            }
        }
        let back = load_ct2(&write(&vars), b"{}").unwrap();
        assert_eq!(
            back.get("model.encoder.conv1.bias").unwrap().as_f32().unwrap(),
            &[1.5, -2.0, 0.0, 3.0, 1.0, 2.0, 4.0, -8.0]
        );
    }

    /// Rebuilds the file with `edit` applied to the variable list.
    fn edited(edit: impl FnOnce(&mut Vec<Var>)) -> Vec<u8> {
        let w = small(DType::F16);
        let mut vars = settings(&w);
        vars.extend(variables(&w));
        edit(&mut vars);
        write(&vars)
    }

    #[test]
    fn int8_weights_load_as_q8_with_reciprocal_scales() {
        // fc1 of decoder layer 1 is [12, 8]: int8 rows with CTranslate2 scales (value = q / scale).
        let fc1 = "decoder/layer_1/ffn/linear_0/weight";
        let values: Vec<i8> = (0..96).map(|i| (i * 37 % 255 - 127) as i8).collect();
        let scales: Vec<f32> = (0..12).map(|r| 100.0 + r as f32).collect();
        let with_scales = |scales: &[f32]| {
            let scales = scales.to_vec();
            let values = values.clone();
            edited(move |v| {
                let w = v.iter_mut().find(|(n, ..)| n == fc1).unwrap();
                w.2 = Ct2DType::I8.code();
                w.3 = bytemuck::cast_slice(&values).to_vec();
                let dims = vec![scales.len()];
                v.push((format!("{fc1}_scale"), dims, Ct2DType::F32.code(), bytemuck::cast_slice(&scales).to_vec()));
            })
        };
        let w = load_ct2(&with_scales(&scales), b"{}").unwrap();
        let t = w.get("model.decoder.layers.1.fc1.weight").unwrap();
        assert_eq!(t.dtype(), DType::Q8);
        let got = t.to_f32();
        for (i, &q) in values.iter().enumerate() {
            assert_eq!(got[i], f32::from(q) * (1.0 / scales[i / 8]), "value {i}");
        }
        let short = err(&with_scales(&scales[..11]), b"{}");
        assert!(short.starts_with(&format!("model.bin: variable {fc1}_scale at byte ")), "{short}");
        assert!(short.contains(" (F32 [11]) is not one float scale per row of variable "), "{short}");
        assert!(short.ends_with(" (12 rows)"), "{short}");
        let mut zero = scales.clone();
        zero[3] = 0.0;
        assert!(err(&with_scales(&zero), b"{}").ends_with("scale 0 of row 3 is not a positive number"));
        let orphan = edited(|v| v.push((format!("{fc1}_scale"), vec![12], Ct2DType::F32.code(), vec![0; 48])));
        assert!(err(&orphan, b"{}").ends_with(&format!("scales no int8 {fc1}")), "{}", err(&orphan, b"{}"));
    }

    #[test]
    fn errors_name_file_variable_and_offset() {
        let good = model_bin(&small(DType::F16));
        let mut bad_version = good.clone();
        bad_version[0] = 5;
        assert_eq!(err(&bad_version, b"{}"), "model.bin: binary version 5 at byte 0 is not supported (only 6)");
        assert_eq!(
            err(&good[..20], b"{}"),
            "model.bin: the spec revision at byte 18 needs 4 bytes but the file ends at byte 20 (truncated?)"
        );
        // The first variable is decoder/activation at byte 26: name (2 + 19 bytes), rank 0, dtype at 48.
        let mut bad_code = good.clone();
        bad_code[48] = 9;
        assert_eq!(
            err(&bad_code, b"{}"),
            "model.bin: variable decoder/activation (at byte 26): unknown dtype code 9 at byte 48"
        );
        let mut bad_size = good.clone();
        bad_size[49] = 2;
        assert_eq!(
            err(&bad_size, b"{}"),
            "model.bin: variable decoder/activation (at byte 26): 2 data bytes (size at byte 49) do not match shape [] of I8"
        );
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(
            err(&trailing, b"{}"),
            format!("model.bin: 1 unexpected bytes after the last alias, from byte {}", good.len())
        );
        assert_eq!(
            err(&good, b"{\"lang_ids\": 3}"),
            "config.json: bad JSON: invalid type: integer `3`, expected a sequence at line 1 column 14"
        );
    }

    #[test]
    fn missing_unexpected_and_mismatched_tensors_are_named() {
        let missing = edited(|v| v.retain(|(n, ..)| n != "decoder/layer_1/ffn/linear_1/bias"));
        assert_eq!(
            err(&missing, b"{}"),
            "model.bin: missing variable decoder/layer_1/ffn/linear_1/bias (for tensor model.decoder.layers.1.fc2.bias)"
        );
        let no_heads = edited(|v| v.retain(|(n, ..)| n != "encoder/num_heads"));
        assert_eq!(err(&no_heads, b"{}"), "model.bin: missing variable encoder/num_heads");
        let extra = edited(|v| v.push(("encoder/layer_0/extra/weight".into(), vec![1], 0, vec![0; 4])));
        let at = extra.len() - (2 + 29 + 1 + 4 + 1 + 4 + 4) - (4 + 2 * 2 + 26 + 26);
        assert_eq!(
            err(&extra, b"{}"),
            format!("model.bin: unexpected variable encoder/layer_0/extra/weight at byte {at} for a Whisper model")
        );
        let shape = edited(|v| {
            let fc1 = v.iter_mut().find(|(n, ..)| n == "decoder/layer_1/ffn/linear_0/bias").unwrap();
            fc1.1 = vec![6];
            fc1.3.truncate(12);
        });
        let msg = err(&shape, b"{}");
        assert!(msg.starts_with("model.bin: variable decoder/layer_1/ffn/linear_0/bias at byte "), "{msg}");
        assert!(msg.ends_with(" has shape [6], the model's config needs [12]"), "{msg}");
        let odd = edited(|v| {
            let qkv = v.iter_mut().find(|(n, ..)| n == "encoder/layer_0/self_attention/linear_0/bias").unwrap();
            qkv.1 = vec![23];
            qkv.3.truncate(46);
        });
        assert!(err(&odd, b"{}").ends_with("with shape [23] cannot be split into 3 row blocks"));
        let relu = edited(|v| v[0].3 = vec![0]);
        assert_eq!(err(&relu, b"{}"), "model.bin: decoder/activation is 0: Whisper needs 3 (GELU)");
        let fc1 = "decoder/layer_1/ffn/linear_0/weight";
        let unscaled = edited(|v| {
            let w = v.iter_mut().find(|(n, ..)| n == fc1).unwrap();
            w.2 = Ct2DType::I8.code();
            w.3.truncate(96);
        });
        assert!(err(&unscaled, b"{}").ends_with(&format!("is int8 but the file has no {fc1}_scale")));
        let int16 = edited(|v| v.iter_mut().find(|(n, ..)| n == fc1).unwrap().2 = Ct2DType::I16.code());
        assert!(err(&int16, b"{}").ends_with("is I16: this quantization is not supported (int8 and int8_float16 are)"));
        let heads = edited(|v| v[4].3 = 3i16.to_le_bytes().to_vec());
        assert_eq!(err(&heads, b"{}"), "model.bin: decoder heads 3 do not divide d_model 8");
        let dup = edited(|v| {
            let again = v[5].clone();
            v.push(again);
        });
        assert!(err(&dup, b"{}").ends_with("repeats an earlier variable"));
        let gap = edited(|v| {
            for var in v.iter_mut() {
                var.0 = var.0.replace("decoder/layer_1/", "decoder/layer_2/");
            }
        });
        assert_eq!(
            err(&gap, b"{}"),
            "model.bin: layer model.decoder.layers.1 is missing (found 2 layers up to model.decoder.layers.2)"
        );
        assert_eq!(
            err(&model_bin(&small(DType::F16)), b"{\"suppress_ids\": [20]}"),
            "config.json: token id 20 is outside the vocabulary of 20"
        );
        assert_eq!(
            load_ct2(&model_bin(&small(DType::F16)), b"{}").unwrap().get(PROJ_OUT).unwrap(),
            small(DType::F16).get(EMBED_TOKENS).unwrap()
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        let w = small(DType::F16);
        let (bytes, config) = (model_bin(&w), config_json(&w));
        assert!(load_ct2(&bytes, &config).is_ok());
        for len in 0..bytes.len() {
            assert!(load_ct2(&bytes[..len], &config).is_err(), "prefix of {len} bytes loaded");
        }
    }

    /// Byte ranges of the header fields (everything but tensor data and setting values).
    fn header_ranges(vars: &[Var]) -> Vec<std::ops::Range<usize>> {
        let mut pos = 4 + 2 + 12 + 4 + 4;
        let mut ranges = Vec::new();
        ranges.push(0..pos);
        for (name, dims, _, data) in vars {
            let header = 2 + name.len() + 1 + 1 + 4 * dims.len() + 1 + 4;
            ranges.push(pos..pos + header);
            pos += header + data.len();
        }
        ranges.push(pos..pos + 4 + 2 * (2 + 26));
        ranges
    }

    #[test]
    fn header_bit_flips_are_errors() {
        let w = small(DType::F16);
        let mut vars = settings(&w);
        vars.extend(variables(&w));
        let bytes = write(&vars);
        let config = config_json(&w);
        let ranges = header_ranges(&vars);
        assert_eq!(ranges.last().unwrap().end, bytes.len());
        // The name of the unused alignment layer may change into any other unused name.
        let unused = ranges[4].start + 2..ranges[4].start + 2 + "decoder/alignment_layer".len();
        assert_eq!(&bytes[unused.clone()], b"decoder/alignment_layer");
        // A dtype code flipped from f16 (4) to bf16 (5) gives another valid file.
        let dtype_codes: Vec<usize> = ranges[1..ranges.len() - 1].iter().map(|r| r.end - 5).collect();
        let mut flips = 0;
        for at in ranges.into_iter().flatten().filter(|at| !unused.contains(at)) {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[at] ^= 1 << bit;
                let f16_to_bf16 =
                    dtype_codes.contains(&at) && bytes[at] == Ct2DType::F16.code() && bad[at] == Ct2DType::BF16.code();
                assert_eq!(load_ct2(&bad, &config).is_ok(), f16_to_bf16, "flipping bit {bit} of byte {at}");
                flips += 1;
            }
        }
        assert!(flips > 8 * 2000, "{flips}");
        // Setting values: every flip of the heads, flags and activation is refused too; the
        // alignment layer (unused) may take any value.
        let mut pos = 26;
        for (name, dims, _, data) in &vars[..6] {
            pos += 2 + name.len() + 1 + 1 + 4 * dims.len() + 1 + 4;
            for bit in 0..8 * data.len() {
                let mut bad = bytes.clone();
                bad[pos + bit / 8] ^= 1 << (bit % 8);
                let loaded = load_ct2(&bad, &config);
                assert_eq!(loaded.is_ok(), name == "decoder/alignment_layer", "{name} bit {bit}");
            }
            pos += data.len();
        }
    }
}
