//! `susurrus info`: the wgpu adapters this machine has (limits and features that decide how
//! the wgpu backend plans and which kernels it picks), the backend `--backend auto` would
//! choose, the CPU backend's threads, and a model's architecture and size.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use susurrus_core::passes::split_weights::{BufferLimit, row_blocks};
use susurrus_wgpu::wgpu;
use susurrus_wgpu::{
    DEFAULT_MAX_BUFFER, DEFAULT_MAX_STORAGE_BINDING, WgpuOptions, buffer_limit, choose_adapter, matrix_units,
};
use susurrus_whisper::load::load_dir;
use susurrus_whisper::load::weights::WhisperWeights;

use crate::error::{Error, Result};
use crate::load;
use crate::output::{format_bytes, format_count};
use susurrus_cuda::{CudaBackend, CudaOptions};

const AFTER_HELP: &str = "\
Examples:
  susurrus info
  susurrus info --model whisper-tiny.en-hf --json";

/// Arguments of `susurrus info`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct InfoArgs {
    /// Model folder to describe (CTranslate2 or Hugging Face). Default:
    /// ~/.cache/susurrus/models/whisper-tiny.en-ct2 when ./scripts/models/fetch_model.sh has
    /// prepared it (a missing default is noted, not an error).
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Everything `susurrus info` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Info {
    pub adapters: Vec<AdapterReport>,
    /// Index in `adapters` of the adapter `--backend wgpu` opens (`None`: no adapter).
    pub wgpu_adapter: Option<usize>,
    /// The CUDA device `--backend cuda` opens (`name (sm_XY)`), or why none opens.
    pub cuda: std::result::Result<String, String>,
    /// What `--backend auto` runs on.
    pub auto: AutoChoice,
    /// Threads the CPU backend uses by default (one per core).
    pub cpu_threads: usize,
    pub model: Option<ModelReport>,
    /// How the model's weights fit the buffers of each adapter and of WebGPU's default limits
    /// (empty without a model).
    pub buffers: Vec<BufferPlan>,
    /// Why there is no model report (the default model is not fetched).
    pub model_missing: Option<String>,
}

/// How a model's weights are stored on a wgpu device whose buffers hold at most `limit_bytes`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BufferPlan {
    /// Index in [`Info::adapters`]; `None` for WebGPU's default limits (128 MiB per binding,
    /// 256 MiB per buffer: what any browser grants).
    pub adapter: Option<usize>,
    pub limit_bytes: usize,
    /// The weights larger than that, read as blocks of rows (arenas are cut into blocks of
    /// the same size).
    pub split: Vec<SplitWeight>,
}

/// A weight read as `blocks` blocks of rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitWeight {
    pub name: String,
    pub bytes: usize,
    pub blocks: usize,
}

/// One wgpu adapter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AdapterReport {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    /// A GPU, not a software rasteriser (lavapipe, SwiftShader, WARP).
    pub real_hardware: bool,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroup_size_x: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub shader_f16: bool,
    pub subgroups: bool,
    pub subgroup_sizes: [u32; 2],
    pub timestamp_queries: bool,
    /// wgpu's experimental cooperative-matrix feature (matrix units) is offered.
    pub cooperative_matrix: bool,
    /// The cooperative-matrix configurations the adapter lists, `MxNxK ab->cr`.
    pub cooperative_matrix_configs: Vec<String>,
    /// The matrix kernels run on it (`susurrus_wgpu::matrix_units`).
    pub matrix_units: bool,
}

/// What `--backend auto` runs on: `backend` is `cuda`, `wgpu` or `cpu`; `adapter` indexes
/// [`Info::adapters`] for wgpu.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AutoChoice {
    pub backend: &'static str,
    pub adapter: Option<usize>,
    pub reason: String,
}

/// A model folder's architecture and size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelReport {
    pub path: String,
    /// `CTranslate2` or `Hugging Face`.
    pub format: &'static str,
    pub weights_file: String,
    pub weights_file_bytes: u64,
    pub d_model: usize,
    pub encoder_layers: usize,
    pub encoder_heads: usize,
    pub encoder_ffn: usize,
    pub decoder_layers: usize,
    pub decoder_heads: usize,
    pub decoder_ffn: usize,
    pub n_vocab: usize,
    pub n_mels: usize,
    pub n_audio_ctx: usize,
    pub n_text_ctx: usize,
    pub multilingual: bool,
    pub tensors: usize,
    /// Stored parameters (the output projection tied to the token embedding counts once).
    pub parameters: usize,
    /// The weights' element types, e.g. `["f16"]`.
    pub dtypes: Vec<String>,
}

