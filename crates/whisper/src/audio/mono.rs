//! Decoded audio at any rate and channel count to 16 kHz mono, a decoded buffer at a time:
//! the downmix, the check for non-finite samples and the resampler, shared by every decoder
//! (symphonia's natively, the browser's WebCodecs), so that a file gives the same samples and
//! the same messages wherever it is decoded.

use super::resample::To16k;
use super::sink::SampleSink;

/// Source rates the resampler accepts. Below 1 kHz no speech survives and the FFT sizes for a
/// ratio to 16 kHz grow without bound; 768 kHz is the highest rate audio hardware records.
pub const MIN_RATE: u32 = 1_000;
pub const MAX_RATE: u32 = 768_000;

/// Downmix to mono, the non-finite check and the resampler, fed one decoded buffer at a time.
pub struct Mono<S: SampleSink> {
    /// Rate and channels of the stream: from the codec parameters until the first buffer
    /// arrives, then from the buffers (which must all agree).
    rate: Option<u32>,
    channels: Option<usize>,
    expected_frames: Option<u64>,
    /// Created with the first buffer, from its rate, into the store (held here until then).
    resampler: Option<To16k<S>>,
    store: Option<S>,
    frames_in: u64,
    /// The container's edit: source frames still to drop at the start (the encoder's delay),
    /// and how many frames to keep in all (the rest is the encoder's padding).
    skip: u64,
    keep: Option<u64>,
    mono: Vec<f32>,
}

impl<S: SampleSink> Mono<S> {
    /// A converter into `store`, with what the container says of the stream (its rate,
    /// channels and frame count, where it states them; the buffers decide).
    pub fn new(rate: Option<u32>, channels: Option<usize>, expected_frames: Option<u64>, store: S) -> Self {
        Mono {
            rate,
            channels,
            expected_frames,
            resampler: None,
            store: Some(store),
            frames_in: 0,
            skip: 0,
            keep: None,
            mono: Vec::new(),
        }
    }

    /// Applies a container's edit to what follows: the first `skip` source frames are
    /// dropped and at most `keep` frames after them are kept (MP4's edit lists, which cut an
    /// AAC encoder's delay and padding).
    pub fn edit(&mut self, skip: u64, keep: Option<u64>) {
        (self.skip, self.keep) = (skip, keep);
    }

