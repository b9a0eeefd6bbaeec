//! The packet loop: probe the container, open its first audio track's decoder, feed it every
//! packet, and turn every failure into a message about the input. Damage a file survives
//! becomes a warning and the audio before it: a stream cut short (the commonest broken
//! download), undecodable packets (skipped, as FFmpeg does), a decoder that gives up.

use symphonia_core::codecs::CodecParameters;
use symphonia_core::errors::Error as SymphoniaError;
use symphonia_core::formats::probe::Hint;
use symphonia_core::formats::{FormatOptions, FormatReader, TrackType};
use symphonia_core::io::{MediaSource, MediaSourceStream, MediaSourceStreamOptions};
use symphonia_core::meta::MetadataOptions;

use crate::SAMPLE_RATE;
use crate::codec::{Codec, Codecs, Flow, Opened, Skipped};
use crate::counted::Counted;
use crate::damage::{Gaps, mp3_cut};
use crate::formats::{Unsupported, format_name};
use susurrus_whisper::audio::{Mono, SampleSink};

/// 16 kHz mono f32 PCM in [-1, 1] plus what the source was.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<S = Vec<f32>> {
    /// The average of the source's channels at [`SAMPLE_RATE`]: `ceil(frames * 16000 /
    /// source_rate)` samples for `frames` source frames.
    pub samples: S,
    /// The source's sample rate in Hz (0 when a file without samples does not state it).
    pub source_rate: u32,
    /// The source's channel count (0 when a file without samples does not state it).
    pub channels: usize,
    /// The container and codec: "wav", "flac", "mp3", "ogg/vorbis".
    pub format: String,
    /// What was wrong with a file that still gave audio: where a truncated file ends, packets
    /// skipped as undecodable. The audio is what could be decoded.
    pub warnings: Vec<String>,
}

impl<S: SampleSink> Decoded<S> {
    /// The length of the audio in seconds.
    pub fn duration(&self) -> f64 {
        self.samples.count() as f64 / f64::from(SAMPLE_RATE)
    }
}

/// What [`decode()`] made of a file.
pub enum Decoding<S> {
    Decoded(Decoded<S>),
    /// The front end cannot read the file; the caller words the message (the command refuses
    /// it, the browser package hands it to WebAudio).
    Unsupported(Unsupported),
}

/// Decodes the stream in `source` to 16 kHz mono into `store`, a packet at a time, with the
/// decoders `codecs` picks; `hint` (a file's extension) helps the probe where the content is
/// ambiguous; symphonia reads `read_block` bytes at a time. Errors say what is wrong with the
/// input.
pub async fn decode<'a, C: Codecs, S: SampleSink>(
    source: Box<dyn MediaSource + 'a>,
    hint: &Hint,
    read_block: usize,
    codecs: &mut C,
    store: S,
) -> Result<Decoding<S>, String> {
    let (seekable, length) = (source.is_seekable(), source.byte_len());
    let (source, read) = Counted::new(source);
    let mss = MediaSourceStream::new(Box::new(source), MediaSourceStreamOptions { buffer_len: read_block });
    let reader = match codecs.probe().probe(hint, mss, FormatOptions::default(), MetadataOptions::default()) {
        Ok(reader) => reader,
        // A stream that gave no byte at all is empty, whatever the probe made of it.
        Err(_) if read.furthest() == 0 => return Err("empty file".into()),
        // An MP4's index (`moov`) holds every packet's place; written after the media data (as
        // cameras and FFmpeg without `+faststart` do) it is out of a stream's reach, and a cut
        // file loses it.
        Err(_) if read.mp4_index_missing() && !seekable => {
            return Err("an MP4 whose index (moov box) follows its media data cannot be read from a stream: \
                        pass the file itself, or rewrite it with the index first \
                        (ffmpeg -i IN -c copy -movflags +faststart OUT)"
                .into());
        }
        Err(_) if read.mp4_index_missing() => {
            return Err(format!(
                "truncated MP4: the file ends at byte {} without its index (moov box), which holds where \
                 the audio is; nothing can be decoded without it",
                length.unwrap_or_else(|| read.furthest())
            ));
        }
        Err(SymphoniaError::Unsupported(_)) => return Ok(Decoding::Unsupported(Unsupported::Container)),
        // CAF's packet table (of ALAC and AAC) may follow the audio data, out of a stream's reach.
        Err(SymphoniaError::IoError(e))
            if e.kind() == std::io::ErrorKind::UnexpectedEof && !seekable && read.starts_with(b"caff") =>
        {
            return Err("a CAF file whose packet table follows its audio cannot be read from a stream: pass the \
                        file itself"
                .into());
        }
        Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            // The probe reads the headers and, for OGG, the whole first page of audio, which
            // FFmpeg fills with up to a second.
            return Err("truncated file: it ends before its first audio packet".into());
        }
        Err(SymphoniaError::IoError(e)) => return Err(format!("cannot read: {e}")),
        Err(e) => return Err(format!("damaged file: {e}")),
    };
    Packets { reader, cut_at: None, read }.run(codecs, store).await
}

