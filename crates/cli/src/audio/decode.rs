//! Demuxing and decoding with symphonia, packet by packet into the mono downmix and the 16 kHz
//! resampler, with every failure turned into a message about the input.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use symphonia::core::codecs::audio::well_known::{CODEC_ID_AAC, CODEC_ID_ALAC, CODEC_ID_OPUS, CODEC_ID_SPEEX};
use symphonia::core::codecs::audio::{AudioCodecId, AudioDecoder, AudioDecoderOptions};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, FormatReader, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;

use susurrus_whisper::audio::{Mono, SampleSink};

use super::Decoded;
use crate::error::{Error, Result};

/// What the decoder reads, for messages.
const SUPPORTED: &str = "WAV, FLAC, MP3, OGG Vorbis";

/// Decodes the whole stream in `mss` to 16 kHz mono into `store`. `name` names the input in
/// errors; `read` tells how far into the source the reader got, for the warning about a
/// truncated file.
pub(super) fn decode<S: SampleSink>(
    mss: MediaSourceStream<'_>,
    hint: &Hint,
    name: &str,
    read: &Furthest,
    store: S,
) -> Result<Decoded<S>> {
    let fail = |msg: String| Error::audio(name, msg);
    let mut reader = symphonia::default::get_probe()
        .probe(hint, mss, FormatOptions::default(), MetadataOptions::default())
        .map_err(|e| fail(probe_message(&e)))?;
    let container = match reader.format_info().short_name {
        "wave" => "wav",
        other => other,
    };
    let (mut track_id, mut decoder) = open_track(reader.as_ref(), container).map_err(fail)?;
    let format = format_name(container, decoder.codec_info().short_name);

    let params = decoder.codec_params();
    let mut mono =
        Mono::new(params.sample_rate, params.channels.as_ref().map(|c| c.count()), frame_count(&*reader), store);
    // The current buffer, interleaved, as symphonia converts it to f32.
    let mut interleaved = Vec::new();
    let mut bad_packets = 0usize;
    let mut first_bad = None;
    let mut cut_at = None;
    loop {
        let packet = match reader.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            // A stream cut short (a truncated file): keep everything before the cut, and say so.
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                cut_at = Some(read.furthest());
                break;
            }
            // A chained stream started a new logical stream: carry on with its decoder. Mono
            // rejects a change of rate or channel count.
            Err(SymphoniaError::ResetRequired) => {
                (track_id, decoder) = open_track(reader.as_ref(), container).map_err(fail)?;
                continue;
            }
            Err(SymphoniaError::IoError(e)) => return Err(fail(format!("cannot read: {e}"))),
            Err(e) => return Err(fail(format!("damaged {container} stream after {}: {e}", mono.position()))),
        };
        if packet.track_id != track_id {
            continue;
        }
        match decoder.decode(&packet) {
            Ok(buffer) => {
                buffer.copy_to_vec_interleaved(&mut interleaved);
                mono.push_interleaved(buffer.spec().rate(), buffer.num_planes(), &interleaved).map_err(fail)?;
            }
            // One undecodable packet is skipped, as FFmpeg does, so the rest of the file
            // survives damage; a file of nothing but undecodable packets is an error below.
            Err(SymphoniaError::DecodeError(msg)) => {
                bad_packets += 1;
                first_bad.get_or_insert((msg, mono.position()));
            }
            Err(SymphoniaError::IoError(e)) => {
                bad_packets += 1;
                let msg = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "packet cut short"
                } else {
                    "packet unreadable"
                };
                first_bad.get_or_insert((msg, mono.position()));
            }
            Err(SymphoniaError::ResetRequired) => {
                decoder = make_decoder(reader.as_ref(), track_id, container).map_err(fail)?;
            }
            Err(e) => return Err(fail(format!("cannot decode {format} after {}: {e}", mono.position()))),
        }
    }
    if mono.frames_in() == 0 {
        if let Some((msg, _)) = first_bad {
            return Err(fail(format!("no decodable audio in {bad_packets} {format} packets (first error: {msg})")));
        }
        if let Some(damage) = mono.nothing_decoded() {
            return Err(fail(damage));
        }
    }
    let mut warnings = Vec::new();
    if let Some((msg, at)) = first_bad {
        let packets = if bad_packets == 1 { "packet" } else { "packets" };
        warnings.push(format!("skipped {bad_packets} undecodable {format} {packets} (the first at {at}: {msg})"));
    }
    if let Some(byte) = cut_at {
        warnings.push(format!(
            "the file ends inside a packet at byte {byte}, after {} of audio: it looks truncated; the audio \
             before the cut is transcribed",
            mono.position()
        ));
    } else if let Some(missing) = mono.missing() {
        warnings.push(missing);
    }
    let (samples, source_rate, channels) = mono.finish().map_err(fail)?;
    Ok(Decoded { samples, source_rate, channels, format, warnings })
}

