//! `susurrus bench-ops`: the ops of Whisper tiny at their real shapes, timed on each backend.
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
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::ops::Op;
use susurrus_core::ops::{Attention, MaskKind};
use susurrus_core::{DType, Graph, Result, Tensor, TensorType, passes, plan};
use susurrus_wgpu::{WgpuBackend, WgpuOptions};

/// Which backends to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchBackend {
    Cpu,
    Wgpu,
    All,
}

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

/// The ops of Whisper tiny: the encoder at 1500 positions and one decoder step.
fn whisper_tiny_ops(wdt: DType) -> Result<Vec<OpBench>> {
    Ok(vec![
        conv("enc conv1", 80, 3000, 384, 1, wdt)?,
        conv("enc conv2", 384, 3000, 384, 2, wdt)?,
        layer_norm("enc layer_norm", 1500, 384)?,
        linear("enc qkv/out proj", 1500, 384, 384, false, wdt)?,
        linear("enc fc1 + gelu", 1500, 384, 1536, true, wdt)?,
        linear("enc fc2", 1500, 1536, 384, false, wdt)?,
        attention("enc attention", 6, 1500, 1500, 64, false)?,
        linear("dec proj (gemv)", 1, 384, 384, false, wdt)?,
        linear("dec fc1 (gemv)", 1, 384, 1536, true, wdt)?,
        linear("dec fc2 (gemv)", 1, 1536, 384, false, wdt)?,
        linear("dec logits (gemv)", 1, 384, 51864, false, wdt)?,
        attention("dec self-attn", 6, 1, 448, 64, true)?,
        attention("dec cross-attn", 6, 1, 1500, 64, false)?,
    ])
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
    /// Backends to measure.
    #[arg(long, value_enum, default_value = "all")]
    pub backend: BenchBackend,
    /// Store weights as f16 (read natively where the GPU has shader-f16).
    #[arg(long)]
    pub f16: bool,
}

/// Runs `susurrus bench-ops`.
pub fn run(args: &BenchOpsArgs) -> crate::error::Result<()> {
    crate::output::print(&bench_ops(args.backend, args.f16)?)
}

/// Runs the benchmark and renders its table.
pub fn bench_ops(which: BenchBackend, f16_weights: bool) -> Result<String> {
    let mut backends: Vec<Box<dyn Backend>> = Vec::new();
    let mut notes = Vec::new();
    if which != BenchBackend::Cpu {
        let gpu =
            block_on(WgpuBackend::with_options(&WgpuOptions { allow_f16: f16_weights, ..WgpuOptions::default() }))?;
        notes.push(format!(
            "wgpu adapter: {} (shader-f16 {}, matrix units {})",
            gpu.adapter(),
            if gpu.has_f16() { "on" } else { "off" },
            if gpu.has_matrix_units() { "on" } else { "off" }
        ));
        // With matrix units, the same device without them too: what they change.
        let matrix = gpu.has_matrix_units();
        backends.push(Box::new(gpu));
        if matrix {
            let options = WgpuOptions { allow_f16: f16_weights, allow_matrix_units: false, ..WgpuOptions::default() };
            backends.push(Box::new(block_on(WgpuBackend::with_options(&options))?));
        }
    }
    if which != BenchBackend::Wgpu {
        notes.push("cpu: the reference executor (single-threaded, plain loops)".into());
        backends.push(Box::new(CpuBackend::new()));
    }
    let wdt = if f16_weights { DType::F16 } else { DType::F32 };
    let mut out = format!("{}\nweights: {wdt}\n\n", notes.join("\n"));
    out.push_str(&format!(
        "{:<20} {:<30} {:<16} {:>11} {:>10} {:>9}\n",
        "op", "shape", "backend", "ms (median)", "GFLOP/s", "GB/s"
    ));
    for op in whisper_tiny_ops(wdt)? {
        for backend in &backends {
            let budget = if backend.name() == "cpu" { Duration::from_millis(200) } else { Duration::from_millis(100) };
            let secs = time_op(backend.as_ref(), &op, budget)?;
            out.push_str(&format!(
                "{:<20} {:<30} {:<16} {:>11.4} {:>10.1} {:>9.1}\n",
                op.name,
                op.shape,
                backend.name(),
                secs * 1e3,
                op.flops / secs / 1e9,
                op.bytes / secs / 1e9
            ));
        }
    }
    Ok(out)
}
