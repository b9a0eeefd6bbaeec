//! Audio files to 16 kHz mono PCM, the input Whisper takes.
//!
//! WAV and AIFF (integer and float PCM), FLAC, ALAC, MP3, AAC, Vorbis and Opus, in their own
//! files or in MP4/M4A/MOV, Matroska/WebM, CAF and OGG (the first audio track of a video), at any
//! sample rate and channel count, are decoded by the audio front end the browser package shares
//! (`susurrus-audio`: symphonia's demuxers and decoders, the downmix and the 16 kHz resampler).
//! This module opens the command's inputs (files, named pipes, standard input, uploads) and
//! words its refusals. Every failure is an [`Error::Audio`] naming the input (or an
//! [`Error::Io`] naming the path), never a panic.

use std::fs::File;
use std::io::{Cursor, Read};
use std::path::Path;
use std::time::Duration;

use susurrus_audio::{Decoding, Symphonia, Unsupported};
use symphonia_core::codecs::audio::AudioCodecId;
use symphonia_core::codecs::audio::well_known::{
    CODEC_ID_AC3, CODEC_ID_DCA, CODEC_ID_EAC3, CODEC_ID_MP2, CODEC_ID_SPEEX, CODEC_ID_WMA,
};
use symphonia_core::formats::probe::Hint;
use symphonia_core::io::{MediaSource, MediaSourceStreamOptions, ReadOnlySource};

use crate::error::{Error, Result};
pub use susurrus_audio::{Decoded, IN_MEMORY, Limited, SAMPLE_RATE, SampleSink, Samples};

/// What the decoder reads, for messages.
const SUPPORTED: &str = "WAV, AIFF, FLAC, MP3, AAC, OGG, M4A/MP4/MOV, WebM/MKV, CAF";

/// Decodes the file at `path` into memory: [`decode_file_into`] a vector.
pub fn decode_file(path: &Path) -> Result<Decoded> {
    decode_file_into(path, Vec::new())
}

/// Decodes the file at `path` into `store`, read as it is decoded, so memory holds at most the
/// 16 kHz result (none of it with a [`Samples`] store), never the file. Named pipes and process
/// substitutions (`<(ffmpeg … -f wav -)`) are read as streams. Errors name the path.
pub fn decode_file_into<S: SampleSink>(path: &Path, store: S) -> Result<Decoded<S>> {
    let name = path.display().to_string();
    // Opening a directory succeeds on some systems and only reading fails; say what it is.
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::io(path, std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory")));
    }
    if meta.is_file() && meta.len() == 0 {
        return Err(empty(&name));
    }
    let file = open_input(path, &meta)?;
    let extension = path.extension().and_then(|e| e.to_str());
    decode_source(Box::new(file), &name, extension, store)
}

/// Checks, before any work, that `path` names something audio can be read from: it exists and
/// is not a folder. Reading it may still fail; this catches the typing mistakes early.
pub fn check_input(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::io(path, std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory")));
    }
    Ok(())
}

/// How long opening a named pipe may wait for its writer before the wait is reported.
const FIFO_NOTICE_AFTER: Duration = Duration::from_secs(1);

/// Opens `path` for reading. Opening a named pipe waits until a program opens it for writing;
/// a wait longer than [`FIFO_NOTICE_AFTER`] is reported on stderr, so that a pipe nobody
/// writes to is a visible wait rather than a silent hang.
fn open_input(path: &Path, meta: &std::fs::Metadata) -> Result<File> {
    if !is_fifo(meta) {
        return File::open(path).map_err(|e| Error::io(path, e));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_path_buf();
    std::thread::spawn(move || {
        // The receiver is gone only when the command ended; nothing is left to tell.
        let _ = tx.send(File::open(&owned));
    });
    let opened = match rx.recv_timeout(FIFO_NOTICE_AFTER) {
        Ok(opened) => opened,
        Err(_) => {
            eprintln!("susurrus: {}: waiting for a program to write to this named pipe", path.display());
            rx.recv().unwrap_or_else(|_| Err(std::io::Error::other("the thread opening the pipe ended")))
        }
    };
    opened.map_err(|e| Error::io(path, e))
}

#[cfg(unix)]
fn is_fifo(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    meta.file_type().is_fifo()
}

#[cfg(not(unix))]
fn is_fifo(_: &std::fs::Metadata) -> bool {
    false
}

/// Decodes everything `reader` yields into memory: [`decode_reader_into`] a vector.
pub fn decode_reader<'a>(reader: impl Read + Send + Sync + 'a, source_name: &str) -> Result<Decoded> {
    decode_reader_into(reader, source_name, Vec::new())
}

