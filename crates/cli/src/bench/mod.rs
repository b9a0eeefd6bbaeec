//! `susurrus bench`: the encoder per 30 s window, a decoder step per token, a whole
//! transcription (real-time factor) and peak memory, on one backend. With `--profile` also
//! the time per op (CPU: a clock per step; CUDA: events, launching op by op; wgpu: timestamp
//! queries, a compute pass per dispatch).

pub mod memory;
pub mod ops;
pub mod stream;

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use susurrus_whisper::bench::{time_pieces, time_transcriptions};
use susurrus_whisper::{TranscribeOptions, Whisper};

use crate::backend::{self, BackendChoice, RunArgs};
use crate::error::{Error, Result};
use susurrus_cpu::{FastCpuBackend, Profile};
use susurrus_cuda::{CudaBackend, CudaOptions};
use susurrus_wgpu::{WgpuBackend, WgpuOptions};

/// The clip the benchmark transcribes unless `--audio` names another: the project's own
/// sample (espeak-ng speech, see scripts/make_sample.sh).
const SAMPLE: &[u8] = include_bytes!("../../../../samples/sample.wav");

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The model, the backend measured, its threads, and the temperatures of the end-to-end
    /// transcription (0 alone: greedy only, as a model with random weights needs, its text
    /// failing every threshold).
    #[command(flatten)]
    pub run: RunArgs,
    /// Timed repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Decoder steps per timed decoding run.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=200))]
    pub tokens: u32,
    /// Audio to transcribe for the end-to-end figure (default: the bundled sample).
    #[arg(long, value_name = "FILE")]
    pub audio: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also print time per op (CPU, CUDA: runs launch op by op; wgpu: every dispatch timed with
    /// timestamp queries, in a compute pass of its own).
    #[arg(long)]
    pub profile: bool,
    /// Instead: peak memory against the recording's length. The clip repeated to each of these
    /// lengths in minutes (separated by commas) is transcribed by `susurrus transcribe` with the
    /// same flags, and its peak RSS and wall time printed.
    #[arg(long, value_name = "MINUTES", value_delimiter = ',', value_parser = parse_minutes, conflicts_with = "profile")]
    pub memory: Vec<f64>,
    /// Instead: live transcription of these files, each streamed as if spoken (`susurrus
    /// stream`'s defaults): latency of every committed word to its first appearance and to its
    /// commit, the loop's real-time factor, and the committed text's word error against this
    /// engine's offline transcript of the file.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with_all = ["profile", "memory", "audio"])]
    pub stream: Vec<PathBuf>,
    /// --stream: without the VAD network (every hop is looked at, pauses included).
    #[arg(long, requires = "stream")]
    pub no_vad: bool,
    /// --stream: seconds of new audio between looks (as `susurrus stream --hop`). Default: 1.
    #[arg(long, value_name = "S", requires = "stream", value_parser = crate::args::parse_positive_time)]
    pub hop: Option<f64>,
}

fn parse_minutes(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(m) if m.is_finite() && m > 0.0 && m <= 24.0 * 60.0 => Ok(m),
        _ => Err("a length in minutes, above 0 and at most 1440".into()),
    }
}

/// What `bench` measured. Times are medians in milliseconds.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub backend: String,
    pub model: String,
    pub load_ms: f64,
    pub encoder_ms_per_window: f64,
    /// Greedy tokens as transcription decodes them: steps in chains where the backend feeds
    /// them on the device.
    pub decoder_ms_per_token: f64,
    /// One step per submission, its token fed by the host (what sampling does).
    pub decoder_ms_per_token_single: f64,
    /// A decoder step replayed back to back on the device (no host work between steps).
    pub decoder_device_ms_per_step: f64,
    /// Kernel launches of one encoder window and of one decoder step (wgpu: dispatches;
    /// `None` where the backend does not count them).
    pub encoder_launches: Option<usize>,
    pub decoder_step_launches: Option<usize>,
    /// Beam steps of `beams` beams, one host round trip each (`None` without beam graphs).
    pub beam_ms_per_step: Option<f64>,
    pub beams: usize,
    /// Whole transcriptions, greedy (`--beam-size 1`).
    pub transcribe_ms: f64,
    pub audio_seconds: f64,
    pub real_time_factor: f64,
    /// Whole transcriptions with the default beam search (`beam_size` beams).
    pub transcribe_beam_ms: f64,
    pub beam_real_time_factor: f64,
    pub beam_size: usize,
    pub peak_memory_mib: Option<f64>,
    pub profile: Vec<ProfileRow>,
}

