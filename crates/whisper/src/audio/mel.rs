//! Whisper's front end: 16 kHz audio to the log-mel spectrogram the encoder reads.
//!
//! The steps follow the reference (OpenAI's `log_mel_spectrogram`, faster-whisper's
//! `FeatureExtractor`):
//! 1. reflect-pad `N_FFT / 2` samples at both ends (`torch.stft(center=True)`);
//! 2. frames of `N_FFT` samples every `HOP_LENGTH`, times a periodic Hann window;
//! 3. power spectrum `|FFT|^2` of each frame (201 bins); the last frame is dropped, so
//!    `n` samples give `n / HOP_LENGTH` frames;
//! 4. a slaney-style mel filterbank (librosa's `filters.mel(htk=False, norm="slaney")`,
//!    computed here from its formula);
//! 5. `log10(max(x, 1e-10))`, floored at the spectrogram's maximum minus 8, then `(x + 4) / 4`.
//!
//! The encoder takes windows of 30 s ([`CHUNK_FRAMES`] frames): [`pad_or_trim`] cuts or
//! zero-pads a spectrogram to that length as faster-whisper does per window, and
//! [`pad_or_trim_samples`] does the same to audio before the spectrogram, as OpenAI's
//! single-window `transcribe` example does.

use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

use crate::audio::{Audio, Pcm};
use crate::error::{Error, Result};
use susurrus_core::tensor::Tensor;

use crate::constants::{CHUNK_FRAMES, HOP_LENGTH, N_FFT, SAMPLE_RATE};

/// Frequency bins of a real FFT of `N_FFT` points (0 Hz to Nyquist).
pub const N_BINS: usize = N_FFT / 2 + 1;

/// Mel power below this is clamped before the logarithm.
const POWER_FLOOR: f32 = 1e-10;
/// Log-mel values more than this many decades below the maximum are raised to it.
const DYNAMIC_RANGE: f32 = 8.0;
/// Frames transformed per FFT call: enough to amortise the call, small enough to stay in cache.
const FRAMES_PER_BLOCK: usize = 64;

/// Frames of the spectrogram of `n_samples` samples.
pub fn frame_count(n_samples: usize) -> usize {
    n_samples / HOP_LENGTH
}

/// The slaney mel scale (librosa's default, `htk=False`): linear below 1 kHz at 200/3 Hz per
/// mel, logarithmic above with 27 mels per factor 6.4.
fn hz_to_mel(hz: f64) -> f64 {
    let (f_sp, min_log_hz, min_log_mel, log_step) = slaney_constants();
    if hz < min_log_hz { hz / f_sp } else { min_log_mel + (hz / min_log_hz).ln() / log_step }
}

/// The inverse of [`hz_to_mel`].
fn mel_to_hz(mel: f64) -> f64 {
    let (f_sp, min_log_hz, min_log_mel, log_step) = slaney_constants();
    if mel < min_log_mel { mel * f_sp } else { min_log_hz * (log_step * (mel - min_log_mel)).exp() }
}

/// (Hz per mel in the linear part, start of the log part in Hz and in mels, log step).
fn slaney_constants() -> (f64, f64, f64, f64) {
    let f_sp = 200.0 / 3.0;
    let min_log_hz = 1000.0;
    (f_sp, min_log_hz, min_log_hz / f_sp, 6.4f64.ln() / 27.0)
}

/// One triangular mel filter, stored from its first non-zero bin.
#[derive(Clone, Debug)]
struct Filter {
    first_bin: usize,
    weights: Vec<f32>,
}

/// Triangles between mel-spaced corner frequencies from 0 Hz to Nyquist, each scaled by
/// `2 / width` so that every filter has unit area in Hz (slaney normalisation). Computed in
/// f64 and rounded once to f32, as librosa and faster-whisper do.
fn mel_filters(n_mels: usize) -> Vec<Filter> {
    let nyquist = SAMPLE_RATE as f64 / 2.0;
    let max_mel = hz_to_mel(nyquist);
    let corners: Vec<f64> = (0..n_mels + 2).map(|i| mel_to_hz(max_mel * i as f64 / (n_mels + 1) as f64)).collect();
    let bin_hz = SAMPLE_RATE as f64 / N_FFT as f64;
    corners
        .windows(3)
        .map(|c| {
            let (low, center, high) = (c[0], c[1], c[2]);
            let scale = 2.0 / (high - low);
            let weight = |bin: usize| {
                let f = bin as f64 * bin_hz;
                let rising = (f - low) / (center - low);
                let falling = (high - f) / (high - center);
                (rising.min(falling).max(0.0) * scale) as f32
            };
            let nonzero: Vec<usize> = (0..N_BINS).filter(|&bin| weight(bin) > 0.0).collect();
            match (nonzero.first(), nonzero.last()) {
                (Some(&first), Some(&last)) => {
                    Filter { first_bin: first, weights: (first..=last).map(weight).collect() }
                }
                _ => Filter { first_bin: 0, weights: Vec::new() },
            }
        })
        .collect()
}

