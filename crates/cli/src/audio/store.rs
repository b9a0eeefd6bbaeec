//! Where the decoded 16 kHz samples go natively: a vector in memory ([`Vec<f32>`], for clips
//! and tests), or [`Samples`], which keeps a long recording in an unnamed temporary file so that
//! memory stays flat in the recording's length (an hour is 230 MB of f32 samples). Whisper
//! reads the recording twice (its log-mel is normalised by the whole recording's maximum) and
//! then a window at a time, which a file serves as well as memory.

use std::fs::File;
use std::io::{BufWriter, Write};

use susurrus_whisper::audio::{IN_MEMORY, SampleSink};
use susurrus_whisper::{Audio, Error as WhisperError};

/// 16 kHz samples in memory up to [`IN_MEMORY`], then in an unnamed temporary file (in
/// `$TMPDIR`, gone when the store is dropped or the process ends, however it ends), read back a
/// stretch at a time through [`Audio`].
#[derive(Debug, Default)]
pub struct Samples {
    len: usize,
    store: Store,
}

#[derive(Debug)]
enum Store {
    Memory(Vec<f32>),
    Writing(BufWriter<File>),
    File(File),
}

impl Default for Store {
    fn default() -> Self {
        Store::Memory(Vec::new())
    }
}

impl Samples {
    pub fn new() -> Samples {
        Samples::default()
    }

    /// The `len` samples of a file of little-endian f32s (a hand-over's, which another
    /// process wrote).
    pub fn from_file(file: File, len: usize) -> Samples {
        Samples { len, store: Store::File(file) }
    }

    /// Whether the samples went to a temporary file.
    pub fn on_disk(&self) -> bool {
        !matches!(self.store, Store::Memory(_))
    }

    /// Every sample, in memory (for tests and short clips).
    pub fn to_vec(&self) -> Result<Vec<f32>, WhisperError> {
        self.read_range(0, self.len)
    }
}

impl SampleSink for Samples {
    fn push(&mut self, samples: &[f32]) -> Result<(), String> {
        if let Store::Memory(memory) = &mut self.store {
            if memory.len() + samples.len() <= IN_MEMORY {
                memory.extend_from_slice(samples);
                self.len += samples.len();
                return Ok(());
            }
            let file = tempfile::tempfile()
                .map_err(|e| format!("cannot make a temporary file for the audio in {}: {e}", temp_dir()))?;
            let mut writer = BufWriter::with_capacity(1 << 20, file);
            write_samples(&mut writer, memory)?;
            self.store = Store::Writing(writer);
        }
        match &mut self.store {
            Store::Writing(writer) => write_samples(writer, samples)?,
            _ => return Err("the audio store was written to after it was finished".into()),
        }
        self.len += samples.len();
        Ok(())
    }

    fn count(&self) -> usize {
        self.len
    }

    /// Only the count shrinks on disk: reads never go past it.
    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
        if let Store::Memory(memory) = &mut self.store {
            memory.truncate(len);
        }
    }

    fn reserve(&mut self, additional: usize) {
        if let Store::Memory(memory) = &mut self.store {
            let _ = memory.try_reserve_exact(additional.min(IN_MEMORY.saturating_sub(memory.len())));
        }
    }

    fn finish(mut self) -> Result<Self, String> {
        self.store = match self.store {
            Store::Writing(writer) => Store::File(writer.into_inner().map_err(|e| {
                format!("cannot write the audio to its temporary file in {}: {}", temp_dir(), e.error())
            })?),
            Store::Memory(mut memory) => {
                memory.shrink_to_fit();
                Store::Memory(memory)
            }
            file => file,
        };
        Ok(self)
    }
}

impl Audio for Samples {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, start: usize, out: &mut [f32]) -> Result<(), WhisperError> {
        let file = match &self.store {
            Store::Memory(memory) => return memory.read(start, out),
            Store::File(file) => file,
            Store::Writing(_) => {
                return Err(WhisperError::AudioRead("the audio was read before it was all decoded".into()));
            }
        };
        let n = self.len.saturating_sub(start).min(out.len());
        let mut bytes = vec![0u8; n * 4];
        read_at(file, &mut bytes, start as u64 * 4).map_err(|e| {
            WhisperError::AudioRead(format!("samples {start} to {} from the audio's temporary file: {e}", start + n))
        })?;
        for (out, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *out = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        out[n..].fill(0.0);
        Ok(())
    }
}

fn write_samples(writer: &mut BufWriter<File>, samples: &[f32]) -> Result<(), String> {
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    writer.write_all(&bytes).map_err(|e| format!("cannot write the audio to its temporary file in {}: {e}", temp_dir()))
}

fn temp_dir() -> String {
    std::env::temp_dir().display().to_string()
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past [`IN_MEMORY`] the samples move to a file and read back exactly, across the point
    /// where they moved, past the end as zeros, and cut by `truncate`.
    #[test]
    fn samples_spill_to_a_file_and_read_back_exactly() {
        let total = IN_MEMORY + 12_345;
        let want: Vec<f32> = (0..total).map(|i| ((i as f32) * 0.001).sin()).collect();
        let mut samples = Samples::new();
        for piece in want.chunks(100_003) {
            samples.push(piece).unwrap();
        }
        samples.truncate(total - 5);
        let samples = samples.finish().unwrap();
        assert!(samples.on_disk());
        assert_eq!(Audio::len(&samples), total - 5);
        for (start, len) in [(0, 10), (IN_MEMORY - 3, 7), (total - 20, 30), (total + 4, 3)] {
            let got = samples.read_range(start, start + len).unwrap();
            let expected: Vec<f32> = (start..start + len).map(|i| if i < total - 5 { want[i] } else { 0.0 }).collect();
            assert_eq!(got, expected, "{start}+{len}");
        }
        assert_eq!(samples.to_vec().unwrap(), want[..total - 5]);
    }

    #[test]
    fn short_audio_stays_in_memory() {
        let mut samples = Samples::new();
        samples.push(&[0.5; 1000]).unwrap();
        let samples = samples.finish().unwrap();
        assert!(!samples.on_disk());
        assert_eq!(samples.to_vec().unwrap(), [0.5; 1000]);
    }
}