#[derive(Debug, Serialize)]
pub struct ProfileRow {
    pub op: String,
    pub runs: usize,
    pub ms: f64,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if !args.stream.is_empty() {
        let vad = if args.no_vad { None } else { Some(crate::load::resolve_vad(None)?) };
        let report = crate::bench::stream::measure(&args.run, &args.stream, vad.as_deref(), args.hop)?;
        let text = if args.json {
            serde_json::to_string_pretty(&report).map_err(|e| Error::Usage(format!("cannot render JSON: {e}")))? + "\n"
        } else {
            crate::bench::stream::table(&report)
        };
        return crate::output::print(&text);
    }
    if !args.memory.is_empty() {
        let clip = clip(args)?.samples;
        let report = crate::bench::memory::measure(&args.run, &clip, &args.memory)?;
        let text = if args.json {
            serde_json::to_string_pretty(&report).map_err(|e| Error::Usage(format!("cannot render JSON: {e}")))? + "\n"
        } else {
            crate::bench::memory::table(&report)
        };
        return crate::output::print(&text);
    }
    let report = measure(args)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report).map_err(|e| Error::Usage(format!("cannot render JSON: {e}")))? + "\n"
    } else {
        table(&report)
    };
    crate::output::print(&text)
}

pub fn measure(args: &BenchArgs) -> Result<BenchReport> {
    let dir = crate::load::model_dir(&args.run)?;
    let profile = Profile::default();
    let backend: Box<dyn susurrus_core::exec::Backend> = match (args.profile, args.run.backend) {
        (false, _) => args.run.open()?,
        (true, BackendChoice::Cpu) => {
            Box::new(FastCpuBackend::new(backend::cpu_threads(args.run.threads))?.with_profile(profile.clone()))
        }
        (true, BackendChoice::Cuda) => {
            Box::new(CudaBackend::new(&CudaOptions::default())?.with_profile(profile.clone()))
        }
        (true, choice @ (BackendChoice::Wgpu | BackendChoice::WgpuBrowser | BackendChoice::WgpuBrowserF16)) => {
            let options = WgpuOptions { profile: Some(profile.clone()), ..choice.wgpu_options().unwrap_or_default() };
            Box::new(pollster::block_on(WgpuBackend::with_options(&options))?)
        }
        (true, BackendChoice::Auto) => {
            return Err(Error::Usage("--profile needs a backend named: cpu, wgpu, wgpu-browser or cuda".into()));
        }
    };
    let started = Instant::now();
    let mut whisper = pollster::block_on(Whisper::load_dir(backend, &dir))?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;

    let pcm = clip(args)?.samples;
    let runs = args.runs as usize;
    let started = Instant::now();
    let clock = move || started.elapsed().as_secs_f64() * 1e3;
    let pieces = pollster::block_on(time_pieces(&mut whisper, &pcm, runs, args.tokens as usize, &clock))?;
    let (encoder_launches, decoder_step_launches) = whisper.program_mut().launches();

    profile.clear();
    let mut beam = TranscribeOptions::default();
    beam.temperatures = args.run.temperatures_or(&beam.temperatures);
    let greedy = TranscribeOptions { beam_size: 1, ..beam.clone() };
    let transcribe = pollster::block_on(time_transcriptions(&mut whisper, &pcm, &greedy, runs, &clock))?;
    let transcribe_beam = pollster::block_on(time_transcriptions(&mut whisper, &pcm, &beam, runs, &clock))?;
    let audio_seconds = pcm.len() as f64 / f64::from(crate::audio::SAMPLE_RATE);
    let profile = profile
        .rows()
        .into_iter()
        // The profile saw the greedy transcriptions, the warm-up too.
        .map(|(op, n, t)| ProfileRow { op, runs: n / (runs + 1), ms: t.as_secs_f64() * 1e3 / (runs + 1) as f64 })
        .collect();
    Ok(BenchReport {
        backend: whisper.backend_name().to_string(),
        model: dir.display().to_string(),
        load_ms,
        encoder_ms_per_window: pieces.encoder_ms,
        decoder_ms_per_token: pieces.decoder_ms_per_token,
        decoder_ms_per_token_single: pieces.decoder_ms_per_token_single,
        decoder_device_ms_per_step: pieces.device_ms_per_step,
        encoder_launches,
        decoder_step_launches,
        beam_ms_per_step: pieces.beam_ms_per_step,
        beams: pieces.beams,
        transcribe_ms: transcribe,
        audio_seconds,
        real_time_factor: transcribe / 1e3 / audio_seconds,
        transcribe_beam_ms: transcribe_beam,
        beam_real_time_factor: transcribe_beam / 1e3 / audio_seconds,
        beam_size: beam.beam_size,
        peak_memory_mib: peak_memory_mib(),
        profile,
    })
}

