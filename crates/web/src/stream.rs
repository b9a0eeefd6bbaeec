//! Encoded audio decoded as it is read, in the browser: symphonia's demuxers split the file
//! (WAV, MP3, OGG, FLAC: the containers the native command reads) into packets; the lossless
//! codecs (PCM, FLAC) are decoded here by the command's decoders, exactly in every browser,
//! every lossy one by the browser's own decoders (WebCodecs `AudioDecoder`: MP3, Opus, Vorbis). What comes out goes through whisper's [`Mono`] (the same
//! downmix, checks and 16 kHz resampler as the native command's) into a [`SampleSink`],
//! [`JsSamples`] for a transcription: so neither the file nor its decoded audio is ever
//! whole in memory, and a damaged or cut file gives the audio before the damage and a warning.
//!
//! A file this decoder cannot read (another container, such as WebM or MP4, whose readers would
//! grow the module by 150 KB gzipped; a codec the browser lacks; no WebCodecs at all) is [`Decoding::Unsupported`]: the caller decodes it with
//! WebAudio on the page instead, whole.

mod source;
mod store;
mod webcodecs;

use susurrus_whisper::audio::{Mono, SampleSink};
use symphonia_core::codecs::CodecParameters;
use symphonia_core::codecs::audio::well_known::{CODEC_ID_MP3, CODEC_ID_OPUS, CODEC_ID_VORBIS};
use symphonia_core::codecs::audio::{AudioCodecParameters, AudioDecoder, AudioDecoderOptions};
use symphonia_core::codecs::registry::CodecRegistry;
use symphonia_core::errors::Error as SymphoniaError;
use symphonia_core::formats::probe::{Hint, Probe};
use symphonia_core::formats::{FormatOptions, TrackType};
use symphonia_core::io::{MediaSourceStream, MediaSourceStreamOptions};
use symphonia_core::meta::MetadataOptions;

pub use source::Bytes;
use source::Source;
pub use store::JsSamples;
use webcodecs::{Config, Decoder};

use crate::global::next_task;

/// Packets the browser's decoder may have queued before the loop waits for it: enough to keep
/// it busy, few enough that little encoded audio waits in memory.
const MAX_QUEUED: u32 = 32;

/// Bytes symphonia reads from the file at a time.
const READ_BLOCK: usize = 1 << 20;

/// A decoded file.
pub struct Decoded<S> {
    pub samples: S,
    /// The container and codec ("wav", "mp3", "flac", "ogg/vorbis", "ogg/opus").
    pub format: String,
    /// What was wrong with a file that still gave audio (where a cut file ends, where the
    /// decoder stopped on damage).
    pub warnings: Vec<String>,
}

/// What [`decode`] made of a file.
pub enum Decoding<S> {
    Decoded(Decoded<S>),
    /// This decoder cannot read the file (why, for messages); WebAudio may.
    Unsupported(String),
}

/// The decoder of one codec: symphonia's (PCM), or the browser's.
enum Codec {
    Here(Box<dyn AudioDecoder>),
    Browser(Decoder),
}

