//! The native spill: an unnamed temporary file in `$TMPDIR`, made when memory fills, gone when
//! the store is dropped or the process ends, however it ends.

use std::fs::File;
use std::io::{BufWriter, Write};

use super::{Spill, Store, from_bytes, to_bytes};

/// The command's store: memory, then a temporary file.
pub type Samples = Store<TempFile>;

impl Samples {
    pub fn new() -> Samples {
        Store::with(TempFile::default())
    }

    /// The `len` samples of a file of little-endian f32s (a hand-over's, which another
    /// process wrote).
    pub fn from_file(file: File, len: usize) -> Samples {
        Store::spilled(TempFile(State::Written(file)), len)
    }

    /// Whether the samples went to a temporary file.
    pub fn on_disk(&self) -> bool {
        self.spill().is_some()
    }
}

impl Default for Samples {
    fn default() -> Samples {
        Samples::new()
    }
}

/// A temporary file of little-endian f32 samples, made at the first write.
#[derive(Debug, Default)]
pub struct TempFile(State);

#[derive(Debug, Default)]
enum State {
    #[default]
    None,
    Writing(BufWriter<File>),
    Written(File),
}

impl Spill for TempFile {
    fn write(&mut self, _at: usize, samples: &[f32]) -> Result<(), String> {
        if let State::None = self.0 {
            let file = tempfile::tempfile()
                .map_err(|e| format!("cannot make a temporary file for the audio in {}: {e}", temp_dir()))?;
            self.0 = State::Writing(BufWriter::with_capacity(1 << 20, file));
        }
        let State::Writing(writer) = &mut self.0 else {
            return Err("the audio store was written to after it was finished".into());
        };
        writer
            .write_all(&to_bytes(samples))
            .map_err(|e| format!("cannot write the audio to its temporary file in {}: {e}", temp_dir()))
    }

    fn finish(&mut self) -> Result<(), String> {
        if let State::Writing(writer) = std::mem::take(&mut self.0) {
            let file = writer.into_inner().map_err(|e| {
                format!("cannot write the audio to its temporary file in {}: {}", temp_dir(), e.error())
            })?;
            self.0 = State::Written(file);
        }
        Ok(())
    }

    fn read(&self, at: usize, out: &mut [f32]) -> Result<(), String> {
        let State::Written(file) = &self.0 else {
            return Err("the audio was read before it was all decoded".into());
        };
        let mut bytes = vec![0u8; out.len() * 4];
        read_at(file, &mut bytes, at as u64 * 4)
            .map_err(|e| format!("samples {at} to {} from the audio's temporary file: {e}", at + out.len()))?;
        from_bytes(&bytes, out);
        Ok(())
    }
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
    use susurrus_whisper::Audio;
    use susurrus_whisper::audio::{IN_MEMORY, SampleSink};

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