    /// Appends one decoded buffer: `interleaved` holds whole frames of `channels` samples at
    /// `rate`. A rate outside [`MIN_RATE`]..=[`MAX_RATE`], a change of rate or channel count
    /// and a non-finite sample are errors that say where.
    pub fn push_interleaved(&mut self, rate: u32, channels: usize, interleaved: &[f32]) -> Result<(), String> {
        if channels == 0 {
            return Err("the audio has no channels".into());
        }
        let frames = interleaved.len() / channels;
        if frames == 0 {
            return Ok(());
        }
        if self.resampler.is_none() {
            if !(MIN_RATE..=MAX_RATE).contains(&rate) {
                return Err(format!("unsupported sample rate {rate} Hz (supported: {MIN_RATE} to {MAX_RATE} Hz)"));
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
        let skip = self.skip.min(frames as u64) as usize;
        self.skip -= skip as u64;
        let end = match self.keep {
            Some(keep) => frames.min(skip + keep.saturating_sub(self.frames_in).min(frames as u64) as usize),
            None => frames,
        };
        if end <= skip {
            return Ok(());
        }
        let interleaved = &interleaved[skip * channels..end * channels];
        let frames = end - skip;
        self.mono.clear();
        // The plain average of the channels, summed in f64 so that finite samples of any
        // magnitude give a finite mean.
        self.mono.extend(
            interleaved
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

    /// Appends `frames` frames of silence at the stream's rate, where a damaged part of the
    /// file was skipped, so that the audio after it keeps its time. Nothing before the first
    /// buffer, whose rate and channels are not known yet.
    pub fn push_silence(&mut self, frames: u64) -> Result<(), String> {
        let (Some(rate), Some(channels), Some(_)) = (self.rate, self.channels, &self.resampler) else {
            return Ok(());
        };
        let zeros = vec![0.0; 4096 * channels];
        let mut left = frames;
        while left > 0 {
            let n = left.min(4096) as usize;
            self.push_interleaved(rate, channels, &zeros[..n * channels])?;
            left -= n as u64;
        }
        Ok(())
    }

    /// Source frames decoded so far.
    pub fn frames_in(&self) -> u64 {
        self.frames_in
    }

    /// The error for a stream that gave no audio although its header announces some: readers
    /// drop frames that fail their checksums (FLAC) or stop at a cut, and that is damage, not
    /// silence. `None` when nothing was announced or audio was decoded.
    pub fn nothing_decoded(&self) -> Option<String> {
        match (self.frames_in, self.expected_frames, self.rate) {
            (0, Some(frames @ 1..), Some(rate @ 1..)) => Some(format!(
                "no audio decoded, though the header announces {:.3} s (truncated or damaged file)",
                frames as f64 / f64::from(rate)
            )),
            _ => None,
        }
    }

    /// A warning when the container announced more audio than was decoded (by more than a
    /// tenth of a second, which covers codecs' encoder delay and padding).
    pub fn missing(&self) -> Option<String> {
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
    pub fn position(&self) -> String {
        match self.rate {
            Some(rate) if rate > 0 => format!("{:.3} s", self.frames_in as f64 / f64::from(rate)),
            _ => format!("{} frames", self.frames_in),
        }
    }

    /// The finished store, the source's rate and its channel count (0 where a stream without
    /// samples does not state them).
    pub fn finish(self) -> Result<(S, u32, usize), String> {
        let samples = match (self.resampler, self.store) {
            (Some(resampler), _) => resampler.finish()?,
            (None, Some(store)) => store.finish()?,
            (None, None) => return Err("the audio store was lost".into()),
        };
        Ok((samples, self.rate.unwrap_or(0), self.channels.unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_averaged_at_16_khz() {
        let mut mono = Mono::new(None, None, None, Vec::new());
        mono.push_interleaved(16_000, 2, &[0.5, -0.5, 1.0, 0.0, 0.25, 0.75]).unwrap();
        mono.push_interleaved(16_000, 2, &[]).unwrap();
        assert_eq!(mono.frames_in(), 3);
        assert_eq!(mono.finish().unwrap(), (vec![0.0, 0.5, 0.5], 16_000, 2));
    }

    #[test]
    fn a_non_finite_sample_is_an_error_naming_its_time() {
        let mut mono = Mono::new(None, None, None, Vec::new());
        mono.push_interleaved(8_000, 1, &[0.0; 8_000]).unwrap();
        let err = mono.push_interleaved(8_000, 1, &[0.0, 0.0, f32::NAN]).unwrap_err();
        assert_eq!(err, "the audio contains NaN or infinite samples (the first at 1.000 s)");
    }

    #[test]
    fn a_change_of_format_or_a_rate_out_of_range_is_an_error() {
        let mut mono = Mono::new(None, None, None, Vec::new());
        mono.push_interleaved(16_000, 1, &[0.0; 16_000]).unwrap();
        let err = mono.push_interleaved(44_100, 2, &[0.0; 4]).unwrap_err();
        assert_eq!(
            err,
            "the stream changes from 16000 Hz, 1 channels to 44100 Hz, 2 channels after 1.000 s; \
             only streams of one format are supported"
        );
        let err = Mono::new(None, None, None, Vec::new()).push_interleaved(500, 1, &[0.0]).unwrap_err();
        assert_eq!(err, "unsupported sample rate 500 Hz (supported: 1000 to 768000 Hz)");
    }

    #[test]
    fn announced_audio_that_does_not_come_is_reported() {
        let mono = Mono::new(Some(8_000), Some(1), Some(16_000), Vec::new());
        assert_eq!(
            mono.nothing_decoded().unwrap(),
            "no audio decoded, though the header announces 2.000 s (truncated or damaged file)"
        );
        let mut mono = Mono::new(Some(8_000), Some(1), Some(16_000), Vec::new());
        mono.push_interleaved(8_000, 1, &[0.0; 8_000]).unwrap();
        assert_eq!(mono.nothing_decoded(), None);
        assert_eq!(
            mono.missing().unwrap(),
            "the header announces 2.000 s of audio, but decoding stopped at 1.000 s: the file looks \
             truncated or damaged; the audio before that point is transcribed"
        );
        mono.push_interleaved(8_000, 1, &[0.0; 7_500]).unwrap();
        assert_eq!(mono.missing(), None, "within a tenth of a second");
    }
}
