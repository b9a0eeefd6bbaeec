//! The `susurrus` command and native library: audio decoding, the fast CPU backend, backend
//! choice, and one module per subcommand. `main.rs` only parses and reports errors.

pub mod audio;
pub mod backend;
pub mod bench;
pub mod bench_memory;
pub mod bench_ops;
pub mod bench_stream;
pub mod convert;
pub mod destination;
pub mod error;
pub mod handover;
pub mod info;
pub mod model_dir;
pub mod output;
pub mod serve;
pub mod stream;
pub mod transcribe;

use std::io::Write;

use clap::{Args, Parser, Subcommand};
pub use error::{Error, Result};
use susurrus_core::{passes, plan};
use susurrus_whisper::graphs::demo::{EncoderLayerShape, encoder_layer};

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
    /// Transcribe audio files (WAV, FLAC, MP3, OGG Vorbis; `-` reads standard input).
    Transcribe(Box<transcribe::TranscribeArgs>),
    /// Time the encoder, a decoder step and a whole transcription on a backend.
    Bench(bench::BenchArgs),
    /// Convert a CTranslate2 model folder to a Hugging Face folder with f16 safetensors.
    Convert(convert::ConvertArgs),
    /// List GPU adapters with their limits and features, and describe a model.
    Info(info::InfoArgs),
    /// Build a Whisper-tiny-shaped encoder layer, optimise it and print its IR and memory plan.
    ///
    /// Prints the graph as built, the graph after the optimisation passes (with the passes
    /// that changed it), the arena memory report and where every value is stored.
    Demo(DemoArgs),
    /// Time the ops of Whisper tiny (encoder at 1500 positions, one decoder step) on the wgpu
    /// and CPU executors and print time, GFLOP/s and GB/s per op.
    BenchOps(BenchOpsArgs),
    /// Serve the web demo (www/) and the model folder over HTTP on 127.0.0.1, and with --api an
    /// OpenAI-compatible transcription API.
    ///
    /// The demo page comes from --root (default: www/, which the repository root holds) and the
    /// model folder is served at /model/. With --api the model also answers OpenAI's audio API:
    /// POST /v1/audio/transcriptions and /v1/audio/translations (a multipart form with the audio
    /// file, as OpenAI's client libraries send it), GET /v1/models, /health and /metrics; the
    /// demo page is then optional: without --root and without www/ only the API is served.
    Serve(serve::ServeArgs),
    /// Transcribe audio live as it arrives (standard input, a named pipe, or a file with
    /// --realtime): partial text as it is heard, committed text that stays.
    Stream(Box<stream::StreamArgs>),
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

/// Runs the parsed command; what it prints goes to standard output (progress to stderr).
pub fn run(cli: &Cli) -> Result<()> {
    match &cli.command {
        Command::Transcribe(args) => transcribe::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Info(args) => info::run(args),
        Command::Demo(args) => print(&demo(args)?),
        Command::BenchOps(args) => print(&bench_ops::bench_ops(args.backend, args.f16)?),
        Command::Serve(args) => serve::run(args),
        Command::Stream(args) => stream::run(args),
    }
}

/// Writes `text` to standard output.
pub(crate) fn print(text: &str) -> Result<()> {
    std::io::stdout().lock().write_all(text.as_bytes()).map_err(|e| Error::io(std::path::Path::new("<stdout>"), e))
}

/// `susurrus demo`: build, optimise and plan one encoder layer, and render every stage.
pub fn demo(args: &DemoArgs) -> susurrus_core::Result<String> {
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
