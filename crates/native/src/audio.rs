//! Audio files to 16 kHz mono PCM, the input Whisper takes.
//!
//! WAV (8/16/24/32-bit integer and 32-bit float PCM), FLAC, MP3 and OGG Vorbis at any sample rate
//! and channel count are decoded with symphonia, averaged to one channel and resampled with
//! rubato. Every failure is an [`Error::Audio`] naming the input (or an [`Error::Io`] naming the
//! path), never a panic.

mod decode;
mod resample;

use std::fs::File;
use std::io::{Cursor, Read};
use std::path::Path;

use symphonia::core::formats::probe::Hint;
use symphonia::core::io::{MediaSource, MediaSourceStream, MediaSourceStreamOptions};

use crate::error::{Error, Result};

/// The sample rate Whisper listens at, and of every [`Decoded::samples`].
pub const SAMPLE_RATE: u32 = 16_000;

/// 16 kHz mono f32 PCM in [-1, 1] plus what the source was.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The average of the source's channels at [`SAMPLE_RATE`]: `ceil(frames * 16000 /
    /// source_rate)` samples for `frames` source frames.
    pub samples: Vec<f32>,
    /// The source's sample rate in Hz (0 when a file without samples does not state it).
    pub source_rate: u32,
    /// The source's channel count (0 when a file without samples does not state it).
    pub channels: usize,
    /// The container and codec: "wav", "flac", "mp3", "ogg/vorbis".
    pub format: String,
}

impl Decoded {
    /// The length of the audio in seconds.
    pub fn duration(&self) -> f64 {
        self.samples.len() as f64 / f64::from(SAMPLE_RATE)
    }
}

/// Decodes the file at `path`. The file is read as it is decoded, so memory holds the 16 kHz
/// result, not the file. Errors name the path.
pub fn decode_file(path: &Path) -> Result<Decoded> {
    let name = path.display().to_string();
    // Opening a directory succeeds on some systems and only reading fails; say what it is.
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::io(path, std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory")));
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    if meta.len() == 0 {
        return Err(empty(&name));
    }
    let extension = path.extension().and_then(|e| e.to_str());
    decode_source(Box::new(file), &name, extension)
}

/// Decodes everything `reader` yields (standard input, for `-`): the bytes are read whole first,
/// since probing a format needs to look ahead and back. `source_name` names the input in errors.
pub fn decode_reader(mut reader: impl Read, source_name: &str) -> Result<Decoded> {
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(|e| Error::io(Path::new(source_name), e))?;
    decode_bytes(bytes, source_name, None)
}

/// Decodes an encoded file held in memory. `extension_hint` (like "mp3") helps pick the format
/// when its content is ambiguous; the content decides.
pub fn decode_bytes(bytes: Vec<u8>, source_name: &str, extension_hint: Option<&str>) -> Result<Decoded> {
    if bytes.is_empty() {
        return Err(empty(source_name));
    }
    decode_source(Box::new(Cursor::new(bytes)), source_name, extension_hint)
}

fn empty(source_name: &str) -> Error {
    Error::audio(source_name, "empty file")
}

fn decode_source(source: Box<dyn MediaSource>, name: &str, extension: Option<&str>) -> Result<Decoded> {
    let mut hint = Hint::new();
    if let Some(extension) = extension {
        hint.with_extension(extension);
    }
    let mss = MediaSourceStream::new(source, MediaSourceStreamOptions::default());
    decode::decode(mss, &hint, name)
}
