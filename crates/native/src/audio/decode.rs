//! Demuxing and decoding with symphonia, packet by packet into the mono downmix and the 16 kHz
//! resampler, with every failure turned into a message about the input.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use symphonia::core::audio::GenericAudioBufferRef;
use symphonia::core::codecs::audio::well_known::{CODEC_ID_AAC, CODEC_ID_ALAC, CODEC_ID_OPUS, CODEC_ID_SPEEX};
use symphonia::core::codecs::audio::{AudioCodecId, AudioDecoder, AudioDecoderOptions};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, FormatReader, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;

use super::Decoded;
use super::resample::To16k;
use super::store::SampleSink;
use crate::error::{Error, Result};

/// What the decoder reads, for messages.
const SUPPORTED: &str = "WAV, FLAC, MP3, OGG Vorbis";

/// Source rates the resampler accepts. Below 1 kHz no speech survives and the FFT sizes for a
/// ratio to 16 kHz grow without bound; 768 kHz is the highest rate audio hardware records.
const MIN_RATE: u32 = 1_000;
const MAX_RATE: u32 = 768_000;

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
            Ok(buffer) => mono.push(&buffer).map_err(fail)?,
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
    if mono.frames_in == 0 {
        if let Some((msg, _)) = first_bad {
            return Err(fail(format!("no decodable audio in {bad_packets} {format} packets (first error: {msg})")));
        }
        // Readers drop frames that fail their checksums (FLAC) or stop at a cut, so a file whose
        // header announces audio may still yield none: that is damage, not silence.
        if let (Some(frames @ 1..), Some(rate @ 1..)) = (mono.expected_frames, mono.rate) {
            let seconds = frames as f64 / f64::from(rate);
            return Err(fail(format!(
                "no audio decoded, though the header announces {seconds:.3} s (truncated or damaged file)"
            )));
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
    mono.finish(format, warnings).map_err(fail)
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

/// Downmix to mono, the non-finite check and the resampler, fed one decoded buffer at a time.
struct Mono<S: SampleSink> {
    /// Rate and channels of the stream: from the codec parameters until the first buffer
    /// arrives, then from the buffers (which must all agree).
    rate: Option<u32>,
    channels: Option<usize>,
    expected_frames: Option<u64>,
    /// Created with the first buffer, from its rate, into the store (held here until then).
    resampler: Option<To16k<S>>,
    store: Option<S>,
    frames_in: u64,
    /// The current buffer, interleaved, as symphonia converts it to f32.
    interleaved: Vec<f32>,
    mono: Vec<f32>,
}

impl<S: SampleSink> Mono<S> {
    fn new(rate: Option<u32>, channels: Option<usize>, expected_frames: Option<u64>, store: S) -> Self {
        Mono {
            rate,
            channels,
            expected_frames,
            resampler: None,
            store: Some(store),
            frames_in: 0,
            interleaved: Vec::new(),
            mono: Vec::new(),
        }
    }

    fn push(&mut self, buffer: &GenericAudioBufferRef<'_>) -> Result<(), String> {
        let (rate, channels, frames) = (buffer.spec().rate(), buffer.num_planes(), buffer.frames());
        if frames == 0 {
            return Ok(());
        }
        if self.resampler.is_none() {
            if !(MIN_RATE..=MAX_RATE).contains(&rate) {
                return Err(format!("unsupported sample rate {rate} Hz (supported: {MIN_RATE} to {MAX_RATE} Hz)"));
            }
            if channels == 0 {
                return Err("the audio has no channels".into());
            }
            let store = self.store.take().ok_or("the resampler was made twice")?;
            self.resampler = Some(To16k::into_store(rate, self.expected_frames, store)?);
            (self.rate, self.channels) = (Some(rate), Some(channels));
        } else if self.rate != Some(rate) || self.channels != Some(channels) {
            return Err(format!(
                "the stream changes from {} Hz, {} channels to {rate} Hz, {channels} channels after {}; \
                 only streams of one format are supported",
                self.rate.unwrap_or(0),
                self.channels.unwrap_or(0),
                self.position()
            ));
        }
        buffer.copy_to_vec_interleaved(&mut self.interleaved);
        self.mono.clear();
        // The plain average of the channels, summed in f64 so that finite samples of any
        // magnitude give a finite mean.
        self.mono.extend(
            self.interleaved
                .chunks_exact(channels)
                .map(|frame| (frame.iter().map(|&s| f64::from(s)).sum::<f64>() / channels as f64) as f32),
        );
        if let Some(bad) = self.mono.iter().position(|s| !s.is_finite()) {
            let seconds = (self.frames_in + bad as u64) as f64 / f64::from(rate);
            return Err(format!("the audio contains NaN or infinite samples (the first at {seconds:.3} s)"));
        }
        self.frames_in += frames as u64;
        match &mut self.resampler {
            Some(resampler) => resampler.push(&self.mono),
            None => Ok(()),
        }
    }

    /// A warning when the container announced more audio than was decoded (by more than a
    /// tenth of a second, which covers codecs' encoder delay and padding).
    fn missing(&self) -> Option<String> {
        let (expected, rate) = (self.expected_frames?, u64::from(self.rate?));
        if rate == 0 || expected <= self.frames_in + rate / 10 {
            return None;
        }
        Some(format!(
            "the header announces {:.3} s of audio, but decoding stopped at {}: the file looks truncated or \
             damaged; the audio before that point is transcribed",
            expected as f64 / rate as f64,
            self.position()
        ))
    }

    /// How far decoding got, for messages.
    fn position(&self) -> String {
        match self.rate {
            Some(rate) if rate > 0 => format!("{:.3} s", self.frames_in as f64 / f64::from(rate)),
            _ => format!("{} frames", self.frames_in),
        }
    }

    fn finish(self, format: String, warnings: Vec<String>) -> Result<Decoded<S>, String> {
        let samples = match (self.resampler, self.store) {
            (Some(resampler), _) => resampler.finish()?,
            (None, Some(store)) => store.finish()?,
            (None, None) => return Err("the audio store was lost".into()),
        };
        Ok(Decoded {
            samples,
            source_rate: self.rate.unwrap_or(0),
            channels: self.channels.unwrap_or(0),
            format,
            warnings,
        })
    }
}