/// The clip `--audio` names, or the bundled sample.
fn clip(args: &BenchArgs) -> Result<crate::audio::Decoded> {
    match &args.audio {
        Some(path) => crate::audio::decode_file(path),
        None => crate::audio::decode_bytes(SAMPLE.to_vec(), "bundled sample", Some("wav")),
    }
}

/// The process's peak resident memory (Linux: `VmHWM`; elsewhere not measured).
fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn table(r: &BenchReport) -> String {
    let mut out = format!("susurrus bench: backend {}, model {}\n\n", r.backend, r.model);
    out += &format!("{:<34} {:>12}\n", "measure", "median");
    let rows = [
        ("model load + compile", format!("{:.1} ms", r.load_ms)),
        ("encoder, one 30 s window", format!("{:.2} ms", r.encoder_ms_per_window)),
        ("decoder, one token", format!("{:.3} ms", r.decoder_ms_per_token)),
        ("decoder, one token per submission", format!("{:.3} ms", r.decoder_ms_per_token_single)),
        ("decoder step, device only", format!("{:.3} ms", r.decoder_device_ms_per_step)),
        (
            "kernels per window, per step",
            match (r.encoder_launches, r.decoder_step_launches) {
                (Some(e), Some(d)) => format!("{e}, {d}"),
                _ => "n/a".into(),
            },
        ),
        (
            &*format!("decoder, one step of {} beams", r.beams),
            r.beam_ms_per_step.map_or("n/a".into(), |ms| format!("{ms:.3} ms")),
        ),
        (&*format!("transcribe {:.1} s, greedy", r.audio_seconds), format!("{:.1} ms", r.transcribe_ms)),
        ("real-time factor, greedy", format!("{:.4}", r.real_time_factor)),
        (
            &*format!("transcribe {:.1} s, beam {}", r.audio_seconds, r.beam_size),
            format!("{:.1} ms", r.transcribe_beam_ms),
        ),
        (&*format!("real-time factor, beam {}", r.beam_size), format!("{:.4}", r.beam_real_time_factor)),
        ("peak memory", r.peak_memory_mib.map_or("n/a".into(), |m| format!("{m:.0} MiB"))),
    ];
    for (what, value) in rows {
        out += &format!("{what:<34} {value:>12}\n");
    }
    if !r.profile.is_empty() {
        out += &format!("\nper op, one transcription of the clip ({} backend)\n", r.backend);
        out += &format!("{:<60} {:>6} {:>10}\n", "op (output type)", "runs", "ms");
        for p in &r.profile {
            out += &format!("{:<60} {:>6} {:>10.2}\n", p.op, p.runs, p.ms);
        }
    }
    out
}
