//! The audio front end of the command and of the browser package: an encoded file in, 16 kHz
//! mono samples out, read and decoded a packet at a time so that neither the file nor its
//! decoded audio need ever be whole in memory.
//!
//! In pipeline order:
//! - [`formats`]: symphonia's demuxers (WAV, AIFF, CAF, OGG, MP3, FLAC, AAC, MP4, Matroska)
//!   and decoder registries, Opus's decoder among them (`opus`: opus-pure behind symphonia's
//!   decoder trait);
//! - [`codec`]: what decodes a track's packets ([`Codec`]), symphonia's own ([`Here`]) or one a
//!   caller brings (the browser's WebCodecs), chosen per track by a [`Codecs`];
//! - [`decode()`]: the packet loop, the same for every caller, with every failure turned into a
//!   message about the input and the damage a file survives (a cut, undecodable packets) into
//!   warnings; what comes out goes through whisper's [`Mono`] (downmix, checks, the 16 kHz
//!   resampler);
//! - [`store`]: where the samples go, memory for the first [`IN_MEMORY`] samples and then a
//!   [`Spill`]: a temporary file natively, the origin's private file system (or JavaScript
//!   memory) in the browser.
//!
//! One front end means a file gives the same samples, the same warnings and the same errors
//! in a terminal and in a web page, wherever symphonia decodes it.

pub mod codec;
mod counted;
mod damage;
pub mod decode;
pub mod formats;
mod mp4;
mod ogg;
mod opus;
pub mod store;

pub use codec::{Codec, Codecs, Flow, Here, Opened, Skipped};
pub use decode::{Decoded, Decoding, decode};
pub use formats::{Symphonia, Unsupported};
pub use opus::ogg_opus_head;
#[cfg(feature = "browser")]
pub use store::browser::{BrowserSpill, JsSamples, describe};
pub use store::limit::{Limited, Over};
#[cfg(not(target_arch = "wasm32"))]
pub use store::temp_file::{Samples, TempFile};
pub use store::{Spill, Store};
pub use susurrus_whisper::audio::{IN_MEMORY, Mono, SampleSink};

/// The sample rate Whisper listens at, and of every [`Decoded::samples`].
pub const SAMPLE_RATE: u32 = susurrus_whisper::constants::SAMPLE_RATE as u32;
