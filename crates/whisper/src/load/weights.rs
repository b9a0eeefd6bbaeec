//! The loaded Whisper model: its config and every weight under one canonical name.
//!
//! Both readers ([`super::ct2`], [`super::hf`]) end here, so the graph builders see one naming
//! whatever the file format. The canonical names are Hugging Face's
//! (`WhisperForConditionalGeneration`): `model.encoder.conv1.weight`,
//! `model.encoder.layers.{i}.self_attn.q_proj.weight`, `model.decoder.embed_tokens.weight`, ...
//! ([`layout`] lists them all). They were chosen because they keep Q, K and V apart and drop
//! the key bias, which Whisper does not have; CTranslate2's fused tensors are split on load.
//! The output projection `proj_out.weight` is tied to the token embedding: it is an alias
//! unless a file stores it as a tensor of its own.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result, model_error};
use crate::load::config::{GenerationConfig, WhisperConfig, parse_index};
use crate::load::names::{DECODER_LAYERS, EMBED_TOKENS, ENCODER_LAYERS, PROJ_OUT, decoder_layer, encoder_layer};
use std::collections::BTreeSet;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::tensor::{Tensor, TensorData};

/// A Whisper model: its dimensions and its weights (f16 or f32, as the file stored them).
#[derive(Clone, Debug, PartialEq)]
pub struct WhisperWeights {
    config: WhisperConfig,
    tensors: BTreeMap<String, Tensor>,
    aliases: BTreeMap<String, String>,
}

impl WhisperWeights {
    pub fn config(&self) -> &WhisperConfig {
        &self.config
    }

    /// The tensor called `name`, following aliases (`proj_out.weight` gives the embedding).
    pub fn get(&self, name: &str) -> Result<&Tensor> {
        let target = self.aliases.get(name).map_or(name, String::as_str);
        self.tensors.get(target).ok_or_else(|| Error::bad_argument(format!("the Whisper model has no tensor {name}")))
    }

    /// Every stored tensor by canonical name (aliases not included).
    pub fn tensors(&self) -> &BTreeMap<String, Tensor> {
        &self.tensors
    }

    /// Alias name -> the stored tensor it stands for.
    pub fn aliases(&self) -> &BTreeMap<String, String> {
        &self.aliases
    }

    /// A model of `config` whose every tensor (in [`layout`] order) is made by `make` from its
    /// type: what tests and benchmarks use for model sizes that exist nowhere as files (the
    /// test kit fills them with seeded random values).
    pub fn from_fn(config: WhisperConfig, dtype: DType, mut make: impl FnMut(&TensorType) -> Tensor) -> Result<Self> {
        config.validate("random model")?;
        let tensors =
            layout(&config).into_iter().map(|(name, dims)| (name, make(&TensorType::new(dtype, dims)))).collect();
        let aliases = BTreeMap::from([(PROJ_OUT.to_string(), EMBED_TOKENS.to_string())]);
        Ok(WhisperWeights { config, tensors, aliases })
    }
}