/// How far into the source the reader got: the furthest byte read, shared with the
/// [`Counted`] source that the format reader owns.
#[derive(Clone, Debug, Default)]
pub(super) struct Furthest(Arc<AtomicU64>);

impl Furthest {
    pub(super) fn furthest(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A source that records the furthest byte read from it, so that a truncated stream can be
/// reported with the byte where it ends, and a stream that gave nothing can be called empty.
pub(super) struct Counted<'a> {
    inner: Box<dyn MediaSource + 'a>,
    position: u64,
    furthest: Furthest,
}

impl<'a> Counted<'a> {
    pub(super) fn new(inner: Box<dyn MediaSource + 'a>) -> (Self, Furthest) {
        let furthest = Furthest::default();
        (Counted { inner, position: 0, furthest: furthest.clone() }, furthest)
    }

    fn moved_to(&mut self, position: u64) {
        self.position = position;
        self.furthest.0.fetch_max(position, Ordering::Relaxed);
    }
}

impl std::io::Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.moved_to(self.position + n as u64);
        Ok(n)
    }
}

impl std::io::Seek for Counted<'_> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        let position = self.inner.seek(pos)?;
        self.position = position;
        Ok(position)
    }
}

impl MediaSource for Counted<'_> {
    fn is_seekable(&self) -> bool {
        self.inner.is_seekable()
    }

    fn byte_len(&self) -> Option<u64> {
        self.inner.byte_len()
    }
}

/// The message for a failure to open the stream: the format is unknown, or the file is cut or
/// damaged before its first audio packet (the probe reads the headers and, for OGG, the whole
/// first page of audio, which FFmpeg fills with up to a second).
fn probe_message(err: &SymphoniaError) -> String {
    match err {
        SymphoniaError::Unsupported(_) => format!("not a supported audio format ({SUPPORTED})"),
        SymphoniaError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "truncated file: it ends before its first audio packet".to_string()
        }
        SymphoniaError::IoError(e) => format!("cannot read: {e}"),
        other => format!("damaged file: {other}"),
    }
}

/// The first audio track and a decoder for it.
fn open_track(reader: &dyn FormatReader, container: &str) -> Result<(u32, Box<dyn AudioDecoder>), String> {
    let track =
        reader.default_track(TrackType::Audio).ok_or_else(|| format!("no audio track in this {container} file"))?;
    let id = track.id;
    Ok((id, make_decoder(reader, id, container)?))
}

fn make_decoder(reader: &dyn FormatReader, track_id: u32, container: &str) -> Result<Box<dyn AudioDecoder>, String> {
    let params = reader
        .tracks()
        .iter()
        .find(|t| t.id == track_id)
        .and_then(|t| t.codec_params.as_ref())
        .and_then(|p| p.audio())
        .ok_or_else(|| format!("the audio track of this {container} file has no codec parameters"))?;
    symphonia::default::get_codecs().make_audio_decoder(params, &AudioDecoderOptions::default()).map_err(|e| match e {
        SymphoniaError::Unsupported(_) => {
            format!("{container} file with {} audio, which is not supported ({SUPPORTED})", codec_label(params.codec))
        }
        other => format!("cannot decode the {container} audio track: {other}"),
    })
}

/// A name for a codec the decoder lacks, for the common ones.
fn codec_label(codec: AudioCodecId) -> String {
    match codec {
        CODEC_ID_OPUS => "Opus".into(),
        CODEC_ID_AAC => "AAC".into(),
        CODEC_ID_ALAC => "ALAC".into(),
        CODEC_ID_SPEEX => "Speex".into(),
        other => format!("codec {other}"),
    }
}

/// "wav", "flac", "mp3" when the container implies the codec, else "container/codec".
fn format_name(container: &str, codec: &str) -> String {
    if codec == container || (container == "wav" && codec.starts_with("pcm")) {
        container.to_string()
    } else {
        format!("{container}/{codec}")
    }
}

/// The default audio track's frame count, where the container states it.
fn frame_count(reader: &dyn FormatReader) -> Option<u64> {
    reader.default_track(TrackType::Audio).and_then(|t| t.num_frames)
}