/// An open audio track.
struct Track<C> {
    id: u32,
    /// The frame count, where the container states it.
    frames: Option<u64>,
    gaps: Gaps,
    rate: Option<u32>,
    channels: Option<usize>,
    codec: C,
}

struct Packets<'a> {
    reader: Box<dyn FormatReader + 'a>,
    /// The byte where the stream ended inside a packet.
    cut_at: Option<u64>,
    read: crate::counted::Seen,
}

impl Packets<'_> {
    /// The short name of the container.
    fn container(&self) -> &'static str {
        match self.reader.format_info().short_name {
            "wave" => "wav",
            "isomp4" => "mp4",
            other => other,
        }
    }

    /// The first audio track and its decoder.
    async fn open<C: Codecs>(&self, codecs: &mut C) -> Result<Result<Track<C::Codec>, Unsupported>, String> {
        let container = self.container();
        let track = self
            .reader
            .default_track(TrackType::Audio)
            .ok_or_else(|| format!("no audio track in this {container} file"))?;
        let params = track
            .codec_params
            .as_ref()
            .and_then(CodecParameters::audio)
            .ok_or_else(|| format!("the audio track of this {container} file has no codec parameters"))?;
        Ok(match codecs.open(track, params, container).await? {
            Opened::Codec(codec) => Ok(Track {
                id: track.id,
                frames: track.num_frames,
                gaps: Gaps::new(container, track, params.sample_rate),
                rate: params.sample_rate,
                channels: params.channels.as_ref().map(|c| c.count()),
                codec,
            }),
            Opened::Unsupported(why) => Err(why),
        })
    }

    /// The duration a Matroska file states for its segment, in seconds (other containers'
    /// stated lengths reach the track's frame count instead).
    fn stated_seconds(&self) -> Option<f64> {
        if self.container() != "matroska" {
            return None;
        }
        let info = self.reader.media_info();
        let (base, duration) = (info.time_base?, info.duration?);
        Some(duration.get() as f64 * f64::from(base.numer.get()) / f64::from(base.denom.get()))
    }

    async fn run<C: Codecs, S: SampleSink>(mut self, codecs: &mut C, store: S) -> Result<Decoding<S>, String> {
        let container = self.container();
        let Track { id: mut track_id, frames, mut gaps, rate, channels, mut codec } = match self.open(codecs).await? {
            Ok(track) => track,
            Err(why) => return Ok(Decoding::Unsupported(why)),
        };
        let format = format_name(container, codec.name());
        let mut mono = Mono::new(rate, channels, frames, store);
        if let (Some(edit), Some(rate)) = (self.read.mp4_edit(track_id), rate) {
            let (skip, keep) = edit.frames(rate);
            mono.edit(skip, keep);
        }
        let mut skipped = Skipped::default();
        // The last MP3 frame, to tell a cut one behind it at the end.
        let mut last_mp3 = Vec::new();
        loop {
            let packet = match self.reader.next_packet() {
                Ok(Some(packet)) => packet,
                Ok(None) => {
                    if container == "mp3" && self.read.tail().is_some_and(|tail| mp3_cut(&tail, &last_mp3)) {
                        self.cut_at = Some(self.read.furthest());
                    }
                    break;
                }
                // A WAV written to a pipe states no length (0xFFFFFFFF): its reader reads packets
                // until the stream ends, so the end of the stream is the end of the audio, as is
                // the end of a Matroska segment (read as a stream, its reader looks past it). An OGG
                // reader that lost pages looks for more after the last one (the lost pages have
                // their own warning).
                Err(SymphoniaError::IoError(e))
                    if e.kind() == std::io::ErrorKind::UnexpectedEof
                        && ((container == "wav" && frames.is_none())
                            || (container == "ogg" && self.read.ogg_ends_without_a_cut())
                            || (container == "matroska" && self.read.matroska_read_whole())) =>
                {
                    break;
                }
                // A stream cut short (a truncated file): keep everything before the cut, and say so.
                Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    self.cut_at = Some(self.read.furthest());
                    break;
                }
                // A chained stream started a new logical stream: carry on with its decoder.
                // Mono rejects a change of rate or channel count.
                Err(SymphoniaError::ResetRequired) => {
                    if let Flow::Stopped(e) = codec.flush(&mut mono).await? {
                        return stopped(mono, format, &e);
                    }
                    match self.open(codecs).await? {
                        Ok(track) => {
                            gaps.restart(track.gaps);
                            (track_id, codec) = (track.id, track.codec);
                        }
                        Err(why) => return Ok(Decoding::Unsupported(why)),
                    }
                    continue;
                }
                Err(SymphoniaError::IoError(e)) => return Err(format!("cannot read: {e}")),
                Err(e) => return Err(format!("damaged {container} stream after {}: {e}", mono.position())),
            };
            if packet.track_id != track_id {
                continue;
            }
            let missing = gaps.before(&packet, || mono.position());
            mono.push_silence(missing)?;
            if container == "mp3" {
                last_mp3.clear();
                last_mp3.extend_from_slice(&packet.data);
            }
            if let Flow::Stopped(e) = codec.decode(&packet, &mut mono, &mut skipped).await? {
                return stopped(mono, format, &e);
            }
        }
        if let Flow::Stopped(e) = codec.flush(&mut mono).await? {
            return stopped(mono, format, &e);
        }
        if mono.frames_in() == 0 {
            if let Some((msg, _)) = &skipped.first {
                return Err(format!("no decodable audio in {} {format} packets (first error: {msg})", skipped.count));
            }
            if let Some(damage) = mono.nothing_decoded() {
                return Err(damage);
            }
        }
        let mut warnings = Vec::new();
        if let Some((msg, at)) = &skipped.first {
            let packets = if skipped.count == 1 { "packet" } else { "packets" };
            warnings
                .push(format!("skipped {} undecodable {format} {packets} (the first at {at}: {msg})", skipped.count));
        }
        warnings.extend(gaps.warning(rate));
        let lost = self.read.lost_pages();
        if let (Some(granule), Some(rate @ 1..)) = (lost.first_after, rate) {
            let places = if lost.places == 1 { "one place".to_string() } else { format!("{} places", lost.places) };
            warnings.push(format!(
                "damaged OGG pages were skipped in {places} (the first after {:.3} s): the file looks damaged; \
                 the audio they held is missing",
                granule as f64 / f64::from(rate)
            ));
        }
        if let Some(byte) = self.cut_at {
            warnings.push(format!(
                "the file ends inside a packet at byte {byte}, after {} of audio: it looks truncated; the audio \
                 before the cut is transcribed",
                mono.position()
            ));
        } else if let Some(missing) = mono.missing() {
            warnings.push(missing);
        } else if let Some(stated) = self.stated_seconds().filter(|&stated| seconds(&mono, rate) + 0.5 < stated) {
            // A Matroska reader that meets damaged data skips what it cannot parse and may
            // find no more blocks, without an error: the file's stated duration tells. It is the
            // segment's (a video's may run a little past its audio), hence half a second's slack.
            warnings.push(format!(
                "the file states {stated:.3} s, but its audio stops at {}: the file looks damaged there; the audio \
                 before that point is transcribed",
                mono.position()
            ));
        }
        finish(mono, format, warnings)
    }
}

/// The seconds of audio decoded so far.
fn seconds<S: SampleSink>(mono: &Mono<S>, rate: Option<u32>) -> f64 {
    rate.filter(|&r| r > 0).map_or(0.0, |r| mono.frames_in() as f64 / f64::from(r))
}

fn finish<S: SampleSink>(mono: Mono<S>, format: String, warnings: Vec<String>) -> Result<Decoding<S>, String> {
    let (samples, source_rate, channels) = mono.finish()?;
    Ok(Decoding::Decoded(Decoded { samples, source_rate, channels, format, warnings }))
}

/// The decoder failed and decodes nothing more: with audio before the failure that audio is
/// kept and a warning says where it stopped; without, it is the file's error.
fn stopped<S: SampleSink>(mono: Mono<S>, format: String, error: &str) -> Result<Decoding<S>, String> {
    if mono.frames_in() == 0 {
        return Err(format!("cannot decode this {format} file: {error}"));
    }
    let warning = format!(
        "decoding stopped at {} ({error}): the file looks damaged; the audio before that point is transcribed",
        mono.position()
    );
    finish(mono, format, vec![warning])
}
