//! Encoded audio decoded as it is read, in the browser, by the audio front end the command
//! uses (`susurrus-audio`): its demuxers split the file (WAV, AIFF, CAF, MP3, OGG, FLAC, raw
//! AAC, MP4/M4A, Matroska/WebM) into packets and its decoders decode the lossless codecs (PCM, FLAC, ALAC),
//! exactly in every browser; every lossy one is decoded by the browser's own decoders
//! (WebCodecs `AudioDecoder`: MP3, AAC, Opus, Vorbis),
//! brought to the front end here as a [`Codec`]. What comes out goes through the same downmix,
//! checks and 16 kHz resampler as natively into a [`SampleSink`], [`JsSamples`] for a
//! transcription: so neither the file nor its decoded audio is ever whole in memory, and a
//! damaged or cut file gives the audio before the damage and the command's warning.
//!
//! A file this decoder cannot read (another container; a codec the browser lacks; no WebCodecs
//! at all) is [`Decoding::Unsupported`]: the caller decodes it with
//! WebAudio on the page instead, whole.

mod source;
mod webcodecs;

use susurrus_audio::{Codec, Codecs, Flow, Here, Mono, Opened, SampleSink, Skipped, Symphonia, Unsupported};
use symphonia_core::codecs::audio::AudioCodecParameters;
use symphonia_core::codecs::audio::well_known::{CODEC_ID_AAC, CODEC_ID_MP3, CODEC_ID_OPUS, CODEC_ID_VORBIS};
use symphonia_core::formats::Track;
use symphonia_core::formats::probe::{Hint, Probe};
use symphonia_core::packet::Packet;

pub use source::Bytes;
use source::Source;
pub use susurrus_audio::{Decoded, JsSamples};
use webcodecs::{Config, Decoder};

use crate::global::next_task;

/// Packets the browser's decoder may have queued before the loop waits for it: enough to keep
/// it busy, few enough that little encoded audio waits in memory.
const MAX_QUEUED: u32 = 32;

/// Bytes symphonia reads from the file at a time (a `Blob` is read a block at a time with
/// `FileReaderSync`, whose every call costs).
const READ_BLOCK: usize = 1 << 20;

/// What [`decode`] made of a file.
pub enum Decoding<S> {
    Decoded(Decoded<S>),
    /// This decoder cannot read the file (why, for messages); WebAudio may.
    Unsupported(String),
}

/// Decodes the file in `bytes` into `store`. Errors say what was wrong with the file.
pub async fn decode<S: SampleSink>(bytes: Bytes, store: S) -> Result<Decoding<S>, String> {
    if bytes.is_empty() {
        return Err("the audio is empty (0 bytes)".into());
    }
    let source = Box::new(Source::new(bytes));
    Ok(match susurrus_audio::decode(source, &Hint::new(), READ_BLOCK, &mut BrowserCodecs, store).await? {
        susurrus_audio::Decoding::Decoded(decoded) => Decoding::Decoded(decoded),
        susurrus_audio::Decoding::Unsupported(Unsupported::Container) => {
            Decoding::Unsupported("an unknown container".into())
        }
        susurrus_audio::Decoding::Unsupported(Unsupported::Codec { codec, .. }) => {
            Decoding::Unsupported(format!("a codec the streaming decoder does not know ({codec})"))
        }
        susurrus_audio::Decoding::Unsupported(Unsupported::Decoder(why)) => Decoding::Unsupported(why),
    })
}

/// The browser's choice of decoders: symphonia's for the lossless codecs (PCM, FLAC), so that
/// their samples are exact in every browser (Chromium 148's WebCodecs FLAC was 2e-5 off);
/// WebCodecs for the lossy ones.
struct BrowserCodecs;

/// The decoder of one track.
enum BrowserCodec {
    Here(Here),
    WebCodecs(WebCodecsTrack),
}

impl Codecs for BrowserCodecs {
    type Codec = BrowserCodec;

    fn probe(&self) -> Probe {
        susurrus_audio::formats::probe()
    }

