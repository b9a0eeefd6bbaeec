//! Whisper's fixed numbers, a leaf every folder may read: the audio it takes and how the
//! log-mel and the 30 s windows divide it.

/// Samples per second of the audio Whisper takes, in Hz.
pub const SAMPLE_RATE: usize = 16_000;
/// FFT length: 25 ms.
pub const N_FFT: usize = 400;
/// Step between log-mel frames: 10 ms.
pub const HOP_LENGTH: usize = 160;
/// Samples in one 30 s encoder window.
pub const CHUNK_SAMPLES: usize = 30 * SAMPLE_RATE;
/// Frames in one 30 s encoder window.
pub const CHUNK_FRAMES: usize = CHUNK_SAMPLES / HOP_LENGTH;
/// Log-mel frames per second of audio.
pub const FRAMES_PER_SECOND: f64 = (SAMPLE_RATE / HOP_LENGTH) as f64;