/// Decodes the file in `bytes` into `store`. Errors say what was wrong with the file.
pub async fn decode<S: SampleSink>(bytes: Bytes, store: S) -> Result<Decoding<S>, String> {
    if bytes.is_empty() {
        return Err("the audio is empty (0 bytes)".into());
    }
    let source =
        MediaSourceStream::new(Box::new(Source::new(bytes)), MediaSourceStreamOptions { buffer_len: READ_BLOCK });
    let mut reader = match probe().probe(&Hint::new(), source, FormatOptions::default(), MetadataOptions::default()) {
        Ok(reader) => reader,
        Err(SymphoniaError::Unsupported(_)) => return Ok(Decoding::Unsupported("an unknown container".into())),
        Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err("truncated file: it ends before its first audio packet".into());
        }
        Err(e) => return Err(format!("damaged file: {e}")),
    };
    let container = match reader.format_info().short_name {
        "wave" => "wav",
        other => other,
    };
    let track =
        reader.default_track(TrackType::Audio).ok_or_else(|| format!("no audio track in this {container} file"))?;
    let (track_id, expected_frames, time_base) = (track.id, track.num_frames, track.time_base);
    let Some(params) = track.codec_params.as_ref().and_then(CodecParameters::audio).cloned() else {
        return Err(format!("the audio track of this {container} file has no codec parameters"));
    };
    let (mut codec, codec_name) = match open_codec(&params).await? {
        Ok(opened) => opened,
        Err(why) => return Ok(Decoding::Unsupported(why)),
    };
    let format = if codec_name == container || (container == "wav" && codec_name == "pcm") {
        container.to_string()
    } else {
        format!("{container}/{codec_name}")
    };
    let channels = params.channels.as_ref().map(|c| c.count());
    let mut mono = Mono::new(params.sample_rate, channels, expected_frames, store);
    let mut trim = Trim::default();
    // The browser's Vorbis and Opus decoders drop the start's delay themselves (the first
    // packet's lapped half, the pre-skip); its MP3 decoder does not know the delay (the LAME
    // header's), so symphonia's count is cut here. The end's padding
    // is cut here for every codec: a decoder cannot know where the stream's last packet ends.
    let starts_untrimmed = params.codec == CODEC_ID_MP3;
    // Packet durations count frames where the track's time base is one frame.
    let in_frames =
        time_base.zip(params.sample_rate).is_some_and(|(base, rate)| base.numer.get() == 1 && base.denom.get() == rate);
    let mut warnings = Vec::new();
    let mut interleaved = Vec::new();
    let mut bad_packets = 0usize;
    let mut first_bad = None;
    let mut cut = false;
    loop {
        let packet = match reader.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                cut = true;
                break;
            }
            Err(SymphoniaError::ResetRequired) => {
                warnings.push(format!(
                    "a second stream is chained after {}; only the first is transcribed",
                    mono.position()
                ));
                break;
            }
            Err(SymphoniaError::IoError(e)) => return Err(format!("cannot read: {e}")),
            Err(e) => return Err(format!("damaged {container} stream after {}: {e}", mono.position())),
        };
        if packet.track_id != track_id {
            continue;
        }
        match &mut codec {
            Codec::Here(decoder) => match decoder.decode(&packet) {
                Ok(buffer) => {
                    buffer.copy_to_vec_interleaved(&mut interleaved);
                    mono.push_interleaved(buffer.spec().rate(), buffer.num_planes(), &interleaved)?;
                }
                // One undecodable packet is skipped, as natively.
                Err(SymphoniaError::DecodeError(msg)) => {
                    bad_packets += 1;
                    first_bad.get_or_insert((msg.to_string(), mono.position()));
                }
                Err(e) => return Err(format!("cannot decode {format} after {}: {e}", mono.position())),
            },
            Codec::Browser(decoder) => {
                if in_frames {
                    let start = if starts_untrimmed { packet.trim_start.get() } else { 0 };
                    trim.packet(start, packet.trim_end.get());
                }
                let mut decoded = decoder.decode(&packet.data).and_then(|()| trim.drain(decoder, &mut mono));
                while decoded.is_ok() && decoder.queued() > MAX_QUEUED {
                    next_task().await;
                    decoded = trim.drain(decoder, &mut mono);
                }
                if let Err(e) = decoded {
                    trim.finish(&mut mono)?;
                    stopped(&mono, &format, &e, &mut warnings)?;
                    return finish(mono, format, warnings);
                }
            }
        }
    }
    if let Codec::Browser(decoder) = &codec {
        let flushed = decoder.flush().await.and_then(|()| trim.drain(decoder, &mut mono));
        trim.finish(&mut mono)?;
        if let Err(e) = flushed {
            stopped(&mono, &format, &e, &mut warnings)?;
            return finish(mono, format, warnings);
        }
    }
    if mono.frames_in() == 0 {
        if let Some((msg, _)) = first_bad {
            return Err(format!("no decodable audio in {bad_packets} {format} packets (first error: {msg})"));
        }
        if let Some(damage) = mono.nothing_decoded() {
            return Err(damage);
        }
    }
    if let Some((msg, at)) = first_bad {
        let packets = if bad_packets == 1 { "packet" } else { "packets" };
        warnings.push(format!("skipped {bad_packets} undecodable {format} {packets} (the first at {at}: {msg})"));
    }
    if cut {
        warnings.push(format!(
            "the file ends inside a packet, after {} of audio: it looks truncated; the audio before the cut is \
             transcribed",
            mono.position()
        ));
    } else if let Some(missing) = mono.missing() {
        warnings.push(missing);
    }
    finish(mono, format, warnings)
}

