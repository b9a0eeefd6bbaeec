//! `susurrus bench --memory MINUTES,...`: peak memory against the recording's length. The clip
//! is repeated to each length as a 16-bit WAV in a temporary folder and transcribed by a child
//! `susurrus transcribe` with the same model, backend, threads and temperatures; its peak
//! resident memory comes from the kernel (`wait4`'s `ru_maxrss`) and its wall time from the
//! clock. Memory that grows with the length shows as the slope between the shortest and the
//! longest run (the samples alone would be 3.84 MB a minute).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

use crate::audio::SAMPLE_RATE;
use crate::backend::RunArgs;
use crate::error::{Error, Result};

/// One length's run.
#[derive(Debug, Serialize)]
pub struct MemoryRow {
    pub minutes: f64,
    pub peak_rss_mib: f64,
    pub wall_s: f64,
    pub real_time_factor: f64,
}

/// What `bench --memory` measured.
#[derive(Debug, Serialize)]
pub struct MemoryReport {
    pub backend: String,
    pub rows: Vec<MemoryRow>,
    /// (peak of the longest - peak of the shortest) / (their difference in minutes).
    pub mib_per_minute: Option<f64>,
}

/// Runs the curve for `minutes` (each > 0) of `clip` (16 kHz samples, not empty).
pub fn measure(run: &RunArgs, clip: &[f32], minutes: &[f64]) -> Result<MemoryReport> {
    if clip.is_empty() {
        return Err(Error::Usage("bench --memory: the clip has no samples to repeat".into()));
    }
    let exe =
        std::env::current_exe().map_err(|e| Error::Usage(format!("bench --memory: cannot find this program: {e}")))?;
    let dir = tempfile::tempdir().map_err(|e| Error::io(&std::env::temp_dir(), e))?;
    let mut rows = Vec::new();
    for &length in minutes {
        let wav = dir.path().join(format!("{length}-minutes.wav"));
        let samples = (length * 60.0 * f64::from(SAMPLE_RATE)).round() as usize;
        write_repeated_wav(&wav, clip, samples)?;
        eprintln!("bench --memory: transcribing {length} min");
        let mut command = Command::new(&exe);
        command.arg("transcribe").args(run.to_flags()).arg(&wav);
        let started = Instant::now();
        let peak_rss_mib = run_for_peak_rss(&mut command)?;
        let wall_s = started.elapsed().as_secs_f64();
        std::fs::remove_file(&wav).map_err(|e| Error::io(&wav, e))?;
        rows.push(MemoryRow { minutes: length, peak_rss_mib, wall_s, real_time_factor: wall_s / (length * 60.0) });
    }
    let mib_per_minute = match (rows.first(), rows.last()) {
        (Some(a), Some(b)) if b.minutes > a.minutes => {
            Some((b.peak_rss_mib - a.peak_rss_mib) / (b.minutes - a.minutes))
        }
        _ => None,
    };
    let backend = run.backend.name();
    Ok(MemoryReport { backend, rows, mib_per_minute })
}

/// `clip` repeated to `samples` samples, as a mono 16 kHz 16-bit WAV at `path`.
fn write_repeated_wav(path: &Path, clip: &[f32], samples: usize) -> Result<()> {
    let data = u32::try_from(samples * 2)
        .ok()
        .filter(|&d| d <= u32::MAX - 36)
        .ok_or_else(|| Error::Usage("bench --memory: at most 37 hours fit a WAV file".into()))?;
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = BufWriter::new(file);
    let mut header = Vec::with_capacity(44);
    header.extend_from_slice(b"RIFF");
    header.extend_from_slice(&(36 + data).to_le_bytes());
    header.extend_from_slice(b"WAVEfmt ");
    for field in [16u32, 1 | (1 << 16), SAMPLE_RATE, 2 * SAMPLE_RATE, 2 | (16 << 16)] {
        header.extend_from_slice(&field.to_le_bytes());
    }
    header.extend_from_slice(b"data");
    header.extend_from_slice(&data.to_le_bytes());
    let pcm: Vec<u8> = clip.iter().flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes()).collect();
    let mut write = || -> std::io::Result<()> {
        out.write_all(&header)?;
        let mut left = samples * 2;
        while left > 0 {
            let n = left.min(pcm.len());
            out.write_all(&pcm[..n])?;
            left -= n;
        }
        out.flush()
    };
    write().map_err(|e| Error::io(path, e))
}

/// Runs `command` (its output discarded, its errors shown) and returns its peak resident
/// memory in MiB; a failed run is an error.
#[cfg(unix)]
fn run_for_peak_rss(command: &mut Command) -> Result<f64> {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::Usage(format!("bench --memory: cannot run susurrus transcribe: {e}")))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value, filled in by `wait4`.
    let mut usage = unsafe { std::mem::zeroed::<libc::rusage>() };
    // SAFETY: `pid` is our child, not yet waited for; the pointers are to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if waited != pid {
        return Err(Error::Usage(format!("bench --memory: wait4: {}", std::io::Error::last_os_error())));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(Error::Usage(format!("bench --memory: susurrus transcribe failed (wait status {status})")));
    }
    // Linux counts kilobytes, macOS bytes.
    let bytes = if cfg!(target_os = "macos") { usage.ru_maxrss as f64 } else { usage.ru_maxrss as f64 * 1024.0 };
    Ok(bytes / (1024.0 * 1024.0))
}

#[cfg(not(unix))]
fn run_for_peak_rss(_: &mut Command) -> Result<f64> {
    Err(Error::Usage("bench --memory measures peak memory with wait4, which this system lacks".into()))
}

pub fn table(r: &MemoryReport) -> String {
    let mut out = format!("susurrus bench --memory: backend {}\n\n", r.backend);
    out += &format!("{:>10} {:>14} {:>10} {:>8}\n", "minutes", "peak RSS MiB", "wall s", "RTF");
    for row in &r.rows {
        out += &format!(
            "{:>10} {:>14.1} {:>10.1} {:>8.4}\n",
            row.minutes, row.peak_rss_mib, row.wall_s, row.real_time_factor
        );
    }
    if let Some(slope) = r.mib_per_minute {
        out += &format!("\ngrowth: {slope:.3} MiB per minute of audio (the samples alone: 3.66 MiB)\n");
    }
    out
}
