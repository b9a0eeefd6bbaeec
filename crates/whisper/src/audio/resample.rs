//! Streaming conversion of mono PCM at any sample rate to 16 kHz.
//!
//! Samples arrive packet by packet from the decoder and leave as 16 kHz output right away, so a
//! long file never holds more than its 16 kHz result plus one resampler chunk: the source-rate
//! signal is never stored whole. rubato's synchronous FFT resampler does the work (band-limited,
//! the quality of a long sinc filter, exact for a fixed rational ratio); a 16 kHz source passes
//! through untouched.

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

use super::sink::SampleSink;

/// The rate every [`To16k`] writes.
const SAMPLE_RATE: u32 = 16_000;

/// The most output reserved up front from a container's frame count: ten minutes at 16 kHz
/// (38 MB). A damaged header may claim anything (an MP3 of 516 bytes claimed about 1e12 frames,
/// which the fuzzer found: reserving their 5 TB aborts under AddressSanitizer and takes
/// terabytes of address space elsewhere); longer audio grows the buffer as it is decoded.
const MAX_RESERVED: u64 = 10 * 60 * SAMPLE_RATE as u64;

/// Input frames per FFT chunk, as a hint: rubato rounds it to a multiple of the smallest block
/// the ratio allows. About a thousand frames keeps the FFT cheap while its anti-aliasing cutoff
/// stays above 95 % of the lower Nyquist frequency.
const CHUNK_HINT: usize = 1024;

/// Sends mono samples at `source_rate` to a growing 16 kHz store.
pub struct To16k<S: SampleSink = Vec<f32>> {
    /// `None` when the source is already at 16 kHz.
    fft: Option<Fft<f32>>,
    source_rate: u32,
    /// Input waiting for a full chunk.
    pending: Vec<f32>,
    /// One chunk of resampler output (or of clamped 16 kHz input).
    chunk_out: Vec<f32>,
    out: S,
    /// Output frames still to drop: the resampler's delay, so that output frame `n` lines up
    /// with input time `n / 16000` s.
    delay_left: usize,
    frames_in: u64,
}

impl To16k<Vec<f32>> {
    /// A converter from `source_rate` (> 0) into a vector in memory.
    pub fn new(source_rate: u32, expected_frames: Option<u64>) -> Result<Self, String> {
        To16k::into_store(source_rate, expected_frames, Vec::new())
    }
}

impl<S: SampleSink> To16k<S> {
    /// A converter from `source_rate` (> 0) into `out`; `expected_frames` (the container's
    /// frame count, when it states one) reserves the output up front.
    pub fn into_store(source_rate: u32, expected_frames: Option<u64>, mut out: S) -> Result<Self, String> {
        let fft = if source_rate == SAMPLE_RATE {
            None
        } else {
            let fft = Fft::<f32>::new(
                source_rate as usize,
                SAMPLE_RATE as usize,
                chunk_size(source_rate),
                1,
                FixedSync::Both,
            )
            .map_err(|e| format!("cannot resample from {source_rate} Hz: {e}"))?;
            Some(fft)
        };
        let (delay_left, chunk_out_len, pending_cap) = match &fft {
            Some(fft) => (fft.output_delay(), fft.output_frames_max(), fft.input_frames_max()),
            None => (0, 0, 0),
        };
        if let Some(frames) = expected_frames {
            // A hint only: a damaged header may claim anything, so the reservation is bounded,
            // a failed one is ignored, and the output grows as it is decoded.
            let reserve = output_len(frames, source_rate).min(MAX_RESERVED);
            out.reserve(usize::try_from(reserve).unwrap_or(0));
        }
        Ok(To16k {
            fft,
            source_rate,
            pending: Vec::with_capacity(pending_cap),
            chunk_out: vec![0.0; chunk_out_len],
            out,
            delay_left,
            frames_in: 0,
        })
    }