fn finish<S: SampleSink>(mono: Mono<S>, format: String, warnings: Vec<String>) -> Result<Decoding<S>, String> {
    let (samples, _, _) = mono.finish()?;
    Ok(Decoding::Decoded(Decoded { samples, format, warnings }))
}

/// The browser's decoder failed (it decodes nothing more after an error): with audio before
/// the failure that audio is kept and a warning says where it stopped; without, it is the
/// file's error.
fn stopped<S: SampleSink>(mono: &Mono<S>, format: &str, error: &str, warnings: &mut Vec<String>) -> Result<(), String> {
    if mono.frames_in() == 0 {
        return Err(format!("cannot decode this {format} file: {error}"));
    }
    warnings.push(format!(
        "decoding stopped at {} ({error}): the file looks damaged; the audio before that point is transcribed",
        mono.position()
    ));
    Ok(())
}

/// The frames symphonia's readers mark for cutting from a browser-decoded stream: the
/// encoder's delay at the start (packets' `trim_start`: MP3's from its LAME header, Opus's
/// pre-skip) and its padding at the end (the last packet's `trim_end`), as symphonia's own
/// decoders cut them natively, so that a file gives the same samples in both. The latest
/// decoded buffer waits here until the next one comes or the stream ends, when its end is cut.
#[derive(Default)]
struct Trim {
    /// Frames still to drop from the start.
    skip: u64,
    /// Frames to drop from the end: the last packet's.
    end: u64,
    held: Vec<f32>,
    rate: u32,
    channels: usize,
    plane: Vec<f32>,
    interleaved: Vec<f32>,
}

impl Trim {
    fn packet(&mut self, start: u64, end: u64) {
        self.skip += start;
        self.end = end;
    }

    /// Sends what the browser's decoder has decoded so far on, through the downmix and
    /// resampler.
    fn drain<S: SampleSink>(&mut self, decoder: &Decoder, mono: &mut Mono<S>) -> Result<(), String> {
        while let Some(data) = decoder.next() {
            let read = webcodecs::interleaved(&data, &mut self.plane, &mut self.interleaved);
            let (rate, channels) = (data.sample_rate() as u32, data.number_of_channels() as usize);
            data.close();
            read?;
            if channels == 0 {
                return Err("the decoder gave audio without channels".into());
            }
            let frames = (self.interleaved.len() / channels) as u64;
            let skip = self.skip.min(frames);
            self.skip -= skip;
            if !self.held.is_empty() {
                mono.push_interleaved(self.rate, self.channels, &self.held)?;
            }
            self.held.clear();
            self.held.extend_from_slice(&self.interleaved[skip as usize * channels..]);
            (self.rate, self.channels) = (rate, channels);
        }
        decoder.failed()
    }

    /// Sends the last buffer on, less the end's padding.
    fn finish<S: SampleSink>(&mut self, mono: &mut Mono<S>) -> Result<(), String> {
        if self.held.is_empty() {
            return Ok(());
        }
        let frames = self.held.len() / self.channels;
        let keep = frames - (self.end as usize).min(frames);
        let held = std::mem::take(&mut self.held);
        mono.push_interleaved(self.rate, self.channels, &held[..keep * self.channels])
    }
}

/// The demuxers: the containers the native command reads.
fn probe() -> Probe {
    let mut probe = Probe::default();
    probe.register_format::<symphonia_format_riff::WavReader<'_>>();
    probe.register_format::<symphonia_format_ogg::OggReader<'_>>();
    probe.register_format::<symphonia_bundle_mp3::MpaReader<'_>>();
    probe.register_format::<symphonia_bundle_flac::FlacReader<'_>>();
    probe.register_metadata::<symphonia_metadata::id3v2::Id3v2Reader<'_>>();
    probe
}

