//! The recording a transcription reads: 16 kHz mono samples behind [`Audio`], read a stretch
//! at a time, so that a recording need not be in memory. Whisper's log-mel is normalised by
//! the whole recording's maximum, so the samples are read twice (once for the maximum, once a
//! window at a time as the seek loop advances) and cannot simply flow past once; the native
//! command keeps a long recording's samples in a temporary file behind this trait, and a slice
//! in memory is one too ([`Pcm`]).
//!
//! Decoders (symphonia's natively, WebCodecs in the browser) turn a file into such samples
//! through [`Mono`] (downmix, checks, the 16 kHz resampler [`To16k`]) into a [`SampleSink`].

pub mod mel;
mod mono;
mod resample;
mod sink;

pub use mono::{MAX_RATE, MIN_RATE, Mono};
pub use resample::To16k;
pub use sink::{IN_MEMORY, SampleSink};

use crate::error::Result;

/// 16 kHz mono samples, read a stretch at a time.
pub trait Audio {
    /// The number of samples.
    fn len(&self) -> usize;

    /// Whether there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies samples `start..start + out.len()` into `out`; positions at or past
    /// [`Audio::len`] read as zeros. A failed read (of a file behind it) is an error that says
    /// what failed.
    fn read(&self, start: usize, out: &mut [f32]) -> Result<()>;

    /// Samples `start..end` (zeros past the end) as a new vector.
    fn read_range(&self, start: usize, end: usize) -> Result<Vec<f32>> {
        let mut out = vec![0.0; end.saturating_sub(start)];
        self.read(start, &mut out)?;
        Ok(out)
    }
}

/// Samples in memory.
#[derive(Clone, Copy, Debug)]
pub struct Pcm<'a>(pub &'a [f32]);

impl Audio for Pcm<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn read(&self, start: usize, out: &mut [f32]) -> Result<()> {
        let have = self.0.get(start..).unwrap_or_default();
        let n = have.len().min(out.len());
        out[..n].copy_from_slice(&have[..n]);
        out[n..].fill(0.0);
        Ok(())
    }
}

impl Audio for Vec<f32> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn read(&self, start: usize, out: &mut [f32]) -> Result<()> {
        Pcm(self).read(start, out)
    }
}

/// Stretches of a recording read as one (the speech the VAD found, faster-whisper's
/// `collect_chunks`), without a copy of them.
pub struct Joined<'a> {
    audio: &'a dyn Audio,
    /// Each stretch as (start in the recording, start in the joined audio, length).
    stretches: Vec<(usize, usize, usize)>,
    len: usize,
}

impl<'a> Joined<'a> {
    /// The stretches `start..end` of `audio`, in order; each is cut at the recording's end.
    pub fn new(audio: &'a dyn Audio, stretches: impl IntoIterator<Item = (usize, usize)>) -> Joined<'a> {
        let mut len = 0;
        let mut joined = Vec::new();
        for (start, end) in stretches {
            let n = end.min(audio.len()).saturating_sub(start);
            joined.push((start, len, n));
            len += n;
        }
        Joined { audio, stretches: joined, len }
    }
}

impl Audio for Joined<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, start: usize, out: &mut [f32]) -> Result<()> {
        out.fill(0.0);
        let end = start + out.len();
        // The first stretch that ends past `start`.
        let first = self.stretches.partition_point(|&(_, at, n)| at + n <= start);
        for &(source, at, n) in &self.stretches[first..] {
            if at >= end {
                break;
            }
            let (from, to) = (start.max(at), end.min(at + n));
            self.audio.read(source + (from - at), &mut out[from - start..to - start])?;
        }
        Ok(())
    }
}

/// Samples read per block where a whole recording is scanned (its finiteness, the VAD's
/// windows): 64 K samples, 4 s.
pub const SCAN_BLOCK: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_reads_zeros_past_the_end() {
        let pcm = Pcm(&[1.0, 2.0, 3.0]);
        assert_eq!(pcm.read_range(1, 5).unwrap(), [2.0, 3.0, 0.0, 0.0]);
        assert_eq!(pcm.read_range(7, 9).unwrap(), [0.0, 0.0]);
    }

    #[test]
    fn joined_stretches_read_as_their_concatenation() {
        let samples: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let stretches = [(3, 7), (20, 20), (50, 52), (98, 130)];
        let joined = Joined::new(&samples, stretches);
        let want: Vec<f32> = stretches.iter().flat_map(|&(s, e)| samples[s..e.min(100)].iter().copied()).collect();
        assert_eq!(joined.len(), want.len());
        for start in 0..want.len() + 2 {
            for len in 0..want.len() + 3 - start {
                let mut expected = vec![0.0; len];
                for (k, v) in expected.iter_mut().enumerate() {
                    *v = want.get(start + k).copied().unwrap_or(0.0);
                }
                assert_eq!(joined.read_range(start, start + len).unwrap(), expected, "{start}+{len}");
            }
        }
    }
}
