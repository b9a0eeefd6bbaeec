//! The containers the front end demuxes and the decoders symphonia brings, named once for the
//! command and the browser.

use symphonia_core::codecs::audio::{AudioCodecId, AudioCodecParameters, AudioDecoder, AudioDecoderOptions};
use symphonia_core::codecs::registry::CodecRegistry;
use symphonia_core::errors::Error as SymphoniaError;
use symphonia_core::formats::probe::Probe;

/// Why a file is not decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Unsupported {
    /// No demuxer recognised the container.
    Container,
    /// The track's codec is not one the [`Codecs`](crate::Codecs) decode.
    Codec { container: String, codec: AudioCodecId },
    /// The caller's decoders cannot take it (the browser lacks WebCodecs or the codec): why.
    Decoder(String),
}

/// "wav", "flac", "mp3" when the container implies the codec, else "container/codec".
pub fn format_name(container: &str, codec: &str) -> String {
    if codec == container || (matches!(container, "wav" | "aiff") && codec == "pcm") {
        container.to_string()
    } else {
        format!("{container}/{codec}")
    }
}

/// Every container the command and the browser package read, as they stream: WAV, AIFF, CAF,
/// OGG, MP3 (with its ID3v2 tags), FLAC, raw AAC (ADTS), MP4/M4A/MOV and Matroska/WebM. Of a
/// video file only the first audio track is read; the video's packets are skipped unread by the
/// decode loop.
pub fn probe() -> Probe {
    let mut probe = Probe::default();
    probe.register_format::<symphonia_format_riff::WavReader<'_>>();
    probe.register_format::<symphonia_format_ogg::OggReader<'_>>();
    probe.register_format::<symphonia_bundle_mp3::MpaReader<'_>>();
    probe.register_format::<symphonia_bundle_flac::FlacReader<'_>>();
    probe.register_format::<symphonia_format_isomp4::IsoMp4Reader<'_>>();
    probe.register_format::<symphonia_format_mkv::MkvReader<'_>>();
    probe.register_format::<symphonia_format_riff::AiffReader<'_>>();
    probe.register_format::<symphonia_format_caf::CafReader<'_>>();
    probe.register_format::<symphonia_codec_aac::AdtsReader<'_>>();
    probe.register_metadata::<symphonia_metadata::id3v2::Id3v2Reader<'_>>();
    probe
}

/// symphonia's decoders for a set of codecs. The set is a function that registers them, so
/// that a build which never asks for [`Symphonia::all`] (the browser's) links no lossy decoder.
#[derive(Clone, Copy)]
pub struct Symphonia {
    registry: fn() -> CodecRegistry,
}

impl Symphonia {
    /// The lossless codecs, PCM, FLAC and ALAC: their samples are exact wherever they are
    /// decoded, which the browser's own FLAC decoder is not in every version (Chromium 148's
    /// was 2e-5 off), and WebCodecs has no ALAC, so the browser package decodes them here.
    pub fn lossless() -> Symphonia {
        Symphonia { registry: lossless }
    }

    /// Every codec of the containers above (the command's): the lossless ones and MP3,
    /// Vorbis, AAC-LC and Opus.
    pub fn all() -> Symphonia {
        Symphonia { registry: all }
    }

    /// A decoder for `params`, `Ok(None)` for a codec not in this set, an error for a track
    /// whose decoder cannot start.
    pub fn decoder(
        &self,
        params: &AudioCodecParameters,
        container: &str,
    ) -> Result<Option<Box<dyn AudioDecoder>>, String> {
        match (self.registry)().make_audio_decoder(params, &AudioDecoderOptions::default()) {
            Ok(decoder) => Ok(Some(decoder)),
            Err(SymphoniaError::Unsupported(_)) => Ok(None),
            Err(other) => Err(format!("cannot decode the {container} audio track: {other}")),
        }
    }
}

fn lossless() -> CodecRegistry {
    let mut registry = CodecRegistry::new();
    registry.register_audio_decoder::<symphonia_codec_pcm::PcmDecoder>();
    registry.register_audio_decoder::<symphonia_bundle_flac::FlacDecoder>();
    registry.register_audio_decoder::<symphonia_codec_alac::AlacDecoder>();
    registry
}

fn all() -> CodecRegistry {
    let mut registry = lossless();
    registry.register_audio_decoder::<symphonia_bundle_mp3::MpaDecoder>();
    registry.register_audio_decoder::<symphonia_codec_vorbis::VorbisDecoder>();
    registry.register_audio_decoder::<symphonia_codec_aac::AacDecoder>();
    registry.register_audio_decoder::<crate::opus::OpusDecoder>();
    registry
}