/// A decoder for the track and the codec's short name, or why there is none here. The
/// lossless codecs (PCM, FLAC) are decoded here, by the decoders the command uses, so their
/// samples are exact in every browser (Chromium 148's WebCodecs FLAC was 2e-5 off); WebCodecs
/// decodes the lossy ones.
async fn open_codec(params: &AudioCodecParameters) -> Result<Result<(Codec, String), String>, String> {
    let mut here = CodecRegistry::new();
    here.register_audio_decoder::<symphonia_codec_pcm::PcmDecoder>();
    here.register_audio_decoder::<symphonia_bundle_flac::FlacDecoder>();
    if let Ok(decoder) = here.make_audio_decoder(params, &AudioDecoderOptions::default()) {
        // "flac", or "pcm" for every PCM layout ("pcm_s16le", ...).
        let name = decoder.codec_info().short_name.split('_').next().unwrap_or("pcm").to_string();
        return Ok(Ok((Codec::Here(decoder), name)));
    }
    let Some(config) = browser_config(params) else {
        return Ok(Err(format!("a codec the streaming decoder does not know ({})", params.codec)));
    };
    let name = config.codec.clone();
    if !webcodecs::available() {
        return Ok(Err(format!("{name} audio, and this browser has no WebCodecs AudioDecoder")));
    }
    match Decoder::open(&config).await {
        Ok(Some(decoder)) => Ok(Ok((Codec::Browser(decoder), name))),
        Ok(None) => Ok(Err(format!("{name} audio, which this browser's AudioDecoder does not decode"))),
        Err(e) => Err(format!("cannot start the browser's {name} decoder: {e}")),
    }
}

/// The WebCodecs configuration of a track, where the browser's decoders may know its codec.
fn browser_config(params: &AudioCodecParameters) -> Option<Config> {
    let extra = params.extra_data.as_deref();
    let (codec, description) = match params.codec {
        CODEC_ID_MP3 => ("mp3".to_string(), None),
        CODEC_ID_OPUS => ("opus".to_string(), extra.map(<[u8]>::to_vec)),
        CODEC_ID_VORBIS => ("vorbis".to_string(), Some(vorbis_description(extra?)?)),
        _ => return None,
    };
    Some(Config {
        codec,
        sample_rate: params.sample_rate?,
        channels: params.channels.as_ref().map(|c| c.count() as u32)?,
        description,
    })
}

/// Vorbis's description: its three headers, Xiph-laced. symphonia's OGG reader keeps the
/// identification header (30 bytes) followed by the setup header, without the comment header,
/// for which an empty one stands in.
fn vorbis_description(extra: &[u8]) -> Option<Vec<u8>> {
    const IDENTIFICATION: usize = 30;
    if extra.len() <= IDENTIFICATION || !extra.starts_with(b"\x01vorbis") {
        return None;
    }
    let (identification, setup) = extra.split_at(IDENTIFICATION);
    // Packet type 3, "vorbis", an empty vendor string, no comments, the framing bit.
    let comment = [&[3u8][..], b"vorbis", &[0; 8], &[1]].concat();
    let mut description = vec![2u8];
    for len in [identification.len(), comment.len()] {
        description.extend(std::iter::repeat_n(255u8, len / 255));
        description.push((len % 255) as u8);
    }
    description.extend_from_slice(identification);
    description.extend_from_slice(&comment);
    description.extend_from_slice(setup);
    Some(description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vorbis_headers_are_laced_with_an_empty_comment() {
        let mut extra = b"\x01vorbis".to_vec();
        extra.resize(30, 0);
        extra.extend_from_slice(b"\x05vorbis-setup");
        let d = vorbis_description(&extra).unwrap();
        assert_eq!(&d[..3], &[2, 30, 16]);
        assert_eq!(&d[3..33], &extra[..30]);
        assert_eq!(&d[33..49], b"\x03vorbis\0\0\0\0\0\0\0\0\x01");
        assert_eq!(&d[49..], b"\x05vorbis-setup");
        assert_eq!(vorbis_description(b"\x01vorbis"), None);
    }
}