/// The log-mel front end, planned once for a mel count: FFT plan, window and filterbank.
#[derive(Clone)]
pub struct LogMel {
    n_mels: usize,
    /// Periodic Hann window of `N_FFT` points.
    window: Vec<f32>,
    /// Complex FFT of `N_FFT / 2` points; a real frame is packed into it as (even, odd) pairs.
    fft: Arc<dyn Fft<f32>>,
    /// `exp(-2 pi i k / N_FFT)` for k in 0..N_BINS, to unpack the half-length FFT.
    twiddles: Vec<Complex<f32>>,
    filters: Vec<Filter>,
}

impl std::fmt::Debug for LogMel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogMel").field("n_mels", &self.n_mels).finish_non_exhaustive()
    }
}

impl LogMel {
    /// A front end producing `n_mels` bands: 80 (Whisper up to large-v2) or 128 (large-v3).
    pub fn new(n_mels: usize) -> Result<LogMel> {
        if n_mels != 80 && n_mels != 128 {
            return Err(Error::bad_argument(format!("log-mel: {n_mels} mel bands requested; Whisper uses 80 or 128")));
        }
        let window = (0..N_FFT)
            .map(|n| (0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64).cos()) as f32)
            .collect();
        let twiddles = (0..N_BINS)
            .map(|k| {
                let angle = -2.0 * std::f64::consts::PI * k as f64 / N_FFT as f64;
                Complex::new(angle.cos() as f32, angle.sin() as f32)
            })
            .collect();
        let fft = FftPlanner::new().plan_fft_forward(N_FFT / 2);
        Ok(LogMel { n_mels, window, fft, twiddles, filters: mel_filters(n_mels) })
    }

    /// Number of mel bands.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// The filterbank as a dense `[n_mels, N_BINS]` matrix (Whisper's `mel_filters`).
    pub fn filterbank(&self) -> Tensor {
        let mut dense = vec![0.0f32; self.n_mels * N_BINS];
        for (row, filter) in dense.chunks_exact_mut(N_BINS).zip(&self.filters) {
            row[filter.first_bin..filter.first_bin + filter.weights.len()].copy_from_slice(&filter.weights);
        }
        Tensor::f32([self.n_mels, N_BINS], dense).expect("n_mels * N_BINS values")
    }

    /// The log-mel spectrogram of 16 kHz mono samples: `[n_mels, samples.len() / HOP_LENGTH]`
    /// f32. Fewer than `HOP_LENGTH` samples (empty audio included) give zero frames, an empty
    /// `[n_mels, 0]` tensor. A sample that is NaN or infinite is an error.
    pub fn compute(&self, samples: &[f32]) -> Result<Tensor> {
        let audio = Pcm(samples);
        let spectrogram = self.spectrogram(&audio, 0)?;
        spectrogram.window(0, spectrogram.frames(), spectrogram.frames())
    }

    /// The spectrogram of `audio` followed by `tail` zeros (the reference appends 160 before
    /// its spectrogram), to be read a window at a time ([`Spectrogram::window`]): nothing of
    /// the whole spectrogram is kept but its maximum, found here in one pass over the audio,
    /// a window's stretch at a time. A sample that a frame reads and that is NaN or infinite is
    /// an error.
    pub fn spectrogram<'a>(&'a self, audio: &'a dyn Audio, tail: usize) -> Result<Spectrogram<'a>> {
        let signal = Signal { audio, len: audio.len() + tail };
        let frames = frame_count(signal.len);
        let mut max = f32::NEG_INFINITY;
        for first in (0..frames).step_by(CHUNK_FRAMES) {
            let count = CHUNK_FRAMES.min(frames - first);
            let block = signal.block(first, count)?;
            if let Some(i) = block.samples.iter().position(|s| !s.is_finite()) {
                let index = block.lo + i;
                return Err(Error::bad_argument(format!("log-mel: audio sample {index} is {}", block.samples[i])));
            }
            let logs = self.log_energies(&block, first, count);
            max = logs.iter().copied().fold(max, f32::max);
        }
        Ok(Spectrogram { mel: self, signal, frames, floor: max - DYNAMIC_RANGE })
    }

    /// `log10(max(mel energy, POWER_FLOOR))` of frames `first..first + count` (read from
    /// `block`), band-major (`[n_mels, count]`).
    fn log_energies(&self, block: &Block, first: usize, count: usize) -> Vec<f32> {
        let power = self.power_spectrum(block, first, count);
        let mut logs = vec![0.0f32; self.n_mels * count];
        for (row, filter) in logs.chunks_exact_mut(count.max(1)).zip(&self.filters) {
            for (out, spectrum) in row.iter_mut().zip(power.chunks_exact(N_BINS)) {
                let bins = &spectrum[filter.first_bin..filter.first_bin + filter.weights.len()];
                let energy: f32 = bins.iter().zip(&filter.weights).map(|(p, w)| p * w).sum();
                *out = energy.max(POWER_FLOOR).log10();
            }
        }
        logs
    }

    /// `|FFT|^2` of frames `first..first + count` of the reflect-padded, windowed signal (read
    /// from `block`), frame after frame (`count * N_BINS` values).
    fn power_spectrum(&self, source: &Block, first: usize, count: usize) -> Vec<f32> {
        let mut power = vec![0.0f32; count * N_BINS];
        let half = N_FFT / 2;
        let mut frame = [0.0f32; N_FFT];
        let mut buffer = vec![Complex::new(0.0f32, 0.0); FRAMES_PER_BLOCK * half];
        let mut scratch = vec![Complex::new(0.0f32, 0.0); self.fft.get_inplace_scratch_len()];
        for block_first in (0..count).step_by(FRAMES_PER_BLOCK) {
            let block_count = FRAMES_PER_BLOCK.min(count - block_first);
            let block = &mut buffer[..block_count * half];
            // Pack each real frame as z[m] = x[2m] + i x[2m+1].
            for (f, z) in block.chunks_exact_mut(half).enumerate() {
                source.frame(first + block_first + f, &mut frame);
                for ((z, x), w) in z.iter_mut().zip(frame.chunks_exact(2)).zip(self.window.chunks_exact(2)) {
                    *z = Complex::new(x[0] * w[0], x[1] * w[1]);
                }
            }
            self.fft.process_with_scratch(block, &mut scratch);
            for (f, z) in block.chunks_exact(half).enumerate() {
                let at = (block_first + f) * N_BINS;
                self.unpack_power(z, &mut power[at..at + N_BINS]);
            }
        }
        power
    }

    /// The power spectrum of a real frame from the half-length FFT `z` of its packed form:
    /// the even and odd samples' spectra are `E = (Z[k] + conj Z[M-k]) / 2` and
    /// `O = (Z[k] - conj Z[M-k]) / 2i`, and `X[k] = E + exp(-2 pi i k / N) O`.
    fn unpack_power(&self, z: &[Complex<f32>], out: &mut [f32]) {
        let m = z.len();
        for (k, (out, twiddle)) in out.iter_mut().zip(&self.twiddles).enumerate() {
            let zk = z[k % m];
            let zc = z[(m - k % m) % m].conj();
            let even = (zk + zc) * 0.5;
            let odd = (zk - zc) * Complex::new(0.0, -0.5);
            *out = (even + *twiddle * odd).norm_sqr();
        }
    }
}