pub fn run(args: &InfoArgs) -> Result<()> {
    let info = gather(args.model.as_deref())?;
    if args.json {
        let json = serde_json::to_string_pretty(&info)
            .map_err(|e| Error::Usage(format!("cannot write the report as JSON: {e}")))?;
        crate::output::print(&format!("{json}\n"))
    } else {
        crate::output::print(&render(&info))
    }
}

/// Collects the report. `model`: the folder given with `--model` (an error when it cannot be
/// read), else the default one (noted as missing when it is not there).
pub fn gather(model: Option<&Path>) -> Result<Info> {
    let instance = susurrus_wgpu::instance();
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let reports: Vec<AdapterReport> = adapters.iter().map(adapter_report).collect();
    // The adapter the wgpu backend opens.
    let chosen = pollster::block_on(choose_adapter(&instance, &WgpuOptions::default())).ok().map(|a| a.get_info());
    let wgpu_adapter = chosen.and_then(|info| adapters.iter().position(|a| a.get_info() == info));
    let cuda = CudaBackend::new(&CudaOptions::default())
        .map(|b| format!("{} ({})", b.device_name(), b.arch()))
        .map_err(|e| e.to_string());
    let auto = auto_choice(cuda.as_ref().ok(), &reports, wgpu_adapter);
    let cpu_threads = std::thread::available_parallelism().map_or(1, usize::from);
    // A report never downloads: a name is looked up in the Hugging Face cache only.
    let offline = crate::hub::Hub::from_env(true);
    let dir = match model {
        Some(dir) => Ok(load::resolve(Some(dir), &offline)?),
        None => load::resolve(None, &offline).map_err(|e| e.to_string()),
    };
    let (model, buffers, model_missing) = match dir {
        Ok(dir) => {
            let (report, weights) = model_report(&dir)?;
            let mut limits: Vec<(Option<usize>, usize)> = reports
                .iter()
                .enumerate()
                .map(|(i, a)| (Some(i), adapter_buffer_limit(a.max_storage_buffer_binding_size, a.max_buffer_size)))
                .collect();
            limits.push((None, adapter_buffer_limit(DEFAULT_MAX_STORAGE_BINDING, DEFAULT_MAX_BUFFER)));
            (Some(report), buffer_plans(&weights, &limits)?, None)
        }
        Err(why) => (None, Vec::new(), Some(why)),
    };
    Ok(Info { adapters: reports, wgpu_adapter, cuda, auto, cpu_threads, model, buffers, model_missing })
}

/// The wgpu backend's buffer limit on a device with these limits.
fn adapter_buffer_limit(max_storage_buffer_binding_size: u64, max_buffer_size: u64) -> usize {
    buffer_limit(&wgpu::Limits { max_storage_buffer_binding_size, max_buffer_size, ..wgpu::Limits::default() })
}

/// For each `(adapter, limit)`, the weights of `weights` above the limit and their blocks, as
/// the link layer splits them (weights kept as the file stores them).
pub fn buffer_plans(weights: &WhisperWeights, limits: &[(Option<usize>, usize)]) -> Result<Vec<BufferPlan>> {
    let stored = |ty: &susurrus_core::ir::TensorType| ty.byte_size();
    limits
        .iter()
        .map(|&(adapter, limit_bytes)| {
            let limit = BufferLimit { backend: "wgpu", bytes: limit_bytes, stored: &stored };
            let mut split = Vec::new();
            for (name, t) in weights.tensors() {
                if let Some(blocks) = row_blocks(name, &t.ty(), &limit)? {
                    split.push(SplitWeight { name: name.to_string(), bytes: stored(&t.ty()), blocks: blocks.len() });
                }
            }
            Ok(BufferPlan { adapter, limit_bytes, split })
        })
        .collect()
}

/// `--backend auto`'s rule: CUDA when a device opens; else the adapter the wgpu backend opens
/// when it is real hardware, else the CPU backend (a software adapter is slower than the CPU
/// backend on the same cores).
fn auto_choice(cuda: Option<&String>, adapters: &[AdapterReport], wgpu_adapter: Option<usize>) -> AutoChoice {
    if let Some(device) = cuda {
        return AutoChoice { backend: "cuda", adapter: None, reason: format!("CUDA opens {device}") };
    }
    match wgpu_adapter.map(|i| (i, &adapters[i])) {
        Some((i, a)) if a.real_hardware => {
            AutoChoice { backend: "wgpu", adapter: Some(i), reason: format!("{} is real hardware", a.name) }
        }
        Some((_, a)) => AutoChoice {
            backend: "cpu",
            adapter: None,
            reason: format!("the wgpu adapter {} is a software renderer", a.name),
        },
        None => AutoChoice { backend: "cpu", adapter: None, reason: "no wgpu adapter found".into() },
    }
}

