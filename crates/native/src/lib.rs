//! The `susurrus` command's logic, in a library so that `main.rs` stays a few lines.
//!
//! Each subcommand renders its whole output as one `String`; `main` only writes it out and
//! turns errors into a message and exit code 1.

pub mod bench_ops;

use clap::{Args, Parser, Subcommand};
use susurrus_core::Result;
use susurrus_core::demo::{EncoderLayerShape, encoder_layer};
use susurrus_core::{passes, plan};

/// The most positions a Whisper encoder layer sees: one 30 s window of audio.
const MAX_POSITIONS: i64 = 1500;

/// Whisper speech recognition on Susurrus's own graph compiler and runtime.
#[derive(Debug, Parser)]
#[command(name = "susurrus", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a Whisper-tiny-shaped encoder layer, optimise it and print its IR and memory plan.
    ///
    /// Prints the graph as built, the graph after the optimisation passes (with the passes
    /// that changed it), the arena memory report and where every value is stored.
    Demo(DemoArgs),
    /// Time the ops of Whisper tiny (encoder at 1500 positions, one decoder step) on the wgpu
    /// and CPU executors and print time, GFLOP/s and GB/s per op.
    BenchOps(BenchOpsArgs),
}

#[derive(Debug, Args)]
pub struct BenchOpsArgs {
    /// Backends to measure.
    #[arg(long, value_enum, default_value = "all")]
    pub backend: bench_ops::BenchBackend,
    /// Store weights as f16 (read natively where the GPU has shader-f16).
    #[arg(long)]
    pub f16: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Sequence positions of the layer, 1 to 1500 (a Whisper encoder sees at most 1500, one
    /// 30 s window); fewer give a smaller plan. Default: 1500.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_POSITIONS))]
    pub positions: Option<u16>,
}

/// Runs the parsed command and returns what it prints.
pub fn run(cli: &Cli) -> Result<String> {
    match &cli.command {
        Command::Demo(args) => demo(args),
        Command::BenchOps(args) => bench_ops::bench_ops(args.backend, args.f16),
    }
}

/// `susurrus demo`: build, optimise and plan one encoder layer, and render every stage.
pub fn demo(args: &DemoArgs) -> Result<String> {
    let mut shape = EncoderLayerShape::WHISPER_TINY;
    if let Some(positions) = args.positions {
        shape.positions = usize::from(positions);
    }
    let mut graph = encoder_layer(&shape)?;
    let built = graph.to_string();
    let fired = passes::optimize(&mut graph)?;
    let optimised = graph.to_string();
    let plan = plan::plan(graph)?;
    let fired = if fired.is_empty() { "none".to_string() } else { fired.join(", ") };
    Ok(format!(
        "== encoder layer as built ==\n{built}\n\n\
         == optimised (passes that changed it: {fired}) ==\n{optimised}\n\n\
         == memory plan ==\n{}\n\n{}\n",
        plan.report,
        plan.placement_table()
    ))
}
