//! Where the decoded 16 kHz samples go: memory for the first [`IN_MEMORY`] samples (two
//! minutes, so clips never leave it), then a [`Spill`], so that memory stays flat in the
//! recording's length (an hour is 230 MB of f32 samples). Whisper reads the recording twice
//! (its log-mel is normalised by the whole recording's maximum) and then a window at a time,
//! which a file serves as well as memory.
//!
//! Natively the spill is an unnamed temporary file ([`temp_file`]); in the browser a file in
//! the origin's private file system, or JavaScript memory where no such file can be opened
//! ([`browser`]).

#[cfg(feature = "browser")]
pub mod browser;
pub mod limit;
#[cfg(not(target_arch = "wasm32"))]
pub mod temp_file;

use susurrus_whisper::audio::{IN_MEMORY, SampleSink};
use susurrus_whisper::{Audio, Error as WhisperError};

/// Where samples past [`IN_MEMORY`] go. Writes always append; reads come once every sample is
/// written and [`Spill::finish`]ed.
pub trait Spill {
    /// Writes `samples` from sample `at` (the end) on.
    fn write(&mut self, at: usize, samples: &[f32]) -> Result<(), String>;
    /// Every sample is written.
    fn finish(&mut self) -> Result<(), String>;
    /// Reads `out.len()` samples from sample `at` on, all written.
    fn read(&self, at: usize, out: &mut [f32]) -> Result<(), String>;
}

/// 16 kHz samples in memory up to [`IN_MEMORY`], then in a [`Spill`], read back a stretch at
/// a time through [`Audio`].
#[derive(Debug)]
pub struct Store<P> {
    len: usize,
    memory: Vec<f32>,
    /// Where the samples went past memory; `None` once a store that never spilled is finished
    /// (an unused file goes then rather than with the samples).
    spill: Option<P>,
    spilled: bool,
}

impl<P: Spill> Store<P> {
    /// An empty store that spills into `spill`.
    pub fn with(spill: P) -> Self {
        Store { len: 0, memory: Vec::new(), spill: Some(spill), spilled: false }
    }

    /// The first `len` samples of a spill already written (a hand-over's file).
    pub fn spilled(spill: P, len: usize) -> Self {
        Store { len, memory: Vec::new(), spill: Some(spill), spilled: true }
    }

    /// Where the samples are: `None` in memory, else the spill.
    pub fn spill(&self) -> Option<&P> {
        self.spill.as_ref().filter(|_| self.spilled)
    }

    /// Every sample, in memory (for tests and short clips).
    pub fn to_vec(&self) -> Result<Vec<f32>, WhisperError> {
        self.read_range(0, self.len)
    }
}

impl<P: Spill> SampleSink for Store<P> {
    fn push(&mut self, samples: &[f32]) -> Result<(), String> {
        if !self.spilled {
            if self.memory.len() + samples.len() <= IN_MEMORY {
                self.memory.extend_from_slice(samples);
                self.len += samples.len();
                return Ok(());
            }
            let memory = std::mem::take(&mut self.memory);
            self.spill.as_mut().ok_or("the audio store was written to after it was finished")?.write(0, &memory)?;
            self.spilled = true;
        }
        self.spill.as_mut().ok_or("the audio store lost its spill")?.write(self.len, samples)?;
        self.len += samples.len();
        Ok(())
    }

    fn count(&self) -> usize {
        self.len
    }

    /// Only the count shrinks in a spill: reads never go past it.
    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
        self.memory.truncate(len);
    }

    fn reserve(&mut self, additional: usize) {
        if !self.spilled {
            let _ = self.memory.try_reserve_exact(additional.min(IN_MEMORY.saturating_sub(self.memory.len())));
        }
    }

    fn finish(mut self) -> Result<Self, String> {
        if self.spilled {
            self.spill.as_mut().ok_or("the audio store lost its spill")?.finish()?;
        } else {
            self.memory.shrink_to_fit();
            self.spill = None;
        }
        Ok(self)
    }
}

impl<P: Spill> Audio for Store<P> {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, start: usize, out: &mut [f32]) -> Result<(), WhisperError> {
        let Some(spill) = self.spill() else {
            return self.memory.read(start, out);
        };
        let n = self.len.saturating_sub(start).min(out.len());
        spill.read(start, &mut out[..n]).map_err(WhisperError::AudioRead)?;
        out[n..].fill(0.0);
        Ok(())
    }
}

/// Little-endian f32 bytes, the spills' layout.
fn to_bytes(samples: &[f32]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// Samples from little-endian f32 bytes into `out`.
fn from_bytes(bytes: &[u8], out: &mut [f32]) {
    for (out, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *out = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}