fn adapter_report(adapter: &wgpu::Adapter) -> AdapterReport {
    let info = adapter.get_info();
    let limits = adapter.limits();
    let features = adapter.features();
    AdapterReport {
        name: info.name,
        backend: info.backend.to_str().to_string(),
        device_type: device_type_name(info.device_type).to_string(),
        driver: info.driver,
        driver_info: info.driver_info,
        real_hardware: info.device_type != wgpu::DeviceType::Cpu,
        max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
        max_buffer_size: limits.max_buffer_size,
        max_compute_workgroup_size_x: limits.max_compute_workgroup_size_x,
        max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
        max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
        shader_f16: features.contains(wgpu::Features::SHADER_F16),
        subgroups: features.contains(wgpu::Features::SUBGROUP),
        subgroup_sizes: [info.subgroup_min_size, info.subgroup_max_size],
        timestamp_queries: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        cooperative_matrix: features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
        cooperative_matrix_configs: adapter
            .cooperative_matrix_properties()
            .iter()
            .map(|c| format!("{}x{}x{} {:?}->{:?}", c.m_size, c.n_size, c.k_size, c.ab_type, c.cr_type).to_lowercase())
            .collect(),
        matrix_units: matrix_units(adapter),
    }
}

fn device_type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete-gpu",
        wgpu::DeviceType::IntegratedGpu => "integrated-gpu",
        wgpu::DeviceType::VirtualGpu => "virtual-gpu",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    }
}

/// Loads the weights of `dir` (either format) and describes them.
pub fn model_report(dir: &Path) -> Result<(ModelReport, WhisperWeights)> {
    let (format, weights_file) = if dir.join("model.bin").is_file() {
        ("CTranslate2", "model.bin")
    } else {
        ("Hugging Face", "model.safetensors")
    };
    let weights_path = dir.join(weights_file);
    let weights_file_bytes = std::fs::metadata(&weights_path).map_err(|e| Error::io(&weights_path, e))?.len();
    let weights = load_dir(dir)?;
    let c = weights.config();
    let tensors = weights.tensors();
    let dtypes: BTreeSet<String> = tensors.values().map(|t| t.dtype().name().to_string()).collect();
    let report = ModelReport {
        path: dir.display().to_string(),
        format,
        weights_file: weights_file.to_string(),
        weights_file_bytes,
        d_model: c.d_model,
        encoder_layers: c.encoder_layers,
        encoder_heads: c.encoder_heads,
        encoder_ffn: c.encoder_ffn,
        decoder_layers: c.decoder_layers,
        decoder_heads: c.decoder_heads,
        decoder_ffn: c.decoder_ffn,
        n_vocab: c.n_vocab,
        n_mels: c.n_mels,
        n_audio_ctx: c.n_audio_ctx,
        n_text_ctx: c.n_text_ctx,
        multilingual: c.is_multilingual(),
        tensors: tensors.len(),
        parameters: tensors.values().map(|t| t.numel()).sum(),
        dtypes: dtypes.into_iter().collect(),
    };
    Ok((report, weights))
}

/// The report as text.
pub fn render(info: &Info) -> String {
    let mut out = String::new();
    let w = &mut out;
    // Writing to a String cannot fail.
    let _ = writeln!(w, "wgpu adapters: {}", info.adapters.len());
    for (i, a) in info.adapters.iter().enumerate() {
        render_adapter(w, i, a);
    }
    let _ = match info.wgpu_adapter {
        Some(i) => writeln!(w, "--backend wgpu opens: [{i}] {}", info.adapters[i].name),
        None => writeln!(w, "--backend wgpu opens: nothing (no adapter)"),
    };
    let _ = match &info.cuda {
        Ok(device) => writeln!(w, "--backend cuda opens: {device}"),
        Err(why) => writeln!(w, "--backend cuda opens: nothing ({why})"),
    };
    let _ = match info.auto.adapter {
        Some(i) => writeln!(w, "--backend auto picks: wgpu on [{i}] {} ({})", info.adapters[i].name, info.auto.reason),
        None => writeln!(w, "--backend auto picks: {} ({})", info.auto.backend, info.auto.reason),
    };
    let _ = writeln!(w, "cpu backend: {} threads", info.cpu_threads);
    match (&info.model, &info.model_missing) {
        (Some(m), _) => {
            render_model(w, m);
            render_buffers(w, info);
        }
        (None, Some(why)) => {
            let _ = writeln!(w, "model: none ({why})");
        }
        (None, None) => {}
    }
    out
}

