//! `susurrus bench --stream FILE...`: live transcription measured. Each file is streamed as
//! if spoken (100 ms chunks at speech speed, the looks timed on the wall clock and time moved
//! on by what they took, [`replay`]); its committed text is compared with this engine's offline
//! transcript of the same file with the same decoding (greedy), and every committed word's
//! latency — from its end in the audio to its first appearance and to its commit — is
//! summarised with the streaming loop's real-time factor.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use susurrus_whisper::Whisper;
use susurrus_whisper::live::replay::replay;
use susurrus_whisper::live::{LiveOptions, LiveTranscriber};
use susurrus_whisper::text::wer::word_error_rate;

use crate::backend::RunArgs;
use crate::error::Result;

/// Samples per pushed chunk: 100 ms, as a microphone delivers them.
const CHUNK: usize = 1600;

/// One file's figures; latencies in seconds after the word's end in the audio.
#[derive(Debug, Serialize)]
pub struct StreamRow {
    pub file: String,
    pub audio_seconds: f64,
    pub words: usize,
    pub wer_vs_offline: f64,
    pub first_seen_median: f64,
    pub first_seen_p90: f64,
    pub committed_median: f64,
    pub committed_p90: f64,
    pub real_time_factor: f64,
    pub offline_real_time_factor: f64,
}

#[derive(Debug, Serialize)]
pub struct StreamReport {
    pub backend: String,
    pub hop: f64,
    pub rows: Vec<StreamRow>,
}

/// Streams each file on the backend `run` names, with the VAD (`vad`) when given, looking every
/// `hop` seconds (the default's when `None`).
pub fn measure(
    run: &RunArgs,
    files: &[PathBuf],
    vad: Option<&std::path::Path>,
    hop: Option<f64>,
) -> Result<StreamReport> {
    let mut options = LiveOptions { vad: vad.is_some(), ..LiveOptions::default() };
    options.hop = hop.unwrap_or(options.hop);
    options.validate()?;
    let dir = crate::load::model_dir(run)?;
    let (mut whisper, _) = crate::load::load_model(run, &dir, vad)?;
    options.transcribe.temperatures = run.temperatures_or(&options.transcribe.temperatures);
    let started = Instant::now();
    let mut clock = move || started.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for file in files {
        let pcm = crate::audio::decode_file(file)?.samples;
        let offline_started = Instant::now();
        let offline = offline_text(&mut whisper, &pcm, &options)?;
        let offline_seconds = offline_started.elapsed().as_secs_f64();
        let mut live = LiveTranscriber::new(&whisper, options.clone())?;
        let replayed = pollster::block_on(replay(&mut whisper, &mut live, &pcm, CHUNK, &mut clock))?;
        let latencies = replayed.latencies();
        let mut first: Vec<f64> = latencies.iter().map(|l| l.first_seen).collect();
        let mut committed: Vec<f64> = latencies.iter().map(|l| l.committed).collect();
        rows.push(StreamRow {
            file: file.display().to_string(),
            audio_seconds: replayed.duration,
            words: latencies.len(),
            wer_vs_offline: word_error_rate(&offline, &replayed.committed_text()),
            first_seen_median: quantile(&mut first, 0.5),
            first_seen_p90: quantile(&mut first, 0.9),
            committed_median: quantile(&mut committed, 0.5),
            committed_p90: quantile(&mut committed, 0.9),
            real_time_factor: replayed.real_time_factor(),
            offline_real_time_factor: offline_seconds / replayed.duration.max(f64::MIN_POSITIVE),
        });
    }
    Ok(StreamReport { backend: whisper.backend_name().to_string(), hop: options.hop, rows })
}

/// The offline transcript with the stream's decoding options (and the VAD as a whole
/// recording's when the stream has it).
fn offline_text(whisper: &mut Whisper, pcm: &[f32], options: &LiveOptions) -> Result<String> {
    let offline = susurrus_whisper::TranscribeOptions { vad: options.vad, ..options.transcribe.clone() };
    let mut ignore = |_: susurrus_whisper::Event| std::ops::ControlFlow::Continue(());
    Ok(pollster::block_on(whisper.transcribe(pcm, &offline, &mut ignore))?.text)
}

/// The `q` quantile (nearest rank) of `values`; 0 for none.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

pub fn table(report: &StreamReport) -> String {
    let mut out = format!(
        "susurrus bench --stream: backend {}, hop {} s; latency = seconds after the word's end in the audio\n\n",
        report.backend, report.hop
    );
    out += &format!(
        "{:<28} {:>7} {:>6} {:>8} {:>15} {:>15} {:>7} {:>8}\n",
        "file", "audio s", "words", "WER", "first seen p50/90", "committed p50/90", "RTF", "offline"
    );
    for r in &report.rows {
        let name = std::path::Path::new(&r.file).file_name().map_or(r.file.clone(), |n| n.to_string_lossy().into());
        out += &format!(
            "{:<28} {:>7.1} {:>6} {:>7.1}% {:>7.2} / {:<5.2} {:>7.2} / {:<5.2} {:>7.3} {:>8.3}\n",
            name,
            r.audio_seconds,
            r.words,
            r.wer_vs_offline * 100.0,
            r.first_seen_median,
            r.first_seen_p90,
            r.committed_median,
            r.committed_p90,
            r.real_time_factor,
            r.offline_real_time_factor
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_are_nearest_ranks() {
        let mut v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(quantile(&mut v, 0.5), 3.0);
        assert_eq!(quantile(&mut v, 0.9), 5.0);
        assert_eq!(quantile(&mut v, 0.0), 1.0);
        assert_eq!(quantile(&mut [], 0.5), 0.0);
    }
}