    async fn open(
        &mut self,
        track: &Track,
        params: &AudioCodecParameters,
        container: &str,
    ) -> Result<Opened<BrowserCodec>, String> {
        if let Some(here) = Here::open(&Symphonia::lossless(), params, container)? {
            return Ok(Opened::Codec(BrowserCodec::Here(here)));
        }
        let Some(config) = browser_config(params) else {
            return Ok(Opened::Unsupported(Unsupported::Codec { container: container.into(), codec: params.codec }));
        };
        // The format's name ("mp4/aac"), whatever the codec string ("mp4a.40.2").
        let name = if params.codec == CODEC_ID_AAC { "aac".to_string() } else { config.codec.clone() };
        if !webcodecs::available() {
            return Ok(Opened::Unsupported(Unsupported::Decoder(format!(
                "{name} audio, and this browser has no WebCodecs AudioDecoder"
            ))));
        }
        let decoder = match Decoder::open(&config).await {
            Ok(Some(decoder)) => decoder,
            Ok(None) => {
                return Ok(Opened::Unsupported(Unsupported::Decoder(format!(
                    "{name} audio, which this browser's AudioDecoder does not decode"
                ))));
            }
            Err(e) => return Err(format!("cannot start the browser's {name} decoder: {e}")),
        };
        // Packet durations count frames where the track's time base is one frame.
        let in_frames = track
            .time_base
            .zip(params.sample_rate)
            .is_some_and(|(base, rate)| base.numer.get() == 1 && base.denom.get() == rate);
        Ok(Opened::Codec(BrowserCodec::WebCodecs(WebCodecsTrack {
            decoder,
            name,
            trim: Trim::default(),
            in_frames,
            // The browser's Vorbis and Opus decoders drop the start's delay themselves (the
            // first packet's lapped half, the pre-skip); its MP3 decoder does not know the
            // delay (the LAME header's), so symphonia's count is cut here. The end's padding is
            // cut here for every codec: a decoder cannot know where the stream's last packet
            // ends.
            starts_untrimmed: params.codec == CODEC_ID_MP3,
        })))
    }
}

impl Codec for BrowserCodec {
    fn name(&self) -> &str {
        match self {
            BrowserCodec::Here(here) => here.name(),
            BrowserCodec::WebCodecs(track) => &track.name,
        }
    }

    async fn decode<S: SampleSink>(
        &mut self,
        packet: &Packet,
        mono: &mut Mono<S>,
        skipped: &mut Skipped,
    ) -> Result<Flow, String> {
        match self {
            BrowserCodec::Here(here) => here.decode(packet, mono, skipped).await,
            BrowserCodec::WebCodecs(track) => track.decode(packet, mono).await,
        }
    }

    async fn flush<S: SampleSink>(&mut self, mono: &mut Mono<S>) -> Result<Flow, String> {
        match self {
            BrowserCodec::Here(here) => here.flush(mono).await,
            BrowserCodec::WebCodecs(track) => track.flush(mono).await,
        }
    }
}

/// A track the browser's WebCodecs decoder decodes.
struct WebCodecsTrack {
    decoder: Decoder,
    name: String,
    trim: Trim,
    /// Whether packets' trims count frames (the track's time base is one frame).
    in_frames: bool,
    /// Whether the decoder keeps the encoder's delay at the start, which is cut here.
    starts_untrimmed: bool,
}

impl WebCodecsTrack {
    async fn decode<S: SampleSink>(&mut self, packet: &Packet, mono: &mut Mono<S>) -> Result<Flow, String> {
        if self.in_frames {
            let start = if self.starts_untrimmed { packet.trim_start.get() } else { 0 };
            self.trim.packet(start, packet.trim_end.get());
        }
        let mut decoded = self.decoder.decode(&packet.data).and_then(|()| self.trim.drain(&self.decoder, mono));
        while decoded.is_ok() && self.decoder.queued() > MAX_QUEUED {
            next_task().await;
            decoded = self.trim.drain(&self.decoder, mono);
        }
        match decoded {
            Ok(()) => Ok(Flow::Go),
            // The browser's decoder decodes nothing more after an error.
            Err(e) => {
                self.trim.finish(mono)?;
                Ok(Flow::Stopped(e))
            }
        }
    }

