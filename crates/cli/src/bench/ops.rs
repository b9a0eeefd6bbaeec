//! `susurrus bench-ops`: the ops of a Whisper size at their real shapes, timed on each backend.
//!
//! Each op is its own one-op graph (optimised, so linear layers are the fused `matmul_bias`),
//! compiled once, warmed up, then run back to back: the time per op is the median over
//! several batches of the batch time divided by its length. Activations are declared as
//! weights, so a run uploads nothing and the time is the op's own (plus one submission).
//! GFLOP/s counts multiply-adds as two operations; GB/s counts each input, weight and output
//! byte once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pollster::block_on;
use susurrus_core::exec::Backend;
use susurrus_core::ops::Op;
use susurrus_core::ops::{Attention, MaskKind};
use susurrus_core::{DType, Graph, Result, Tensor, TensorType, passes, plan};
use susurrus_whisper::load::config::WhisperConfig;
use susurrus_whisper::load::sizes::Architecture;

use crate::backend::BackendChoice;

/// One benchmarked op: its graph and what it computes and moves.
struct OpBench {
    name: &'static str,
    shape: String,
    graph: Graph,
    flops: f64,
    bytes: f64,
}

fn t(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

/// `x [m, k] · W[n, k]^T + b (+ GELU)`.
fn linear(name: &'static str, m: usize, k: usize, n: usize, gelu: bool, wdt: DType) -> Result<OpBench> {
    let mut g = Graph::new(name);
    let x = g.param("x", t(DType::F32, &[m, k]))?;
    let w = g.param("w", t(wdt, &[n, k]))?;
    let b = g.param("b", t(DType::F32, &[n]))?;
    let y = g.matmul_t(x, w)?;
    let mut y = g.add(y, b)?;
    if gelu {
        y = g.gelu(y)?;
    }
    g.output("y", y)?;
    let bytes = (m * k * 4 + n * k * wdt.size() + n * 4 + m * n * 4) as f64;
    let shape = format!("{m}x{k} · {k}x{n}{}", if gelu { " +gelu" } else { "" });
    Ok(OpBench { name, shape, graph: g, flops: 2.0 * (m * n * k) as f64, bytes })
}

fn attention(name: &'static str, heads: usize, sq: usize, sk: usize, d: usize, causal: bool) -> Result<OpBench> {
    let mut g = Graph::new(name);
    let q = g.param("q", t(DType::F32, &[heads, sq, d]))?;
    let k = g.param("k", t(DType::F32, &[heads, sk, d]))?;
    let v = g.param("v", t(DType::F32, &[heads, sk, d]))?;
    let mask = if causal { MaskKind::Causal } else { MaskKind::None };
    let o = g.push(Attention { scale: 1.0 / (d as f32).sqrt(), mask }, &[q, k, v])?;
    g.output("o", o)?;
    let bytes = (heads * (2 * sq + 2 * sk) * d * 4) as f64;
    Ok(OpBench {
        name,
        shape: format!("{heads}h x {sq}q x {sk}k x {d}"),
        graph: g,
        flops: 4.0 * (heads * sq * sk * d) as f64,
        bytes,
    })
}

fn layer_norm(name: &'static str, rows: usize, d: usize) -> Result<OpBench> {
    let mut g = Graph::new(name);
    let x = g.param("x", t(DType::F32, &[rows, d]))?;
    let gamma = g.param("g", t(DType::F32, &[d]))?;
    let beta = g.param("b", t(DType::F32, &[d]))?;
    let y = g.layer_norm(x, gamma, beta, 1e-5)?;
    g.output("y", y)?;
    Ok(OpBench {
        name,
        shape: format!("{rows}x{d}"),
        graph: g,
        flops: 8.0 * (rows * d) as f64,
        bytes: (2 * rows * d * 4) as f64,
    })
}

fn conv(name: &'static str, c_in: usize, len: usize, c_out: usize, stride: usize, wdt: DType) -> Result<OpBench> {
    let mut g = Graph::new(name);
    let x = g.param("x", t(DType::F32, &[c_in, len]))?;
    let w = g.param("w", t(wdt, &[c_out, c_in, 3]))?;
    let b = g.param("b", t(DType::F32, &[c_out]))?;
    let y = g.conv1d(x, w, Some(b), stride, 1, 1)?;
    g.output("y", y)?;
    let out = len / stride;
    let bytes = (c_in * len * 4 + c_out * c_in * 3 * wdt.size() + c_out * out * 4) as f64;
    Ok(OpBench {
        name,
        shape: format!("{c_in}x{len} -> {c_out}x{out} (k3 s{stride})"),
        graph: g,
        flops: 2.0 * (c_out * out * c_in * 3) as f64,
        bytes,
    })
}

/// The ops of one Whisper size: the encoder at 1500 positions, one greedy decoder step, and
/// the products of a beam-search step (`beam` rows).
fn whisper_ops(config: &WhisperConfig, beam: usize, wdt: DType) -> Result<Vec<OpBench>> {
    let (d, f, heads, vocab, mels) =
        (config.d_model, config.encoder_ffn, config.encoder_heads, config.n_vocab, config.n_mels);
    let (hd, ctx) = (config.encoder_head_dim(), config.n_audio_ctx);
    let mut ops = vec![
        conv("enc conv1", mels, 2 * ctx, d, 1, wdt)?,
        conv("enc conv2", d, 2 * ctx, d, 2, wdt)?,
        layer_norm("enc layer_norm", ctx, d)?,
        linear("enc qkv/out proj", ctx, d, d, false, wdt)?,
        linear("enc fc1 + gelu", ctx, d, f, true, wdt)?,
        linear("enc fc2", ctx, f, d, false, wdt)?,
        attention("enc attention", heads, ctx, ctx, hd, false)?,
        linear("dec proj", 1, d, d, false, wdt)?,
        linear("dec fc1 + gelu", 1, d, f, true, wdt)?,
        linear("dec fc2", 1, f, d, false, wdt)?,
        linear("dec logits", 1, d, vocab, false, wdt)?,
        attention("dec self-attn", heads, 1, config.n_text_ctx, hd, true)?,
        attention("dec cross-attn", heads, 1, ctx, hd, false)?,
    ];
    if beam > 1 {
        ops.extend([
            linear("beam proj", beam, d, d, false, wdt)?,
            linear("beam fc1 + gelu", beam, d, f, true, wdt)?,
            linear("beam fc2", beam, f, d, false, wdt)?,
            linear("beam logits", beam, d, vocab, false, wdt)?,
            attention("beam cross-attn", beam * heads, 1, ctx, hd, false)?,
        ]);
    }
    Ok(ops)
}

/// Values for the leaves of `g` that `wanted` picks, by name. Timing does not depend on them;
/// they are finite and vary from element to element (the benchmarked ops are all float).
fn filled(g: &Graph, wanted: impl Fn(&Op) -> bool) -> Result<HashMap<String, Tensor>> {
    let mut out = HashMap::new();
    for node in g.nodes() {
        if let Some(name) = node.op.leaf_name().filter(|_| wanted(&node.op)) {
            let values = (0..node.ty.numel()).map(|i| (i as f32 * 0.61).sin()).collect();
            out.insert(name.to_string(), Tensor::from_f32(node.ty.dtype, node.ty.shape.clone(), values)?);
        }
    }
    Ok(out)
}

/// Median seconds per run of `op` on `backend`, over batches that each take about `budget`.
fn time_op(backend: &dyn Backend, op: &OpBench, budget: Duration) -> Result<f64> {
    let mut graph = op.graph.clone();
    passes::optimize(&mut graph)?;
    let p = plan::plan(graph.clone())?;
    let inputs = filled(&graph, |op| matches!(op, Op::Input(_)))?;
    let weights = filled(&graph, |op| matches!(op, Op::Param(_)))?;
    let mut exe = block_on(backend.compile(&p, &weights))?;
    let scalars = HashMap::new();
    let start = Instant::now();
    block_on(exe.run_repeatedly(&inputs, &scalars, 1))?;
    let once = start.elapsed().max(Duration::from_micros(1));
    // Warm up for about one budget, so an idle GPU has raised its clocks.
    let warm = ((budget.as_secs_f64() / once.as_secs_f64()) as usize).clamp(0, 1000);
    block_on(exe.run_repeatedly(&inputs, &scalars, warm))?;
    let per_batch = ((budget.as_secs_f64() / once.as_secs_f64()) as usize).clamp(1, 1000);
    // Slow runs (the reference CPU executor on encoder shapes) get fewer samples.
    let batches = if once > Duration::from_secs(1) { 1 } else { 5 };
    let mut samples = Vec::new();
    for _ in 0..batches {
        let start = Instant::now();
        block_on(exe.run_repeatedly(&inputs, &scalars, per_batch))?;
        samples.push(start.elapsed().as_secs_f64() / per_batch as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// Arguments of `susurrus bench-ops`.
#[derive(Debug, clap::Args)]
pub struct BenchOpsArgs {
    /// The Whisper size whose shapes are timed: tiny, base, small, medium, large-v3 or
    /// large-v3-turbo (the encoder's and one decoder step's ops; the layer count does not
    /// matter here).
    #[arg(long, default_value = "tiny", value_parser = parse_size)]
    pub size: Architecture,
    /// Backends to measure, comma-separated: wgpu, wgpu-browser, wgpu-browser-f16, cuda, cpu.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "wgpu,cpu")]
    pub backend: Vec<BackendChoice>,
    /// Rows of the beam-search step's products (its beams); 1 leaves them out.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub beam: u16,
    /// Store weights as f16 (read natively where the GPU has shader-f16).
    #[arg(long)]
    pub f16: bool,
}

fn parse_size(name: &str) -> std::result::Result<Architecture, String> {
    Architecture::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Architecture::ALL.iter().map(|a| a.name()).collect();
        format!("not a Whisper size: one of {}", names.join(", "))
    })
}

/// Runs `susurrus bench-ops`.
pub fn run(args: &BenchOpsArgs) -> crate::error::Result<()> {
    if args.backend.contains(&BackendChoice::Auto) {
        return Err(crate::error::Error::Usage(
            "bench-ops measures named backends: --backend auto is not one of them".into(),
        ));
    }
    let mut backends = Vec::new();
    let mut notes = Vec::new();
    for &choice in &args.backend {
        let backend: Box<dyn Backend> = match choice.wgpu_options() {
            Some(options) => {
                // The adapter and what it offers, which the figures depend on.
                let gpu = crate::backend::open_wgpu(options)?;
                let on = |yes: bool| if yes { "on" } else { "off" };
                notes.push(format!(
                    "{}: {} (shader-f16 {}, matrix units {})",
                    choice.name(),
                    gpu.adapter(),
                    on(gpu.has_f16()),
                    on(gpu.has_matrix_units())
                ));
                Box::new(gpu)
            }
            None => {
                let backend = crate::backend::open(choice, None)?;
                notes.push(format!("{}: the {} backend", choice.name(), backend.name()));
                backend
            }
        };
        backends.push((choice, backend));
    }
    let config = args.size.config();
    let wdt = if args.f16 { DType::F16 } else { DType::F32 };
    let ops = whisper_ops(&config, usize::from(args.beam), wdt)?;
    let mut out = format!("Whisper {} shapes, weights {wdt}\n{}\n\n", args.size.name(), notes.join("\n"));
    out.push_str(&format!(
        "{:<18} {:<28} {:<17} {:>11} {:>10} {:>9}\n",
        "op", "shape", "backend", "ms (median)", "GFLOP/s", "GB/s"
    ));
    for op in &ops {
        for (choice, backend) in &backends {
            let budget =
                if *choice == BackendChoice::Cpu { Duration::from_millis(200) } else { Duration::from_millis(100) };
            let secs = time_op(backend.as_ref(), op, budget)?;
            out.push_str(&format!(
                "{:<18} {:<28} {:<17} {:>11.4} {:>10.1} {:>9.1}\n",
                op.name,
                op.shape,
                choice.name(),
                secs * 1e3,
                op.flops / secs / 1e9,
                op.bytes / secs / 1e9
            ));
        }
    }
    crate::output::print(&out)
}