/// A recording's log-mel spectrogram read a window at a time. Frame `t` depends only on the
/// samples within `N_FFT / 2` of `t * HOP_LENGTH` and on the whole spectrogram's maximum
/// (the floor of the dynamic range), so each window is computed when it is needed, from its
/// own stretch of the audio, bit for bit the frames of the whole spectrogram: memory holds one
/// window, neither the recording's spectrogram nor its samples.
pub struct Spectrogram<'a> {
    mel: &'a LogMel,
    signal: Signal<'a>,
    frames: usize,
    /// The maximum log energy minus [`DYNAMIC_RANGE`].
    floor: f32,
}

impl Spectrogram<'_> {
    /// Frames of the whole spectrogram.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Frames `start..start + len` (cut at the end of the spectrogram), normalised as the
    /// reference does, then zero-padded to `width` frames: `[n_mels, width]`, as the reference
    /// pads each window of its spectrogram. A failed read of the audio is an error.
    pub fn window(&self, start: usize, len: usize, width: usize) -> Result<Tensor> {
        let len = len.min(width).min(self.frames.saturating_sub(start));
        let block = self.signal.block(start, len)?;
        let logs = self.mel.log_energies(&block, start, len);
        let mut out = vec![0.0f32; self.mel.n_mels * width];
        for (row, logs) in out.chunks_exact_mut(width.max(1)).zip(logs.chunks_exact(len.max(1))) {
            for (out, v) in row.iter_mut().zip(logs) {
                *out = (v.max(self.floor) + 4.0) / 4.0;
            }
        }
        Ok(Tensor::f32([self.mel.n_mels, width], out)?)
    }
}

