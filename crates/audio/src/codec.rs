//! What decodes a track's packets: symphonia's own decoders ([`Here`]) or one a caller brings
//! (the browser's WebCodecs), chosen per track by a [`Codecs`].
//!
//! The traits are `async` because the browser's decoders answer through promises; natively
//! every future is ready at once (the command drives [`crate::decode()`] with `pollster`).
#![allow(async_fn_in_trait)] // Futures of a decode run where they were made; none is sent across threads.

use symphonia_core::codecs::audio::{AudioCodecParameters, AudioDecoder};
use symphonia_core::errors::Error as SymphoniaError;
use symphonia_core::formats::Track;
use symphonia_core::packet::Packet;

use crate::formats::{Symphonia, Unsupported, format_name};
use susurrus_whisper::audio::{Mono, SampleSink};
use symphonia_core::formats::probe::Probe;

/// Picks the decoder of a track.
pub trait Codecs {
    type Codec: Codec;

    /// The demuxers of the containers whose codecs these decoders may take.
    fn probe(&self) -> Probe;

    /// A decoder for `track` (whose audio parameters are `params`) of a `container` file, or
    /// why this front end cannot decode it; an error for a decoder that fails to start.
    async fn open(
        &mut self,
        track: &Track,
        params: &AudioCodecParameters,
        container: &str,
    ) -> Result<Opened<Self::Codec>, String>;
}

/// What [`Codecs::open`] found.
pub enum Opened<C> {
    Codec(C),
    Unsupported(Unsupported),
}

/// Whether decoding goes on after a packet.
#[derive(Debug, PartialEq)]
pub enum Flow {
    Go,
    /// The decoder failed and decodes nothing more (the browser's, after an error): the audio
    /// before is kept with a warning saying why it stopped.
    Stopped(String),
}

/// The decoder of one track, fed its packets in order.
pub trait Codec {
    /// The codec's short name: "pcm", "flac", "mp3", "vorbis", "opus".
    fn name(&self) -> &str;

    /// Decodes one packet into `mono`. A packet that cannot be decoded but leaves the decoder
    /// able to go on is recorded in `skipped`; an error ends the decoding.
    async fn decode<S: SampleSink>(
        &mut self,
        packet: &Packet,
        mono: &mut Mono<S>,
        skipped: &mut Skipped,
    ) -> Result<Flow, String>;

    /// Sends on what the decoder still holds, at the end of the stream.
    async fn flush<S: SampleSink>(&mut self, mono: &mut Mono<S>) -> Result<Flow, String>;
}

/// Undecodable packets that were skipped, for the warning: how many, and the first one's
/// error and place.
#[derive(Debug, Default)]
pub struct Skipped {
    pub count: usize,
    pub first: Option<(String, String)>,
}

impl Skipped {
    /// One more undecodable packet, `error` at `place` in the audio.
    pub fn packet(&mut self, error: &str, place: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some((error.to_string(), place()));
        }
    }
}

/// A track decoded by one of symphonia's decoders.
pub struct Here {
    decoder: Box<dyn AudioDecoder>,
    /// The set the decoder came from and its parameters, to make it again when it asks.
    codecs: Symphonia,
    params: AudioCodecParameters,
    container: String,
    name: String,
    /// The current buffer, interleaved, as symphonia converts it to f32.
    interleaved: Vec<f32>,
}

impl Here {
    /// symphonia's decoder of `params` from `codecs`, or `Ok(None)` when the set lacks it.
    pub fn open(codecs: &Symphonia, params: &AudioCodecParameters, container: &str) -> Result<Option<Here>, String> {
        let Some(decoder) = codecs.decoder(params, container)? else {
            return Ok(None);
        };
        // "flac", or "pcm" for every PCM layout ("pcm_s16le", ...).
        let name = decoder.codec_info().short_name.split('_').next().unwrap_or("pcm").to_string();
        Ok(Some(Here {
            decoder,
            codecs: *codecs,
            params: params.clone(),
            container: container.to_string(),
            name,
            interleaved: Vec::new(),
        }))
    }
}

impl Codec for Here {
    fn name(&self) -> &str {
        &self.name
    }

    async fn decode<S: SampleSink>(
        &mut self,
        packet: &Packet,
        mono: &mut Mono<S>,
        skipped: &mut Skipped,
    ) -> Result<Flow, String> {
        match self.decoder.decode(packet) {
            Ok(buffer) => {
                buffer.copy_to_vec_interleaved(&mut self.interleaved);
                mono.push_interleaved(buffer.spec().rate(), buffer.num_planes(), &self.interleaved)?;
            }
            // One undecodable packet is skipped, as FFmpeg does, so the rest of the file
            // survives damage; a file of nothing but undecodable packets is an error.
            Err(SymphoniaError::DecodeError(msg)) => skipped.packet(msg, || mono.position()),
            Err(SymphoniaError::IoError(e)) => {
                let msg = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "packet cut short"
                } else {
                    "packet unreadable"
                };
                skipped.packet(msg, || mono.position());
            }
            // A packet in a stream that decoded before, claiming a feature the decoder lacks
            // (AAC-LC bits damaged into AAC Main's predictor flag), is damage too.
            Err(SymphoniaError::Unsupported(what)) if mono.frames_in() > 0 => skipped.packet(what, || mono.position()),
            Err(SymphoniaError::ResetRequired) => {
                self.decoder = self
                    .codecs
                    .decoder(&self.params, &self.container)?
                    .ok_or_else(|| format!("the {} decoder cannot be made again", self.name))?;
            }
            Err(e) => {
                let format = format_name(&self.container, &self.name);
                return Err(format!("cannot decode {format} after {}: {e}", mono.position()));
            }
        }
        Ok(Flow::Go)
    }

    async fn flush<S: SampleSink>(&mut self, _: &mut Mono<S>) -> Result<Flow, String> {
        Ok(Flow::Go)
    }
}

impl Codecs for Symphonia {
    type Codec = Here;

    fn probe(&self) -> Probe {
        crate::formats::probe()
    }

    async fn open(
        &mut self,
        _: &Track,
        params: &AudioCodecParameters,
        container: &str,
    ) -> Result<Opened<Here>, String> {
        Ok(match Here::open(self, params, container)? {
            Some(here) => Opened::Codec(here),
            None => Opened::Unsupported(Unsupported::Codec { container: container.to_string(), codec: params.codec }),
        })
    }
}
