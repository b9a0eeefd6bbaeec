//! The `susurrus` command, in layers (`crates/testkit/tests/layering.rs` checks them): `error`
//! at the bottom; the shared pieces (`args` parsers, `backend` choice, `audio` decoding,
//! `output` formats, `destination` checks, `handover` of a lost GPU to a new process, `hub`'s
//! model names and the Hugging Face cache); `load`
//! (the model folder and loading it); then the subcommands, which import those and never one
//! another: `commands/` (transcribe, stream, convert, info, models, demo), `bench/` (bench, bench-ops)
//! and `serve/` (the demo page and the transcription API). `main.rs` only parses and reports
//! errors.

pub mod error;

pub mod args;
pub mod audio;
pub mod backend;
pub mod destination;
pub mod handover;
pub mod hub;
pub mod output;

pub mod load;

pub mod bench;
pub mod commands;
pub mod serve;

use clap::{Parser, Subcommand};
pub use error::{Error, Result};

use commands::{convert, demo, info, models, stream, transcribe};

/// Whisper speech recognition on Susurrus's own graph compiler and runtime.
#[derive(Debug, Parser)]
#[command(name = "susurrus", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Transcribe audio files (WAV, FLAC, MP3, M4A, MP4, WebM, OGG ...; `-` reads standard input).
    Transcribe(Box<transcribe::TranscribeArgs>),
    /// Time the encoder, a decoder step and a whole transcription on a backend.
    Bench(bench::BenchArgs),
    /// Convert a CTranslate2 model folder to a Hugging Face folder with f16 safetensors.
    Convert(convert::ConvertArgs),
    /// List GPU adapters with their limits and features, and describe a model.
    Info(info::InfoArgs),
    /// List the model names --model takes, the repository of each, and which the Hugging Face
    /// cache holds.
    Models(models::ModelsArgs),
    /// Build a Whisper-tiny-shaped encoder layer, optimise it and print its IR and memory plan.
    ///
    /// Prints the graph as built, the graph after the optimisation passes (with the passes
    /// that changed it), the arena memory report and where every value is stored.
    Demo(demo::DemoArgs),
    /// Time the ops of a Whisper size (encoder at 1500 positions, a greedy and a beam-search
    /// decoder step) on the backends named and print time, GFLOP/s and GB/s per op.
    BenchOps(bench::ops::BenchOpsArgs),
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

/// Runs the parsed command; what it prints goes to standard output (progress to stderr).
pub fn run(cli: &Cli) -> Result<()> {
    // What these commands print is their result: a closed standard output (`>&-`) is refused
    // before any work. `transcribe` and `stream` check it themselves, with their own advice;
    // `serve` prints only where it listens.
    if matches!(
        cli.command,
        Command::Bench(_)
            | Command::Convert(_)
            | Command::Info(_)
            | Command::Models(_)
            | Command::Demo(_)
            | Command::BenchOps(_)
    ) {
        destination::check_stdout("redirect it to a file, or to /dev/null to discard what the command prints")?;
    }
    match &cli.command {
        Command::Transcribe(args) => transcribe::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Info(args) => info::run(args),
        Command::Models(args) => models::run(args),
        Command::Demo(args) => demo::run(args),
        Command::BenchOps(args) => bench::ops::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Stream(args) => stream::run(args),
    }
}