fn render_adapter(w: &mut String, i: usize, a: &AdapterReport) {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let hardware = if a.real_hardware { "real hardware" } else { "not real hardware" };
    let _ = writeln!(w, "  [{i}] {}", a.name);
    let _ = writeln!(w, "      backend {}, device type {} ({hardware})", a.backend, a.device_type);
    let _ = writeln!(w, "      driver {} ({})", a.driver, a.driver_info);
    let _ = writeln!(
        w,
        "      max storage buffer binding {} B, max buffer {} B",
        a.max_storage_buffer_binding_size, a.max_buffer_size
    );
    let _ = writeln!(
        w,
        "      compute: workgroup size x {}, invocations per workgroup {}, workgroup storage {} B",
        a.max_compute_workgroup_size_x, a.max_compute_invocations_per_workgroup, a.max_compute_workgroup_storage_size
    );
    let subgroups =
        if a.subgroups { format!("yes ({}-{} lanes)", a.subgroup_sizes[0], a.subgroup_sizes[1]) } else { "no".into() };
    let _ = writeln!(
        w,
        "      features: shader-f16 {}, subgroups {subgroups}, timestamp queries {}",
        yes(a.shader_f16),
        yes(a.timestamp_queries)
    );
    let configs = if a.cooperative_matrix_configs.is_empty() {
        "no configurations".to_string()
    } else {
        a.cooperative_matrix_configs.join(", ")
    };
    let _ = writeln!(
        w,
        "      cooperative matrices: {} ({configs}); matrix kernels {}",
        if a.cooperative_matrix { "offered" } else { "not offered" },
        if a.matrix_units { "on" } else { "off" }
    );
}

fn render_buffers(w: &mut String, info: &Info) {
    let _ = writeln!(w, "  on wgpu (weights above a buffer's limit are read as blocks of rows):");
    for plan in &info.buffers {
        let device = match plan.adapter {
            Some(i) => format!("[{i}] {}", info.adapters[i].name),
            None => "WebGPU's default limits (any browser)".to_string(),
        };
        let split = if plan.split.is_empty() {
            "every weight whole".to_string()
        } else {
            let names: Vec<String> = plan
                .split
                .iter()
                .map(|s| format!("{} ({}) in {} blocks", s.name, format_bytes(s.bytes as u64), s.blocks))
                .collect();
            names.join(", ")
        };
        let _ = writeln!(w, "    {device}: buffers of at most {} B, {split}", plan.limit_bytes);
    }
}

fn render_model(w: &mut String, m: &ModelReport) {
    let language = if m.multilingual { "multilingual" } else { "English-only (.en)" };
    let _ = writeln!(w, "model: {}", m.path);
    let _ = writeln!(w, "  format {}, {} {}", m.format, m.weights_file, format_bytes(m.weights_file_bytes));
    let _ = writeln!(w, "  d_model {}, {language}, vocabulary {}, {} mel bins", m.d_model, m.n_vocab, m.n_mels);
    let _ = writeln!(
        w,
        "  encoder: {} layers, {} heads, feed-forward {}, audio context {}",
        m.encoder_layers, m.encoder_heads, m.encoder_ffn, m.n_audio_ctx
    );
    let _ = writeln!(
        w,
        "  decoder: {} layers, {} heads, feed-forward {}, text context {}",
        m.decoder_layers, m.decoder_heads, m.decoder_ffn, m.n_text_ctx
    );
    let _ =
        writeln!(w, "  {} parameters in {} tensors, {}", format_count(m.parameters), m.tensors, m.dtypes.join(" + "));
}

#[cfg(test)]
mod tests {
    use super::*;
    use susurrus_core::ir::DType;
    use susurrus_testkit::shapes;
    use susurrus_testkit::whisper::{Architecture, random_model};

    /// whisper-small with f32 weights: its 51865 x 768 embedding (159 MB) is above WebGPU's
    /// default 128 MiB and is read as two blocks there; a 2 GiB device holds it whole.
    #[test]
    fn buffer_plans_name_the_weights_a_limit_splits() {
        let weights = random_model(shapes::config(Architecture::Small, 1), DType::F32, 1).unwrap();
        let default = adapter_buffer_limit(DEFAULT_MAX_STORAGE_BINDING, DEFAULT_MAX_BUFFER);
        assert_eq!(default, 128 << 20);
        let plans = buffer_plans(&weights, &[(Some(0), 2 << 30), (None, default)]).unwrap();
        assert_eq!(plans[0], BufferPlan { adapter: Some(0), limit_bytes: 2 << 30, split: vec![] });
        let embedding =
            SplitWeight { name: "model.decoder.embed_tokens.weight".into(), bytes: 51865 * 768 * 4, blocks: 2 };
        assert_eq!(plans[1], BufferPlan { adapter: None, limit_bytes: 128 << 20, split: vec![embedding] });
        // A limit below one row is an error naming the weight's type.
        let err = buffer_plans(&weights, &[(None, 1024)]).unwrap_err().to_string();
        let row_too_large = "weight 'model.decoder.embed_positions.weight' (f32[448,768]), one row of which is more \
                             than a buffer's 1024 bytes, is not supported by the wgpu backend";
        assert_eq!(err, row_too_large);
    }
}