    async fn flush<S: SampleSink>(&mut self, mono: &mut Mono<S>) -> Result<Flow, String> {
        let flushed = self.decoder.flush().await.and_then(|()| self.trim.drain(&self.decoder, mono));
        self.trim.finish(mono)?;
        Ok(match flushed {
            Ok(()) => Flow::Go,
            Err(e) => Flow::Stopped(e),
        })
    }
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

/// The WebCodecs configuration of a track, where the browser's decoders may know its codec.
fn browser_config(params: &AudioCodecParameters) -> Option<Config> {
    let extra = params.extra_data.as_deref();
    let (codec, description) = match params.codec {
        CODEC_ID_MP3 => ("mp3".to_string(), None),
        // MP4's dOps becomes the OpusHead WebCodecs wants; Matroska may leave it out (plain
        // mono or stereo), as WebCodecs allows.
        CODEC_ID_OPUS => (
            "opus".to_string(),
            match extra {
                Some(extra) => Some(susurrus_audio::ogg_opus_head(extra)?),
                None => None,
            },
        ),
        CODEC_ID_AAC => {
            // Raw AAC (ADTS) states its configuration in each frame's header, which the reader
            // strips: the AudioSpecificConfig of AAC-LC at the stream's rate and channels
            // stands in, as symphonia's own decoder assumes AAC-LC.
            let config = match extra {
                Some(config) => config.to_vec(),
                None => aac_lc_config(params.sample_rate?, params.channels.as_ref()?.count())?,
            };
            (aac_codec(&config)?, Some(config))
        }
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

/// The two-byte AudioSpecificConfig of an AAC-LC stream: object type 2, the rate's index,
/// the channel configuration (ISO 14496-3, 1.6.2.1).
fn aac_lc_config(rate: u32, channels: usize) -> Option<Vec<u8>> {
    const RATES: [u32; 13] =
        [96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000, 12_000, 11_025, 8_000, 7_350];
    let index = RATES.iter().position(|&r| r == rate)? as u16;
    let channels = u16::try_from(channels).ok().filter(|c| (1..=7).contains(c))?;
    Some(((2u16 << 11) | (index << 7) | (channels << 3)).to_be_bytes().to_vec())
}

/// The WebCodecs codec string of an AAC track, `mp4a.40.{object type}`, from its
/// AudioSpecificConfig (MP4's `esds`, Matroska's CodecPrivate): 2 for AAC-LC, 5 and 29 for
/// HE-AAC (v2). Without one the browser would expect ADTS headers that MP4 and Matroska lack.
fn aac_codec(config: &[u8]) -> Option<String> {
    let first = *config.first()?;
    let object_type = match first >> 3 {
        // An escape: 32 plus the next six bits.
        31 => 32 + (((first & 0b111) << 3) | (config.get(1)? >> 5)),
        object_type => object_type,
    };
    (object_type != 0).then(|| format!("mp4a.40.{object_type}"))
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
    fn aac_codec_strings_come_from_the_audio_specific_config() {
        // AAC-LC, 44.1 kHz, stereo (FFmpeg's esds for the m4a fixture); HE-AAC; an escaped type.
        assert_eq!(aac_codec(&[0x12, 0x10]).as_deref(), Some("mp4a.40.2"));
        assert_eq!(aac_codec(&[0x2b, 0x92, 0x08, 0x00]).as_deref(), Some("mp4a.40.5"));
        assert_eq!(aac_codec(&[0xf8, 0x40]).as_deref(), Some("mp4a.40.34"));
        assert_eq!(aac_codec(&[0xf8]), None);
        assert_eq!(aac_codec(&[]), None);
        assert_eq!(aac_codec(&[0x00, 0x00]), None);
        // Raw AAC's stand-in: the same two bytes FFmpeg writes for AAC-LC at 44.1 kHz stereo,
        // and 22.05 kHz mono (0x13 0x88).
        assert_eq!(aac_lc_config(44_100, 2), Some(vec![0x12, 0x10]));
        assert_eq!(aac_lc_config(22_050, 1), Some(vec![0x13, 0x88]));
        assert_eq!(aac_lc_config(44_000, 2), None);
    }

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