/// The audio followed by zeros up to `len` samples, reflect-padded by `N_FFT / 2` at both
/// ends (`torch.stft(center=True)`), read a stretch of frames at a time ([`Signal::block`])
/// without a padded copy.
struct Signal<'a> {
    audio: &'a dyn Audio,
    len: usize,
}

impl Signal<'_> {
    /// The samples that frames `first..first + count` read, their reflections included.
    ///
    /// Frame `f` reads positions `f * HOP_LENGTH - pad .. f * HOP_LENGTH + pad` of the signal
    /// (`pad = N_FFT / 2`). Positions before 0 reflect to `1..=pad`, inside the stretch when
    /// it starts at 0; positions at or past the end reflect to at least `len - 1 - pad`, which
    /// is at most one sample before the first frame's first position (the last frame starts
    /// at or before `len`). A signal no longer than `N_FFT + 2` may reflect back and forth and
    /// is read whole.
    fn block(&self, first: usize, count: usize) -> Result<Block> {
        let pad = N_FFT / 2;
        let n = self.audio.len();
        let (lo, hi) = if count == 0 {
            (0, 0)
        } else if self.len <= N_FFT + 2 {
            (0, n)
        } else {
            let hi = ((first + count - 1) * HOP_LENGTH + pad + 1).min(n);
            ((first * HOP_LENGTH).saturating_sub(pad + 1).min(hi), hi)
        };
        Ok(Block { lo, samples: self.audio.read_range(lo, hi)?, audio_len: n, len: self.len })
    }
}

/// Samples `lo..lo + samples.len()` of a signal of `len` samples (`audio_len` of audio, then
/// zeros), enough for the frames it was read for.
struct Block {
    lo: usize,
    samples: Vec<f32>,
    audio_len: usize,
    len: usize,
}

impl Block {
    /// The `N_FFT` samples of frame `f` of the padded signal.
    fn frame(&self, f: usize, out: &mut [f32; N_FFT]) {
        let pad = N_FFT / 2;
        let start = f * HOP_LENGTH;
        if start >= pad
            && start - pad + N_FFT <= self.audio_len
            && let Some(at) = (start - pad).checked_sub(self.lo)
            && let Some(samples) = self.samples.get(at..at + N_FFT)
        {
            out.copy_from_slice(samples);
            return;
        }
        for (k, out) in out.iter_mut().enumerate() {
            let i = reflect_index(start + k, self.len, pad);
            *out = match i.checked_sub(self.lo) {
                Some(at) if i < self.audio_len => self.samples.get(at).copied().unwrap_or(0.0),
                _ => 0.0,
            };
        }
    }
}

/// The index into a signal of `n` samples that position `j` of its reflect padding by `pad`
/// reads, the edge sample not repeated (numpy's and torch's "reflect"); signals shorter than
/// `pad` reflect back and forth, as numpy does, and one of fewer than two samples repeats
/// its first.
fn reflect_index(j: usize, n: usize, pad: usize) -> usize {
    if n < 2 {
        return 0;
    }
    let period = 2 * (n - 1);
    let m = (j + period * pad.div_ceil(period) - pad) % period;
    if m < n { m } else { period - m }
}

/// Cuts `samples` to `len` or appends zeros up to it.
pub fn pad_or_trim_samples(samples: &[f32], len: usize) -> Vec<f32> {
    let mut out = samples[..samples.len().min(len)].to_vec();
    out.resize(len, 0.0);
    out
}