/// Every tensor a model of `config` holds, canonical name and shape, in model order
/// (`proj_out.weight` excluded: it is tied to the embedding unless a file says otherwise).
pub fn layout(config: &WhisperConfig) -> Vec<(String, Vec<usize>)> {
    let d = config.d_model;
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |name: String, dims: &[usize]| out.push((name, dims.to_vec()));
    let linear = |add: &mut dyn FnMut(String, &[usize]), name: String, rows: usize, cols: usize, bias: bool| {
        add(format!("{name}.weight"), &[rows, cols]);
        if bias {
            add(format!("{name}.bias"), &[rows]);
        }
    };
    let norm = |add: &mut dyn FnMut(String, &[usize]), name: String| {
        add(format!("{name}.weight"), &[d]);
        add(format!("{name}.bias"), &[d]);
    };
    let attention = |add: &mut dyn FnMut(String, &[usize]), prefix: String| {
        linear(add, format!("{prefix}.q_proj"), d, d, true);
        linear(add, format!("{prefix}.k_proj"), d, d, false);
        linear(add, format!("{prefix}.v_proj"), d, d, true);
        linear(add, format!("{prefix}.out_proj"), d, d, true);
    };

    add("model.encoder.conv1.weight".into(), &[d, config.n_mels, 3]);
    add("model.encoder.conv1.bias".into(), &[d]);
    add("model.encoder.conv2.weight".into(), &[d, d, 3]);
    add("model.encoder.conv2.bias".into(), &[d]);
    add("model.encoder.embed_positions.weight".into(), &[config.n_audio_ctx, d]);
    for i in 0..config.encoder_layers {
        attention(&mut add, encoder_layer(i, "self_attn"));
        norm(&mut add, encoder_layer(i, "self_attn_layer_norm"));
        linear(&mut add, encoder_layer(i, "fc1"), config.encoder_ffn, d, true);
        linear(&mut add, encoder_layer(i, "fc2"), d, config.encoder_ffn, true);
        norm(&mut add, encoder_layer(i, "final_layer_norm"));
    }
    norm(&mut add, "model.encoder.layer_norm".into());

    add(EMBED_TOKENS.into(), &[config.n_vocab, d]);
    add("model.decoder.embed_positions.weight".into(), &[config.n_text_ctx, d]);
    for i in 0..config.decoder_layers {
        attention(&mut add, decoder_layer(i, "self_attn"));
        norm(&mut add, decoder_layer(i, "self_attn_layer_norm"));
        attention(&mut add, decoder_layer(i, "encoder_attn"));
        norm(&mut add, decoder_layer(i, "encoder_attn_layer_norm"));
        linear(&mut add, decoder_layer(i, "fc1"), config.decoder_ffn, d, true);
        linear(&mut add, decoder_layer(i, "fc2"), d, config.decoder_ffn, true);
        norm(&mut add, decoder_layer(i, "final_layer_norm"));
    }
    norm(&mut add, "model.decoder.layer_norm".into());
    out
}

/// The bytes of a model's weights file, mapped rather than read where the platform can: the
/// loaders copy each tensor out of them once, and reading the file first would copy all of it
/// into fresh memory before that (a third of the time a model took to load).
pub(crate) enum FileBytes {
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl FileBytes {
    /// The file at `path`, named `name` in errors.
    pub(crate) fn open(path: &Path, name: &str) -> Result<FileBytes> {
        let cannot = |e: std::io::Error| model_error(name, format!("cannot read: {e}"));
        crate::files::regular_file(path, name)?;
        #[cfg(not(target_arch = "wasm32"))]
        {
            let file = std::fs::File::open(path).map_err(cannot)?;
            if file.metadata().map_err(cannot)?.len() > 0 {
                // SAFETY: the map is read only while the model loads, and every offset and size
                // read from it is checked against its length. Another process rewriting the
                // file meanwhile could change values under the loader (as it could under a
                // read); model folders are replaced, not rewritten in place, by the fetch and
                // convert commands.
                let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(cannot)?;
                return Ok(FileBytes::Mapped(map));
            }
        }
        std::fs::read(path).map(FileBytes::Read).map_err(cannot)
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            FileBytes::Mapped(map) => map,
            FileBytes::Read(bytes) => bytes,
        }
    }
}

/// What a reader found in a file, under canonical names, before it is checked against the
/// config: the tensors, where each came from (for error messages) and the aliases.
pub(crate) struct Parts {
    pub file: String,
    tensors: BTreeMap<String, Tensor>,
    origins: BTreeMap<String, String>,
    aliases: BTreeMap<String, String>,
    /// The file's own name for a canonical tensor, to say what is missing in its terms.
    source_name: fn(&str) -> Option<String>,
}