/// Decodes everything `reader` yields (standard input, for `-`) into `store` as it arrives:
/// the stream is never held whole. `source_name` names the input in errors.
pub fn decode_reader_into<'a, S: SampleSink>(
    reader: impl Read + Send + Sync + 'a,
    source_name: &str,
    store: S,
) -> Result<Decoded<S>> {
    decode_source(Box::new(ReadOnlySource::new(reader)), source_name, None, store)
}

/// Decodes an encoded file held in memory into memory: [`decode_bytes_into`] a vector.
pub fn decode_bytes(bytes: Vec<u8>, source_name: &str, extension_hint: Option<&str>) -> Result<Decoded> {
    decode_bytes_into(bytes, source_name, extension_hint, Vec::new())
}

/// Decodes an encoded file held in memory (an upload) into `store`. `extension_hint` (like
/// "mp3") helps pick the format when its content is ambiguous; the content decides.
pub fn decode_bytes_into<S: SampleSink>(
    bytes: Vec<u8>,
    source_name: &str,
    extension_hint: Option<&str>,
    store: S,
) -> Result<Decoded<S>> {
    if bytes.is_empty() {
        return Err(empty(source_name));
    }
    decode_source(Box::new(Cursor::new(bytes)), source_name, extension_hint, store)
}

fn empty(source_name: &str) -> Error {
    Error::audio(source_name, "empty file")
}

/// Decodes `source` with the audio front end and symphonia's decoders, packet by packet into
/// `store`; every failure is an [`Error::Audio`] naming the input.
fn decode_source<'a, S: SampleSink>(
    source: Box<dyn MediaSource + 'a>,
    name: &str,
    extension: Option<&str>,
    store: S,
) -> Result<Decoded<S>> {
    let mut hint = Hint::new();
    if let Some(extension) = extension {
        hint.with_extension(extension);
    }
    let read_block = MediaSourceStreamOptions::default().buffer_len;
    // Natively every decoder answers at once: the front end's future is ready when polled.
    let decoding = pollster::block_on(susurrus_audio::decode(source, &hint, read_block, &mut Symphonia::all(), store));
    match decoding.map_err(|e| Error::audio(name, e))? {
        Decoding::Decoded(decoded) => Ok(decoded),
        Decoding::Unsupported(why) => Err(Error::audio(name, unsupported(why))),
    }
}

/// Why a file is refused.
fn unsupported(why: Unsupported) -> String {
    match why {
        Unsupported::Container => format!("not a supported audio format ({SUPPORTED})"),
        Unsupported::Codec { container, codec } => {
            format!("{container} file with {} audio, which is not supported ({SUPPORTED})", codec_label(codec))
        }
        Unsupported::Decoder(why) => why,
    }
}

/// A name for a codec the decoder lacks, for the common ones.
fn codec_label(codec: AudioCodecId) -> String {
    match codec {
        CODEC_ID_SPEEX => "Speex".into(),
        CODEC_ID_AC3 => "AC-3".into(),
        CODEC_ID_EAC3 => "E-AC-3".into(),
        CODEC_ID_DCA => "DTS".into(),
        CODEC_ID_MP2 => "MPEG layer II".into(),
        CODEC_ID_WMA => "WMA".into(),
        other => format!("codec {other}"),
    }
}