/// Cuts a `[n_mels, frames]` spectrogram to `frames` frames or pads it with zeros, as
/// faster-whisper prepares each encoder window (`frames` = [`CHUNK_FRAMES`]).
pub fn pad_or_trim(mel: &Tensor, frames: usize) -> Result<Tensor> {
    let (n_mels, have) = match *mel.shape().dims() {
        [n_mels, have] => (n_mels, have),
        _ => {
            return Err(Error::bad_argument(format!(
                "pad_or_trim: expected a [n_mels, frames] tensor, got {}",
                mel.shape()
            )));
        }
    };
    let values =
        mel.as_f32().ok_or_else(|| Error::bad_argument(format!("pad_or_trim: expected f32, got {:?}", mel.dtype())))?;
    let keep = have.min(frames);
    let mut out = vec![0.0f32; n_mels * frames];
    for (dst, src) in out.chunks_exact_mut(frames.max(1)).zip(values.chunks_exact(have.max(1))) {
        dst[..keep].copy_from_slice(&src[..keep]);
    }
    Ok(Tensor::f32([n_mels, frames], out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::CHUNK_SAMPLES;

    /// Naive DFT power in f64: the independent reference for the packed real FFT.
    fn dft_power(frame: &[f64]) -> Vec<f64> {
        let n = frame.len();
        (0..n / 2 + 1)
            .map(|k| {
                let (mut re, mut im) = (0.0, 0.0);
                for (t, x) in frame.iter().enumerate() {
                    let angle = -2.0 * std::f64::consts::PI * (k * t % n) as f64 / n as f64;
                    re += x * angle.cos();
                    im += x * angle.sin();
                }
                re * re + im * im
            })
            .collect()
    }

    /// Deterministic test audio shared with tests/golden/mel_reference.py: three sines and a
    /// 32-bit LCG's noise after `silent` samples of silence, computed in f64, stored as f32.
    fn test_signal(n: usize, silent: usize) -> Vec<f32> {
        let mut state: u32 = 12345;
        (0..n)
            .map(|i| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                if i < silent {
                    return 0.0;
                }
                let t = i as f64 / SAMPLE_RATE as f64;
                let tau = 2.0 * std::f64::consts::PI;
                let noise = ((state >> 8) as f64 / (1u32 << 24) as f64 - 0.5) * 0.05;
                let v = 0.4 * (tau * 440.0 * t).sin()
                    + 0.25 * (tau * 1000.0 * t + 0.5).sin()
                    + 0.1 * (tau * 3125.5 * t).sin()
                    + noise;
                v as f32
            })
            .collect()
    }

    fn mel_at(mel: &Tensor, band: usize, frame: usize) -> f32 {
        let frames = mel.shape().dims()[1];
        mel.as_f32().unwrap()[band * frames + frame]
    }

    #[test]
    fn slaney_scale_known_points() {
        // Linear part: 200/3 Hz per mel; 1 kHz is mel 15; 6.4 kHz is 27 mels further.
        assert!((hz_to_mel(200.0) - 3.0).abs() < 1e-12);
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
        assert!((hz_to_mel(6400.0) - 42.0).abs() < 1e-12);
        // Nyquist, as faster-whisper writes it.
        assert!((hz_to_mel(8000.0) - 45.245640471924965).abs() < 1e-12);
        for hz in [0.0, 440.0, 999.0, 1000.0, 3000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9);
        }
    }

    #[test]
    fn filter_peaks_follow_the_mel_formula() {
        for n_mels in [80, 128] {
            let bank = LogMel::new(n_mels).unwrap().filterbank();
            let w = bank.as_f32().unwrap();
            for (i, row) in w.chunks_exact(N_BINS).enumerate() {
                // Center of filter i: mel (i + 1) * 45.2456 / (n_mels + 1), turned to Hz with
                // the closed form 1000 * 6.4^((m - 15) / 27) above 1 kHz.
                let m = (i + 1) as f64 * 45.245640471924965 / (n_mels + 1) as f64;
                let center = if m < 15.0 { m * 200.0 / 3.0 } else { 1000.0 * 6.4f64.powf((m - 15.0) / 27.0) };
                let peak = (0..N_BINS).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
                assert!(row[peak] > 0.0, "filter {i} of {n_mels} is empty");
                assert!(
                    (peak as f64 * 40.0 - center).abs() <= 40.0,
                    "filter {i} of {n_mels}: peak at bin {peak}, center {center} Hz"
                );
            }
        }
    }

    #[test]
    fn filters_have_unit_area_in_hz() {
        // Slaney normalisation: triangle height 2 / width, area 1. Summing the 40 Hz bins
        // approximates the area well once a filter spans many bins (the upper filters).
        let bank = LogMel::new(80).unwrap().filterbank();
        let w = bank.as_f32().unwrap();
        let mut checked = 0;
        for (i, row) in w.chunks_exact(N_BINS).enumerate() {
            let nonzero = row.iter().filter(|&&v| v > 0.0).count();
            if nonzero >= 8 {
                let area: f32 = row.iter().sum::<f32>() * 40.0;
                assert!((area - 1.0).abs() < 0.02, "filter {i}: area {area}");
                checked += 1;
            }
        }
        assert!(checked >= 15, "only {checked} wide filters");
        // The lowest filter: corners 0, 37.24 and 74.48 Hz; only bin 1 (40 Hz) is inside,
        // on the falling side: (74.48 - 40) / 37.24 * 2 / 74.48.
        let corner = mel_to_hz(45.245640471924965 / 81.0);
        let expected = (2.0 * corner - 40.0) / corner * 2.0 / (2.0 * corner);
        assert!((w[1] as f64 - expected).abs() < 1e-7, "{} vs {expected}", w[1]);
        assert_eq!((w[0], w[2]), (0.0, 0.0));
    }

    #[test]
    fn packed_fft_matches_naive_dft() {
        let mel = LogMel::new(80).unwrap();
        let samples = test_signal(1130, 0);
        let frames = frame_count(samples.len());
        let power = mel.power_spectrum(&whole(&samples), 0, frames);
        for frame in [0, 3, frames - 1] {
            // Frame t covers padded samples [t*160, t*160 + 400), padded index p is sample
            // p - 200, mirrored at the ends.
            let windowed: Vec<f64> = (0..N_FFT)
                .map(|j| {
                    let p = (frame * HOP_LENGTH + j) as i64 - 200;
                    let last = samples.len() as i64 - 1;
                    let idx = if p < 0 {
                        -p
                    } else if p > last {
                        2 * last - p
                    } else {
                        p
                    };
                    let hann = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * j as f64 / 400.0).cos();
                    samples[idx as usize] as f64 * hann
                })
                .collect();
            let expected = dft_power(&windowed);
            let peak = expected.iter().copied().fold(0.0, f64::max);
            for (k, (got, want)) in power[frame * N_BINS..(frame + 1) * N_BINS].iter().zip(&expected).enumerate() {
                assert!(
                    (*got as f64 - want).abs() <= 1e-5 * peak + 1e-4 * want,
                    "frame {frame} bin {k}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn sine_and_dc_spectra() {
        let mel = LogMel::new(80).unwrap();
        // A sine at exactly bin 50 (2 kHz), amplitude a: the periodic Hann window gives
        // |X| = a * N / 4 at bin 50 and a * N / 8 at bins 49 and 51, nothing elsewhere.
        let a = 0.5f32;
        let sine: Vec<f32> =
            (0..4000).map(|i| a * (2.0 * std::f64::consts::PI * 2000.0 * i as f64 / 16000.0).sin() as f32).collect();
        let power = mel.power_spectrum(&whole(&sine), 0, frame_count(sine.len()));
        let frame = &power[10 * N_BINS..11 * N_BINS];
        let main = (a * 100.0).powi(2);
        let side = (a * 50.0).powi(2);
        assert!((frame[50] - main).abs() < main * 1e-4, "{}", frame[50]);
        assert!((frame[49] - side).abs() < main * 1e-5 && (frame[51] - side).abs() < main * 1e-5);
        for (k, p) in frame.iter().enumerate().filter(|(k, _)| !(49..=51).contains(k)) {
            assert!(*p < main * 1e-9, "bin {k}: {p}");
        }
        // A constant c: |X| = c * N / 2 at 0 Hz, c * N / 4 at bin 1.
        let dc = vec![0.25f32; 2000];
        let power = mel.power_spectrum(&whole(&dc), 0, frame_count(dc.len()));
        let frame = &power[5 * N_BINS..6 * N_BINS];
        assert!((frame[0] - 2500.0).abs() < 0.01 && (frame[1] - 625.0).abs() < 0.01);
        assert!(frame[2..].iter().all(|&p| p < 1e-6));
    }

    #[test]
    fn tone_at_1khz_lands_in_its_band() {
        let mel = LogMel::new(80).unwrap();
        let tone: Vec<f32> =
            (0..16000).map(|i| (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 16000.0).sin() as f32).collect();
        let out = mel.compute(&tone).unwrap();
        // Filter centers are mels (i + 1) * 45.2456 / 81; 1 kHz is mel 15, nearest to
        // i + 1 = 27 (15.08 mel, 1005 Hz). Filter 25 (968 Hz) gets its falling edge.
        let expected_band = (15.0f64 / (45.245640471924965 / 81.0)).round() as usize - 1;
        assert_eq!(expected_band, 26);
        for frame in [3, 50, 96] {
            let best = (0..80).max_by(|&a, &b| mel_at(&out, a, frame).total_cmp(&mel_at(&out, b, frame))).unwrap();
            assert_eq!(best, expected_band, "frame {frame}");
            // The spectrogram's maximum is (max + 4) / 4; bands far away sit on the floor.
            let top = mel_at(&out, best, frame);
            assert!(mel_at(&out, 79, frame) <= top - 1.5, "band 79 is not near the floor");
        }
    }

    #[test]
    fn log_scaling_and_floor() {
        let mel = LogMel::new(80).unwrap();
        // Silence: every band clamps at 1e-10, log10 -10, (-10 + 4) / 4.
        let out = mel.compute(&[0.0; 1600]).unwrap();
        assert!(out.as_f32().unwrap().iter().all(|&v| v == -1.5));
        // Loud tone then silence: the silent frames sit at (max - 8 + 4) / 4.
        let mut audio: Vec<f32> = (0..3200).map(|i| (i as f32 * 0.3).sin()).collect();
        audio.extend(std::iter::repeat_n(0.0, 3200));
        let out = mel.compute(&audio).unwrap();
        let values = out.as_f32().unwrap();
        let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let min = values.iter().copied().fold(f32::INFINITY, f32::min);
        assert!((min - (max - 2.0)).abs() < 1e-6, "min {min}, max {max}");
        assert_eq!(mel_at(&out, 40, 35), min);
    }

    #[test]
    fn frame_counts_for_lengths() {
        let mel = LogMel::new(80).unwrap();
        for (n, frames) in [(0, 0), (1, 0), (159, 0), (160, 1), (161, 1), (180, 1), (200, 1), (201, 1), (320, 2)] {
            let out = mel.compute(&test_signal(n, 0)).unwrap();
            assert_eq!(out.shape().dims(), &[80, frames], "{n} samples");
            assert!(out.as_f32().unwrap().iter().all(|v| v.is_finite()));
        }
        assert_eq!(frame_count(16000), 100);
        assert_eq!(frame_count(CHUNK_SAMPLES), CHUNK_FRAMES);
        let window = mel.compute(&pad_or_trim_samples(&test_signal(20000, 0), CHUNK_SAMPLES)).unwrap();
        assert_eq!(window.shape().dims(), &[80, 3000]);
        let large = LogMel::new(128).unwrap().compute(&test_signal(1000, 0)).unwrap();
        assert_eq!(large.shape().dims(), &[128, 6]);
    }

    fn whole(samples: &[f32]) -> Block {
        Block { lo: 0, samples: samples.to_vec(), audio_len: samples.len(), len: samples.len() }
    }

    /// Every frame a block is read for is the frame of the explicitly reflect-padded signal, at
    /// the reflected start, in the middle, over the appended zeros and the reflected end, for
    /// signals short enough to reflect back and forth and long ones.
    #[test]
    fn blocks_hold_their_frames() {
        let mut checked = 0;
        for n in [0, 1, 2, 3, 150, 199, 200, 201, 202, 399, 400, 401, 402, 403, 559, 560, 561, 1000, 2345] {
            for tail in [0, 1, 160, 399] {
                let samples = test_signal(n, 0);
                let audio = Pcm(&samples);
                let signal = Signal { audio: &audio, len: n + tail };
                let mut with_tail = samples.clone();
                with_tail.resize(n + tail, 0.0);
                let padded = reflect_pad(&with_tail, N_FFT / 2);
                let frames = frame_count(n + tail);
                for first in 0..frames {
                    for count in [1, 2, 5, frames - first] {
                        let count = count.min(frames - first);
                        let block = signal.block(first, count).unwrap();
                        for f in first..first + count {
                            let mut frame = [0.0f32; N_FFT];
                            block.frame(f, &mut frame);
                            let want = &padded[f * HOP_LENGTH..f * HOP_LENGTH + N_FFT];
                            assert_eq!(frame[..], want[..], "n {n}, tail {tail}, frame {f} of {first}+{count}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 1000);
    }

    /// Windows read from a spectrogram are bit for bit the columns of the whole one, at its
    /// start (reflection), in the middle, over the appended zeros at its end, and cut there.
    #[test]
    fn windows_are_the_whole_spectrograms_frames() {
        let mel = LogMel::new(80).unwrap();
        let samples = test_signal(7 * CHUNK_SAMPLES / 3 + 123, 20_000);
        let tail = 160;
        let mut padded = samples.clone();
        padded.extend(std::iter::repeat_n(0.0, tail));
        let whole = mel.compute(&padded).unwrap();
        let frames = whole.shape().dims()[1];
        assert_eq!(frames, (samples.len() + tail) / HOP_LENGTH);
        let all = whole.to_f32_cow();
        let spectrogram = mel.spectrogram(&samples, tail).unwrap();
        assert_eq!(spectrogram.frames(), frames);
        for (start, len, width) in
            [(0, 3000, 3000), (1, 2999, 3000), (2957, 3000, 3000), (frames - 70, 3000, 3000), (frames - 1, 5, 8)]
        {
            let window = spectrogram.window(start, len, width).unwrap();
            assert_eq!(window.shape().dims(), [80, width]);
            let got = window.to_f32_cow();
            let kept = len.min(frames - start);
            for band in 0..80 {
                let row = &got[band * width..(band + 1) * width];
                assert_eq!(
                    row[..kept],
                    all[band * frames + start..band * frames + start + kept],
                    "band {band} at {start}"
                );
                assert!(row[kept..].iter().all(|&v| v == 0.0), "zero padding after frame {kept}");
            }
        }
    }

    /// `samples` reflect-padded by `pad` at each end, as [`Signal`] reads them.
    fn reflect_pad(samples: &[f32], pad: usize) -> Vec<f32> {
        (0..samples.len() + 2 * pad)
            .map(|j| samples.get(reflect_index(j, samples.len(), pad)).copied().unwrap_or(0.0))
            .collect()
    }

    #[test]
    fn reflect_padding() {
        assert_eq!(reflect_pad(&[1.0, 2.0, 3.0, 4.0], 2), vec![3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 2.0]);
        // Shorter than the padding: back and forth, period 2 (n - 1) = 4, as
        // numpy.pad([1, 2, 3], 5, mode="reflect") gives.
        assert_eq!(
            reflect_pad(&[1.0, 2.0, 3.0], 5),
            vec![2.0, 1.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0, 2.0]
        );
        assert_eq!(reflect_pad(&[7.0], 2), vec![7.0; 5]);
    }

    #[test]
    fn bad_input_errors() {
        assert_eq!(
            LogMel::new(64).unwrap_err().to_string(),
            "bad run argument: log-mel: 64 mel bands requested; Whisper uses 80 or 128"
        );
        let mel = LogMel::new(80).unwrap();
        let mut audio = vec![0.0f32; 400];
        audio[123] = f32::NAN;
        assert_eq!(mel.compute(&audio).unwrap_err().to_string(), "bad run argument: log-mel: audio sample 123 is NaN");
        audio[123] = f32::INFINITY;
        assert_eq!(mel.compute(&audio).unwrap_err().to_string(), "bad run argument: log-mel: audio sample 123 is inf");
        let flat = Tensor::f32([4], vec![0.0; 4]).unwrap();
        assert_eq!(
            pad_or_trim(&flat, 3).unwrap_err().to_string(),
            "bad run argument: pad_or_trim: expected a [n_mels, frames] tensor, got [4]"
        );
    }

    #[test]
    fn pad_or_trim_frames_and_samples() {
        let mel = Tensor::f32([2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!(
            pad_or_trim(&mel, 5).unwrap().as_f32().unwrap(),
            &[1.0, 2.0, 3.0, 0.0, 0.0, 4.0, 5.0, 6.0, 0.0, 0.0]
        );
        assert_eq!(pad_or_trim(&mel, 2).unwrap().as_f32().unwrap(), &[1.0, 2.0, 4.0, 5.0]);
        assert_eq!(pad_or_trim(&mel, 0).unwrap().shape().dims(), &[2, 0]);
        let empty = Tensor::f32([2, 0], vec![]).unwrap();
        assert_eq!(pad_or_trim(&empty, 2).unwrap().as_f32().unwrap(), &[0.0; 4]);
        assert_eq!(pad_or_trim_samples(&[1.0, 2.0], 3), vec![1.0, 2.0, 0.0]);
        assert_eq!(pad_or_trim_samples(&[1.0, 2.0], 1), vec![1.0]);
    }

    /// One case of tests/fixtures/mel_reference.json.
    #[derive(serde::Deserialize)]
    struct ReferenceCase {
        n_mels: usize,
        n_samples: usize,
        silent: usize,
        frames: usize,
        frame_indices: Vec<usize>,
        values: Vec<Vec<f32>>,
    }

    #[test]
    fn matches_faster_whisper_reference() {
        // Written by tests/golden/mel_reference.py with faster-whisper's FeatureExtractor.
        let fixture = include_str!("../../../../tests/fixtures/mel_reference.json");
        let cases: Vec<ReferenceCase> = serde_json::from_str(fixture).unwrap();
        assert_eq!(cases.len(), 3);
        for case in &cases {
            let out = LogMel::new(case.n_mels).unwrap().compute(&test_signal(case.n_samples, case.silent)).unwrap();
            assert_eq!(out.shape().dims(), &[case.n_mels, case.frames]);
            let mut worst = 0.0f32;
            for (&frame, column) in case.frame_indices.iter().zip(&case.values) {
                assert_eq!(column.len(), case.n_mels);
                for (band, want) in column.iter().enumerate() {
                    worst = worst.max((mel_at(&out, band, frame) - want).abs());
                }
            }
            eprintln!("{} mels, {} samples: max abs difference {worst:e}", case.n_mels, case.n_samples);
            assert!(worst < 1e-4, "{} mels, {} samples: max abs difference {worst}", case.n_mels, case.n_samples);
        }
    }
}