impl Parts {
    /// Reads the sizes off the tensor shapes of `parts`; heads and the rest come from the
    /// format's settings. The result is checked against every tensor by [`Parts::finish`]. Here, not in
    /// `config.rs`, so the config knows nothing of how files are read.
    pub(crate) fn derive_config(
        &self,
        encoder_heads: usize,
        decoder_heads: usize,
        layer_norm_eps: f32,
        generation: GenerationConfig,
    ) -> Result<WhisperConfig> {
        let dims = |name: &str, rank: usize| -> Result<Vec<usize>> {
            let dims = self.dims(name)?;
            if dims.len() != rank {
                return Err(model_error(
                    &self.file,
                    format!("{} has shape {dims:?}, a rank-{rank} tensor was expected", self.origin(name)),
                ));
            }
            Ok(dims.to_vec())
        };
        let conv1 = dims("model.encoder.conv1.weight", 3)?;
        let encoder_layers = count_layers(self, ENCODER_LAYERS)?;
        let decoder_layers = count_layers(self, DECODER_LAYERS)?;
        Ok(WhisperConfig {
            n_mels: conv1[1],
            n_audio_ctx: dims("model.encoder.embed_positions.weight", 2)?[0],
            n_text_ctx: dims("model.decoder.embed_positions.weight", 2)?[0],
            d_model: conv1[0],
            encoder_layers,
            decoder_layers,
            encoder_heads,
            decoder_heads,
            encoder_ffn: dims(&encoder_layer(0, "fc1.weight"), 2)?[0],
            decoder_ffn: dims(&decoder_layer(0, "fc1.weight"), 2)?[0],
            n_vocab: dims(EMBED_TOKENS, 2)?[0],
            layer_norm_eps,
            generation,
        })
    }

    pub fn new(file: &str, source_name: fn(&str) -> Option<String>) -> Self {
        Parts {
            file: file.to_string(),
            tensors: BTreeMap::new(),
            origins: BTreeMap::new(),
            aliases: BTreeMap::new(),
            source_name,
        }
    }

    /// Adds tensor `name`; `origin` says where it is in the file ("variable X at byte N").
    pub fn insert(&mut self, name: String, tensor: Tensor, origin: String) -> Result<()> {
        if let Some(first) = self.origins.get(&name) {
            return Err(model_error(
                &self.file,
                format!("{origin} gives tensor {name} a second time (first: {first})"),
            ));
        }
        self.origins.insert(name.clone(), origin);
        self.tensors.insert(name, tensor);
        Ok(())
    }

    /// Records that `alias` names the same tensor as `target`.
    pub fn alias(&mut self, alias: String, target: String, origin: &str) -> Result<()> {
        if alias != PROJ_OUT || target != EMBED_TOKENS {
            return Err(model_error(
                &self.file,
                format!("{origin}: unexpected alias {alias} -> {target} (only {PROJ_OUT} -> {EMBED_TOKENS} is known)"),
            ));
        }
        if self.aliases.insert(alias.clone(), target).is_some() {
            return Err(model_error(&self.file, format!("{origin}: alias {alias} is defined twice")));
        }
        Ok(())
    }

    /// The shape of tensor `name`, or an error saying it is missing.
    pub fn dims(&self, name: &str) -> Result<&[usize]> {
        self.tensors.get(name).map(|t| t.shape().dims()).ok_or_else(|| self.missing(name))
    }