    /// Appends `samples` (at the source rate).
    pub fn push(&mut self, mut samples: &[f32]) -> Result<(), String> {
        self.frames_in += samples.len() as u64;
        let Some(fft) = &self.fft else {
            self.chunk_out.clear();
            self.chunk_out.extend(samples.iter().map(|s| s.clamp(-1.0, 1.0)));
            return self.out.push(&self.chunk_out);
        };
        let need = fft.input_frames_next();
        while !samples.is_empty() {
            let take = (need - self.pending.len()).min(samples.len());
            // Clamped to full scale first: the output is clamped anyway, and finite float
            // samples far beyond it (3e38 in a damaged f32 WAV, found by fuzzing) overflow the
            // FFT to infinities, on which rubato panics.
            self.pending.extend(samples[..take].iter().map(|s| s.clamp(-1.0, 1.0)));
            samples = &samples[take..];
            if self.pending.len() == need {
                self.process_pending()?;
            }
        }
        Ok(())
    }

    /// The whole 16 kHz signal: `ceil(frames_in * 16000 / source_rate)` samples, clamped to
    /// [-1, 1] (what 16-bit conversion would keep; resampling can overshoot full scale a little).
    /// The capacity reserved from the header's frame count is released where a cut file
    /// delivered less.
    pub fn finish(mut self) -> Result<S, String> {
        let Some(fft) = &self.fft else {
            return self.out.finish();
        };
        let need = fft.input_frames_next();
        let total = usize::try_from(output_len(self.frames_in, self.source_rate))
            .map_err(|_| "the audio is too long to hold in memory".to_string())?;
        // The tail: the last partial chunk, then silence until the delayed output is complete.
        while self.out.count() < total {
            self.pending.resize(need, 0.0);
            self.process_pending()?;
        }
        self.out.truncate(total);
        self.out.finish()
    }

    /// Resamples one full chunk from `pending` and appends the result past the delay.
    fn process_pending(&mut self) -> Result<(), String> {
        let Some(fft) = &mut self.fft else {
            return Ok(());
        };
        let frames = self.pending.len();
        let input = InterleavedSlice::new(&self.pending[..], 1, frames).map_err(|e| format!("resampler input: {e}"))?;
        let capacity = self.chunk_out.len();
        let mut output = InterleavedSlice::new_mut(&mut self.chunk_out[..], 1, capacity)
            .map_err(|e| format!("resampler output: {e}"))?;
        let (_, written) =
            fft.process_into_buffer(&input, &mut output, None).map_err(|e| format!("resampling failed: {e}"))?;
        let skip = self.delay_left.min(written);
        self.delay_left -= skip;
        for s in &mut self.chunk_out[skip..written] {
            *s = s.clamp(-1.0, 1.0);
        }
        self.pending.clear();
        self.out.push(&self.chunk_out[skip..written])
    }
}

