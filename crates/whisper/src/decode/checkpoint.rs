//! Where a transcription stands between two windows: what another process needs to go on
//! from there with the same result.
//!
//! A CUDA context that meets a sticky error (an illegal address, a trap, an Xid reset) cannot
//! be used again by the process that holds it; only a new process reaches the GPU. The seek
//! loop reports a [`Checkpoint`] after every window ([`crate::Event::Checkpoint`]); a caller
//! that must start over in a new process passes the last one to
//! [`crate::Whisper::transcribe_resuming`], and the windows after it come out as an undisturbed
//! run would have given them (decoding is deterministic, and the sampling noise generator's
//! position travels with the rest).

use rand_chacha::ChaCha12Rng;
use serde::{Deserialize, Serialize};

/// The seek loop's state after a finished window (serialisable with serde).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The clip (of `clip_timestamps`) the next window is in.
    pub(crate) clip: usize,
    /// The mel frame the next window starts at (in the speech's time with the VAD).
    pub(crate) seek: usize,
    /// Where speech last ended (word timestamps' pause rule), in seconds.
    pub(crate) last_speech: f64,
    /// The sampling noise generator's position (32-bit words drawn), as two halves.
    pub(crate) rng_position: [u64; 2],
    /// The text tokens the next window's prompt is taken from (the end of those since the
    /// last prompt reset: no more than the prompt keeps).
    pub(crate) previous: Vec<u32>,
    pub(crate) language: String,
    pub(crate) language_probability: f32,
}

impl Checkpoint {
    /// Seconds of the recording's content transcribed so far (without the VAD; with it, of
    /// the joined speech).
    pub fn seconds(&self) -> f64 {
        self.seek as f64 * crate::constants::HOP_LENGTH as f64 / crate::constants::SAMPLE_RATE as f64
    }
}

/// What a transcription starts from: the beginning, or a [`Checkpoint`] of an earlier run of
/// the same audio with the same options (and model).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resume {
    /// The last checkpoint reported; `None` starts at the beginning.
    pub checkpoint: Option<Checkpoint>,
    /// Devices lost so far in this transcription (in earlier processes too): the limit of
    /// [`crate::decode::transcribe::MAX_REOPENS`] counts them.
    pub devices_lost: usize,
}

/// The generator's position as a checkpoint stores it.
pub(crate) fn rng_position(rng: &ChaCha12Rng) -> [u64; 2] {
    let position = rng.get_word_pos();
    [(position >> 64) as u64, position as u64]
}

/// `rng` moved to a stored position.
pub(crate) fn set_rng_position(rng: &mut ChaCha12Rng, position: [u64; 2]) {
    rng.set_word_pos(((position[0] as u128) << 64) | position[1] as u128);
}