    /// Where tensor `name` came from, for messages.
    pub fn origin<'a>(&'a self, name: &'a str) -> &'a str {
        self.origins.get(name).map_or(name, String::as_str)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    fn missing(&self, name: &str) -> Error {
        let msg = match (self.source_name)(name) {
            Some(source) => format!("missing {source} (for tensor {name})"),
            None => format!("missing tensor {name}"),
        };
        model_error(&self.file, msg)
    }

    /// Checks every tensor against the layout of `config` (presence, shape, no extras) and
    /// ties the output projection to the embedding when the file did not store it.
    pub fn finish(mut self, config: WhisperConfig) -> Result<WhisperWeights> {
        config.validate(&self.file)?;
        let mut expected = layout(&config);
        if !self.aliases.contains_key(PROJ_OUT) {
            if self.tensors.contains_key(PROJ_OUT) {
                expected.push((PROJ_OUT.to_string(), vec![config.n_vocab, config.d_model]));
            } else {
                self.aliases.insert(PROJ_OUT.to_string(), EMBED_TOKENS.to_string());
            }
        } else if self.tensors.contains_key(PROJ_OUT) {
            return Err(model_error(
                &self.file,
                format!("{} and an alias both define {PROJ_OUT}", self.origin(PROJ_OUT)),
            ));
        }
        for (name, dims) in &expected {
            let got = self.dims(name)?;
            if got != dims.as_slice() {
                return Err(model_error(
                    &self.file,
                    format!("{} has shape {got:?}, the model's config needs {dims:?}", self.origin(name)),
                ));
            }
        }
        if self.tensors.len() != expected.len() {
            let known: std::collections::BTreeSet<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
            if let Some(extra) = self.names().find(|n| !known.contains(n)) {
                return Err(model_error(&self.file, format!("unexpected tensor {extra} ({})", self.origin(extra))));
            }
        }
        for (name, t) in &self.tensors {
            if let Some((first, value, count)) = first_non_finite(t) {
                let values = if count == 1 { "value" } else { "values" };
                return Err(model_error(
                    &self.file,
                    format!(
                        "{} holds {count} non-finite {values} (the first, {value}, at element {first}): the file is damaged",
                        self.origin(name)
                    ),
                ));
            }
        }
        for (name, t) in &self.tensors {
            if let Some((max, typical)) = outlier(t) {
                return Err(model_error(
                    &self.file,
                    format!(
                        "{} holds a value of magnitude {max} where its typical magnitude is {typical} ({:.0} times \
                         more; real Whisper weights stay within a few hundred times): the file is damaged, fetch or \
                         convert the model again",
                        self.origin(name),
                        max / typical
                    ),
                ));
            }
        }
        Ok(WhisperWeights { config, tensors: self.tensors, aliases: self.aliases })
    }
}

/// How far a tensor's largest magnitude may stand above its median one. Measured on the real
/// tiny.en, base and tiny.en int8 weights: at most 219 times (a decoder layer norm's bias in
/// base), 134 in tiny.en. A flipped high exponent bit, the usual finite damage, multiplies a
/// value by 65,536 (an f16's top exponent bit; 2^128 for an f32's) and left 2,000 of them in
/// tiny.en's token embedding decoding " Buddhism Buddhism…" with no error.
const MAX_SPREAD: f32 = 8192.0;

/// `(largest, median)` magnitude of a tensor whose largest stands more than [`MAX_SPREAD`]
/// times above its median (of up to 4,097 evenly spaced values, enough to place the median of
/// any real weight tensor), `None` for a plausible one or one too small or too sparse to
/// judge. An int8 tensor's values are bounded; its row scales are judged.
fn outlier(t: &Tensor) -> Option<(f32, f32)> {
    fn judge(len: usize, magnitude: impl Fn(usize) -> f32, max: f32) -> Option<(f32, f32)> {
        if len < 64 {
            return None;
        }
        let step = (len / 4096).max(1);
        let mut sample: Vec<f32> = (0..len).step_by(step).map(&magnitude).collect();
        let middle = sample.len() / 2;
        let (_, &mut median, _) = sample.select_nth_unstable_by(middle, f32::total_cmp);
        (median > 0.0 && max > MAX_SPREAD * median).then_some((max, median))
    }
    match t.data() {
        TensorData::F32(v) => judge(v.len(), |i| v[i].abs(), v.iter().fold(0.0, |m: f32, x| m.max(x.abs()))),
        TensorData::F16(v) => {
            // Without the sign bit, finite f16s order as their magnitudes: an integer maximum.
            let max = v.iter().map(|x| x.to_bits() & 0x7fff).max().unwrap_or(0);
            judge(v.len(), |i| v[i].to_f32().abs(), half::f16::from_bits(max).to_f32())
        }
        TensorData::Q8(q) => {
            let scales = q.scales();
            judge(scales.len(), |i| scales[i].abs(), scales.iter().fold(0.0, |m: f32, x| m.max(x.abs())))
        }
        TensorData::I32(_) | TensorData::U32(_) => None,
    }
}

/// Where a tensor's first NaN or infinity is, its value, and how many there are: a damaged
/// file's weights would otherwise give garbage text, not an error. An int8 tensor's values
/// are always finite; its row scales are checked (element = row).
fn first_non_finite(t: &Tensor) -> Option<(usize, f32, usize)> {
    // A bit test per element: the scan adds a few milliseconds to loading tiny.en.
    fn scan<T: Copy>(values: &[T], finite: fn(T) -> bool, value: fn(T) -> f32) -> Option<(usize, f32, usize)> {
        let first = values.iter().position(|&x| !finite(x))?;
        Some((first, value(values[first]), values[first..].iter().filter(|&&x| !finite(x)).count()))
    }
    match t.data() {
        TensorData::F32(v) => scan(v, f32::is_finite, |x| x),
        TensorData::F16(v) => scan(v, half::f16::is_finite, half::f16::to_f32),
        TensorData::Q8(q) => scan(q.scales(), f32::is_finite, |x| x),
        TensorData::I32(_) | TensorData::U32(_) => None,
    }
}

/// The number of layers under `prefix` (`model.encoder.layers.`): the layer indices found must
/// be exactly 0..n, so a stray or corrupt index is an error, not a huge layer count.
fn count_layers(parts: &Parts, prefix: &str) -> Result<usize> {
    let mut found = BTreeSet::new();
    for name in parts.names() {
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        let index = rest.split('.').next().and_then(parse_index);
        match index {
            Some(i) => found.insert(i),
            None => {
                return Err(model_error(&parts.file, format!("{}: bad layer index in {name}", parts.origin(name))));
            }
        };
    }
    let n = found.len();
    if n == 0 {
        return Err(model_error(&parts.file, format!("no layers found (no tensor named {prefix}0.*)")));
    }
    if found.last() != Some(&(n - 1)) {
        let missing = (0..n).find(|i| !found.contains(i)).unwrap_or(n);
        return Err(model_error(
            &parts.file,
            format!(
                "layer {prefix}{missing} is missing (found {n} layers up to {prefix}{})",
                found.last().copied().unwrap_or(0)
            ),
        ));
    }
    Ok(n)
}

/// Splits `t` into `k` equal parts along its first axis (a fused Q|K|V weight into Q, K and
/// V), or `None` when the rows do not divide evenly.
pub(crate) fn split_rows(t: &Tensor, k: usize) -> Option<Vec<Tensor>> {
    let dims = t.shape().dims();
    let rows = *dims.first()?;
    let chunk = t.numel().checked_div(k)?;
    if rows % k != 0 || chunk == 0 {
        return None;
    }
    let mut shape = dims.to_vec();
    shape[0] = rows / k;
    let parts: Vec<TensorData> = match t.data() {
        TensorData::F32(v) => v.chunks(chunk).map(|c| TensorData::F32(c.to_vec())).collect(),
        TensorData::F16(v) => v.chunks(chunk).map(|c| TensorData::F16(c.to_vec())).collect(),
        TensorData::Q8(q) => {
            let per = rows / k;
            (0..k).map(|i| q.rows(i * per, (i + 1) * per).ok().map(TensorData::Q8)).collect::<Option<_>>()?
        }
        TensorData::I32(_) | TensorData::U32(_) => return None,
    };
    parts.into_iter().map(|data| Tensor::new(shape.clone(), data).ok()).collect()
}

/// Test support shared by the loader tests: the real model and small configs.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;
    use std::sync::OnceLock;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use susurrus_core::ir::DType;
    use susurrus_core::tensor::Tensor;