/// The chunk size for [`FixedSync::Both`] from `rate`: the smallest whole number of rubato's
/// minimal blocks (`rate / gcd(rate, 16000)` input frames) that reaches [`CHUNK_HINT`], made
/// even. rubato's FFT resampler centres its filter at `size / 2` rounded down while it reports
/// half the size as its delay, so an odd FFT size (44.1 kHz gives 3 blocks of 441) shifts the
/// output by half an input sample; an even block count keeps both sizes even and the output
/// aligned.
fn chunk_size(rate: u32) -> usize {
    let block = (rate / gcd(rate, SAMPLE_RATE)) as usize;
    let blocks = CHUNK_HINT.div_ceil(block);
    (blocks + blocks % 2) * block
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Output samples for `frames` input frames at `rate`: `ceil(frames * 16000 / rate)`, in integers
/// so that whole seconds give whole multiples of 16000 exactly.
fn output_len(frames: u64, rate: u32) -> u64 {
    let len = (u128::from(frames) * u128::from(SAMPLE_RATE)).div_ceil(u128::from(rate));
    u64::try_from(len).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use rubato::audioadapter::Adapter;

    use super::*;

    /// Two seconds of a 1 kHz and a 3 kHz sine at `rate`.
    fn signal(rate: u32) -> Vec<f32> {
        (0..2 * rate)
            .map(|i| {
                let t = f64::from(i) / f64::from(rate);
                (0.5 * (2.0 * std::f64::consts::PI * 1000.0 * t).sin()
                    + 0.3 * (2.0 * std::f64::consts::PI * 3000.0 * t).sin()) as f32
            })
            .collect()
    }

    /// Pushed in uneven pieces, the stream gives exactly what rubato's whole-clip
    /// `process_all` (which trims the delay itself) gives for the same resampler.
    #[test]
    fn streaming_matches_rubatos_whole_clip_resampling() {
        for rate in [8_000, 22_050, 44_100, 48_000] {
            let input = signal(rate);
            let mut stream = To16k::new(rate, Some(input.len() as u64)).unwrap();
            let mut rest = &input[..];
            for piece in [1, 7, 1152, 4096, 333].iter().cycle() {
                let (now, later) = rest.split_at((*piece).min(rest.len()));
                stream.push(now).unwrap();
                rest = later;
                if rest.is_empty() {
                    break;
                }
            }
            let streamed = stream.finish().unwrap();

            let mut fft = Fft::<f32>::new(rate as usize, 16_000, chunk_size(rate), 1, FixedSync::Both).unwrap();
            let whole = InterleavedSlice::new(&input[..], 1, input.len()).unwrap();
            let reference = fft.process_all(&whole, input.len(), None).unwrap();
            let reference: Vec<f32> = (0..reference.frames()).map(|i| reference.read_sample(0, i).unwrap()).collect();

            assert_eq!(streamed.len(), 32_000, "{rate} Hz");
            assert_eq!(streamed, reference, "{rate} Hz");
        }
    }

    #[test]
    fn sixteen_khz_passes_through_clamped_to_full_scale() {
        let mut stream = To16k::new(16_000, None).unwrap();
        stream.push(&[0.25, -0.5]).unwrap();
        stream.push(&[1.5, -2.0, 0.125]).unwrap();
        assert_eq!(stream.finish().unwrap(), [0.25, -0.5, 1.0, -1.0, 0.125]);
    }

    #[test]
    fn nothing_in_gives_nothing_out() {
        assert!(To16k::new(44_100, Some(0)).unwrap().finish().unwrap().is_empty());
    }

    #[test]
    fn samples_far_beyond_full_scale_are_clamped_not_a_panic() {
        for rate in [16_000, 44_100] {
            let mut stream = To16k::new(rate, None).unwrap();
            stream.push(&[f32::MAX, -3e38, 1e30, 0.5].repeat(2000)).unwrap();
            let out = stream.finish().unwrap();
            assert!(!out.is_empty() && out.iter().all(|s| (-1.0..=1.0).contains(s)), "{rate} Hz");
        }
    }

    #[test]
    fn a_header_claiming_years_of_audio_reserves_at_most_ten_minutes() {
        for rate in [16_000, 44_100] {
            let stream = To16k::new(rate, Some(1 << 40)).unwrap();
            assert!(stream.out.capacity() as u64 <= MAX_RESERVED, "{rate} Hz: {}", stream.out.capacity());
            assert!(stream.finish().unwrap().is_empty());
        }
        // A plausible count is still reserved whole.
        assert!(To16k::new(16_000, Some(32_000)).unwrap().out.capacity() >= 32_000);
    }

    #[test]
    fn output_length_rounds_up_in_exact_integers() {
        assert_eq!(output_len(44_100, 44_100), 16_000);
        assert_eq!(output_len(22_050, 44_100), 8_000);
        assert_eq!(output_len(1, 44_100), 1);
        assert_eq!(output_len(121_559, 44_100), 44_104);
        assert_eq!(output_len(4_000, 8_000), 8_000);
        assert_eq!(output_len(u64::MAX, 1_000), u64::MAX);
    }

    #[test]
    fn chunks_hold_an_even_number_of_minimal_blocks() {
        for (rate, block) in
            [(44_100, 441), (22_050, 441), (11_025, 441), (48_000, 3), (8_000, 1), (96_000, 6), (7_919, 7_919)]
        {
            let chunk = chunk_size(rate);
            assert_eq!(chunk % (2 * block), 0, "{rate} Hz: {chunk}");
            assert!(chunk >= CHUNK_HINT && chunk < CHUNK_HINT + 2 * block, "{rate} Hz: {chunk}");
        }
    }
}