    use super::WhisperWeights;
    use crate::load::config::{GenerationConfig, WhisperConfig};

    /// A model of `config` with seeded weights of `dtype`, uniform in [-0.5, 0.5), for unit
    /// tests of the loaders at any size.
    pub fn random(config: WhisperConfig, dtype: DType, seed: u64) -> WhisperWeights {
        let mut rng = StdRng::seed_from_u64(seed);
        WhisperWeights::from_fn(config, dtype, |ty| {
            let values = (0..ty.numel()).map(|_| rng.random_range(-0.5f32..0.5)).collect();
            Tensor::from_f32(ty.dtype, ty.shape.clone(), values).expect("one value per element")
        })
        .expect("test configs are valid")
    }

    /// The folder of the real tiny.en model, fetched (once, cached) by scripts/models/fetch_model.sh.
    pub fn tiny_en_dir() -> PathBuf {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = std::process::Command::new(root.join("scripts/models/fetch_model.sh"))
                .current_dir(&root)
                .output()
                .expect("scripts/models/fetch_model.sh runs");
            assert!(out.status.success(), "fetch_model.sh failed: {}", String::from_utf8_lossy(&out.stderr));
            let stdout = String::from_utf8(out.stdout).expect("the printed path is UTF-8");
            PathBuf::from(stdout.lines().last().expect("fetch_model.sh prints the folder").trim())
        })
        .clone()
    }

    /// A tiny English-only config (2 heads, 1 + 2 layers) for fast tests.
    pub fn small_config() -> WhisperConfig {
        WhisperConfig {
            n_mels: 4,
            n_audio_ctx: 6,
            n_text_ctx: 5,
            d_model: 8,
            encoder_layers: 1,
            decoder_layers: 2,
            encoder_heads: 2,
            decoder_heads: 2,
            encoder_ffn: 16,
            decoder_ffn: 12,
            n_vocab: 20,
            layer_norm_eps: 1e-5,
            generation: GenerationConfig {
                suppress_ids: vec![1, 3],
                suppress_ids_begin: vec![7, 19],
                lang_ids: vec![],
                alignment_heads: vec![(1, 0), (1, 1)],
            },
        }
    }

    /// A multilingual config with 128 mels (like large-v3, scaled down; 51866 tokens).
    pub fn multilingual_config() -> WhisperConfig {
        WhisperConfig {
            n_mels: 128,
            n_audio_ctx: 4,
            n_text_ctx: 3,
            d_model: 12,
            encoder_layers: 2,
            decoder_layers: 1,
            encoder_heads: 3,
            decoder_heads: 4,
            encoder_ffn: 24,
            decoder_ffn: 24,
            n_vocab: 51866,
            layer_norm_eps: 1e-5,
            generation: GenerationConfig {
                suppress_ids: vec![1, 2, 7],
                suppress_ids_begin: vec![220, 50257],
                lang_ids: vec![50259, 50260, 50261],
                alignment_heads: vec![(0, 3)],
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::small_config;
    use super::*;

    #[test]
    fn layout_counts_and_shapes() {
        let config = small_config();
        let names = layout(&config);
        // 5 encoder globals + 2 final norm; per encoder layer: 4 attention linears (7 tensors),
        // 2 norms (4), fc1/fc2 (4) = 15; decoder: 2 globals + 2 final norm; per layer 7 + 2 + 7
        // + 2 + 4 + 2 = 24.
        assert_eq!(names.len(), 5 + 15 + 2 + 2 + 2 * 24 + 2);
        let find = |n: &str| names.iter().find(|(name, _)| name == n).map(|(_, d)| d.clone());
        assert_eq!(find("model.encoder.conv1.weight"), Some(vec![8, 4, 3]));
        assert_eq!(find("model.encoder.layers.0.fc2.weight"), Some(vec![8, 16]));
        assert_eq!(find("model.decoder.layers.1.fc1.weight"), Some(vec![12, 8]));
        assert_eq!(find("model.decoder.layers.1.encoder_attn.k_proj.weight"), Some(vec![8, 8]));
        assert_eq!(find("model.decoder.layers.1.encoder_attn.k_proj.bias"), None);
        assert_eq!(find("model.decoder.embed_positions.weight"), Some(vec![5, 8]));
    }

    #[test]
    fn random_model_resolves_the_tied_projection() {
        let w = crate::load::weights::testing::random(small_config(), DType::F16, 1);
        assert_eq!(w.get(PROJ_OUT).unwrap(), w.get(EMBED_TOKENS).unwrap());
        assert_eq!(w.get("model.encoder.layer_norm.bias").unwrap().dtype(), DType::F16);
        let err = w.get("model.encoder.layers.1.fc1.weight").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad run argument: the Whisper model has no tensor model.encoder.layers.1.fc1.weight"
        );
    }

    #[test]
    fn split_rows_takes_consecutive_row_blocks() {
        let t = Tensor::f32([6, 2], (0..12).map(|v| v as f32).collect()).unwrap();
        let parts = split_rows(&t, 3).unwrap();
        assert_eq!(parts[0], Tensor::f32([2, 2], vec![0.0, 1.0, 2.0, 3.0]).unwrap());
        assert_eq!(parts[2], Tensor::f32([2, 2], vec![8.0, 9.0, 10.0, 11.0]).unwrap());
        assert!(split_rows(&t, 4).is_none());
        assert!(split_rows(&Tensor::f32([0, 2], vec![]).unwrap(), 2).is_none());
        assert!(split_rows(&Tensor::scalar_f32(1.0), 1).is_none());
    }
}
