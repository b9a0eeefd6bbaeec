//! From speech probabilities to the stretches of audio to transcribe, and back from times in
//! the cut audio to times in the recording: faster-whisper's `get_speech_timestamps`,
//! `collect_chunks` and `SpeechTimestampsMap`, with Python's arithmetic kept (sample counts
//! compared with float limits, `int()` truncation, floor division, probabilities compared
//! with the thresholds as float32 numbers, as numpy does).

use serde::Deserialize;

use super::network::WINDOW;
use crate::audio::{Audio, Joined};
use crate::constants::SAMPLE_RATE;
use crate::error::{Error, Result};

/// How speech is told from silence, as faster-whisper's `VadOptions` (its defaults).
///
/// As JSON (the package's `vadOptions`) the fields are camelCase; a missing field keeps its
/// default and an unknown one is an error.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct VadOptions {
    /// A window whose speech probability is at least this starts (or continues) speech.
    pub threshold: f64,
    /// Below this a window is silence; between it and `threshold` it continues what came
    /// before. `None`: `max(threshold - 0.15, 0.01)`.
    pub neg_threshold: Option<f64>,
    /// Speech shorter than this is dropped.
    pub min_speech_duration_ms: u32,
    /// Speech longer than this is split, at the last silence of more than 98 ms if there
    /// is one; `None`: no limit.
    pub max_speech_duration_s: Option<f64>,
    /// Silence shorter than this does not end speech.
    pub min_silence_duration_ms: u32,
    /// Audio kept on each side of speech.
    pub speech_pad_ms: u32,
}

impl Default for VadOptions {
    fn default() -> Self {
        VadOptions {
            threshold: 0.5,
            neg_threshold: None,
            min_speech_duration_ms: 0,
            max_speech_duration_s: None,
            min_silence_duration_ms: 2000,
            speech_pad_ms: 400,
        }
    }
}

impl VadOptions {
    /// Checks the values (the thresholds are probabilities, the limit a positive time).
    pub fn validate(&self) -> Result<()> {
        let probability = |name: &str, v: f64| match v.is_finite() && (0.0..=1.0).contains(&v) {
            true => Ok(()),
            false => Err(Error::bad_option(format!("vad_options.{name}: {v} is not a probability from 0 to 1"))),
        };
        probability("threshold", self.threshold)?;
        if let Some(v) = self.neg_threshold {
            probability("neg_threshold", v)?;
        }
        if let Some(v) = self.max_speech_duration_s.filter(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(Error::bad_option(format!(
                "vad_options.max_speech_duration_s: {v} is not a time in seconds > 0"
            )));
        }
        Ok(())
    }
}

/// A stretch of speech, in samples of the recording (`start..end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpeechChunk {
    pub start: usize,
    pub end: usize,
}

/// The speech in a recording of `samples` samples whose windows have the speech
/// `probabilities` (one per [`WINDOW`] samples), as `get_speech_timestamps`.
pub fn speech_chunks(probabilities: &[f32], samples: usize, options: &VadOptions) -> Vec<SpeechChunk> {
    let rate = SAMPLE_RATE as f64;
    let window = WINDOW as i64;
    let min_speech_samples = rate * options.min_speech_duration_ms as f64 / 1000.0;
    let speech_pad_samples = rate * options.speech_pad_ms as f64 / 1000.0;
    let max_speech_samples =
        options.max_speech_duration_s.map_or(f64::INFINITY, |s| rate * s) - window as f64 - 2.0 * speech_pad_samples;
    let min_silence_samples = rate * options.min_silence_duration_ms as f64 / 1000.0;
    let min_silence_samples_at_max_speech = rate * 98.0 / 1000.0;
    let length = samples as i64;
    // numpy compares float32 probabilities with Python floats in float32.
    let threshold = options.threshold as f32;
    let neg_threshold = options.neg_threshold.unwrap_or((options.threshold - 0.15).max(0.01)) as f32;

    let mut triggered = false;
    let mut speeches: Vec<(i64, i64)> = Vec::new();
    // The speech being followed: its start once one is set.
    let mut current: Option<i64> = None;
    let (mut temp_end, mut prev_end, mut next_start) = (0i64, 0i64, 0i64);
    for (i, &p) in probabilities.iter().enumerate() {
        let at = window * i as i64;
        if p >= threshold && temp_end != 0 {
            temp_end = 0;
            if next_start < prev_end {
                next_start = at;
            }
        }
        if p >= threshold && !triggered {
            triggered = true;
            current = Some(at);
            continue;
        }
        if let Some(start) = current.filter(|&s| triggered && (at - s) as f64 > max_speech_samples) {
            if prev_end != 0 {
                speeches.push((start, prev_end));
                current = None;
                if next_start < prev_end {
                    triggered = false;
                } else {
                    current = Some(next_start);
                }
                (prev_end, next_start, temp_end) = (0, 0, 0);
            } else {
                speeches.push((start, at));
                current = None;
                (prev_end, next_start, temp_end) = (0, 0, 0);
                triggered = false;
                continue;
            }
        }
        if p < neg_threshold && triggered {
            if temp_end == 0 {
                temp_end = at;
            }
            if (at - temp_end) as f64 > min_silence_samples_at_max_speech {
                prev_end = temp_end;
            }
            if ((at - temp_end) as f64) < min_silence_samples {
                continue;
            }
            if let Some(start) = current.take().filter(|&s| (temp_end - s) as f64 > min_speech_samples) {
                speeches.push((start, temp_end));
            }
            (prev_end, next_start, temp_end) = (0, 0, 0);
            triggered = false;
            continue;
        }
    }
    if let Some(start) = current.filter(|&s| (length - s) as f64 > min_speech_samples) {
        speeches.push((start, length));
    }

    // Padding: shared halves of short silences, `speech_pad` elsewhere.
    let count = speeches.len();
    for i in 0..count {
        if i == 0 {
            speeches[0].0 = (speeches[0].0 as f64 - speech_pad_samples).max(0.0) as i64;
        }
        if i + 1 < count {
            let silence = speeches[i + 1].0 - speeches[i].1;
            if (silence as f64) < 2.0 * speech_pad_samples {
                speeches[i].1 += silence.div_euclid(2);
                speeches[i + 1].0 = (speeches[i + 1].0 - silence.div_euclid(2)).max(0);
            } else {
                speeches[i].1 = (length as f64).min(speeches[i].1 as f64 + speech_pad_samples) as i64;
                speeches[i + 1].0 = (speeches[i + 1].0 as f64 - speech_pad_samples).max(0.0) as i64;
            }
        } else {
            speeches[i].1 = (length as f64).min(speeches[i].1 as f64 + speech_pad_samples) as i64;
        }
    }
    speeches.into_iter().map(|(s, e)| SpeechChunk { start: s.max(0) as usize, end: e.max(0) as usize }).collect()
}

/// The recording's speech joined into one stretch of audio (`collect_chunks`), read from the
/// recording as it is needed rather than copied.
pub fn collect<'a>(audio: &'a dyn Audio, chunks: &[SpeechChunk]) -> Joined<'a> {
    Joined::new(audio, chunks.iter().map(|c| (c.start, c.end)))
}

/// Maps times in the joined speech back to the recording (`SpeechTimestampsMap`).
#[derive(Clone, Debug, PartialEq)]
pub struct TimeMap {
    /// Where each chunk ends in the joined speech, in samples.
    chunk_end_sample: Vec<i64>,
    /// Seconds cut out before each chunk.
    total_silence_before: Vec<f64>,
}

impl TimeMap {
    /// The map of `chunks` (at least one).
    pub fn new(chunks: &[SpeechChunk]) -> TimeMap {
        let (mut previous_end, mut silent) = (0i64, 0i64);
        let mut map = TimeMap { chunk_end_sample: Vec::new(), total_silence_before: Vec::new() };
        for c in chunks {
            silent += c.start as i64 - previous_end;
            previous_end = c.end as i64;
            map.chunk_end_sample.push(c.end as i64 - silent);
            map.total_silence_before.push(silent as f64 / SAMPLE_RATE as f64);
        }
        map
    }

    /// The chunk a time in the joined speech falls in; an end exactly at a chunk's end
    /// belongs to that chunk.
    pub fn chunk_index(&self, time: f64, is_end: bool) -> usize {
        let sample = (time * SAMPLE_RATE as f64) as i64;
        if is_end && let Some(i) = self.chunk_end_sample.iter().position(|&e| e == sample) {
            return i;
        }
        let after = self.chunk_end_sample.partition_point(|&e| e <= sample);
        after.min(self.chunk_end_sample.len().saturating_sub(1))
    }

    /// `time` in the recording, rounded to 0.01 s, in chunk `chunk` (or the one `time`
    /// falls in).
    pub fn original_time(&self, time: f64, chunk: Option<usize>, is_end: bool) -> f64 {
        let chunk = chunk.unwrap_or_else(|| self.chunk_index(time, is_end));
        let before = self.total_silence_before.get(chunk).copied().unwrap_or(0.0);
        round2(before + time)
    }
}

/// Python's `round(x, 2)`: to the nearest hundredth of `x`'s exact value, ties to even.
pub(crate) fn round2(x: f64) -> f64 {
    let y = x * 100.0;
    // The exact product is y + residual.
    let residual = x.mul_add(100.0, -y);
    let floor = y.floor();
    let rounded = if y - floor == 0.5 {
        match residual.partial_cmp(&0.0) {
            Some(std::cmp::Ordering::Greater) => floor + 1.0,
            Some(std::cmp::Ordering::Less) => floor,
            _ if floor % 2.0 == 0.0 => floor,
            _ => floor + 1.0,
        }
    } else {
        y.round()
    };
    rounded / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(pairs: &[(usize, usize)]) -> Vec<SpeechChunk> {
        pairs.iter().map(|&(start, end)| SpeechChunk { start, end }).collect()
    }

    /// faster-whisper's own `get_speech_timestamps` on made-up probabilities over options
    /// reaching every branch (tests/golden/vad_cases.py).
    #[test]
    fn speech_chunks_are_faster_whispers_on_every_case() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/golden/vad_cases.json");
        let cases: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = cases["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 24);
        for (i, case) in cases.iter().enumerate() {
            // The generator names the options as faster-whisper does (snake case).
            let (o, d) = (&case["options"], VadOptions::default());
            let ms = |name: &str, default: u32| o[name].as_u64().map_or(default, |v| v as u32);
            let options = VadOptions {
                threshold: o["threshold"].as_f64().unwrap_or(d.threshold),
                neg_threshold: o["neg_threshold"].as_f64(),
                min_speech_duration_ms: ms("min_speech_duration_ms", d.min_speech_duration_ms),
                max_speech_duration_s: o["max_speech_duration_s"].as_f64(),
                min_silence_duration_ms: ms("min_silence_duration_ms", d.min_silence_duration_ms),
                speech_pad_ms: ms("speech_pad_ms", d.speech_pad_ms),
            };
            let probabilities: Vec<f32> =
                case["probabilities"].as_array().unwrap().iter().map(|p| p.as_f64().unwrap() as f32).collect();
            let samples = case["samples"].as_u64().unwrap() as usize;
            let want: Vec<SpeechChunk> = case["speech_timestamps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| SpeechChunk {
                    start: c["start"].as_u64().unwrap() as usize,
                    end: c["end"].as_u64().unwrap() as usize,
                })
                .collect();
            assert_eq!(speech_chunks(&probabilities, samples, &options), want, "case {i}: {}", case["options"]);
        }
    }

    #[test]
    fn no_speech_gives_no_chunks_and_nothing_to_transcribe() {
        assert_eq!(speech_chunks(&[0.1; 40], 40 * WINDOW - 7, &VadOptions::default()), vec![]);
        let silence = vec![1.0; 100];
        assert_eq!(collect(&silence, &[]).len(), 0);
    }

    #[test]
    fn collected_speech_is_the_chunks_in_order() {
        let pcm: Vec<f32> = (0..20).map(|i| i as f32).collect();
        let speech = collect(&pcm, &chunks(&[(2, 5), (10, 12), (18, 25)]));
        assert_eq!(speech.read_range(0, speech.len()).unwrap(), [2.0, 3.0, 4.0, 10.0, 11.0, 18.0, 19.0]);
    }

    /// Chunks at 1-2 s and 5-6 s: the second starts 1 s into the joined speech, after 4 s cut.
    #[test]
    fn times_map_back_past_the_cut_silences() {
        let map = TimeMap::new(&chunks(&[(16000, 32000), (80000, 96000)]));
        assert_eq!(map.original_time(0.5, None, false), 1.5);
        assert_eq!(map.original_time(1.25, None, false), 5.25);
        // 1.0 s is where the first chunk ends: an end there stays in it, a start moves on.
        assert_eq!(map.original_time(1.0, None, true), 2.0);
        assert_eq!(map.original_time(1.0, None, false), 5.0);
        // Past the last chunk's end: the last chunk.
        assert_eq!(map.original_time(3.0, None, false), 7.0);
        assert_eq!(map.original_time(0.3, Some(1), false), 4.3);
    }

    #[test]
    fn round2_rounds_the_exact_value_ties_to_even() {
        // Exact binary ties (k/8) round to even, as Python's round(x, 2).
        assert_eq!(round2(0.125), 0.12);
        assert_eq!(round2(0.375), 0.38);
        assert_eq!(round2(12.625), 12.62);
        assert_eq!(round2(-0.125), -0.12);
        // Decimal "ties" that are not exact in binary go the way their exact value does:
        // 1.005 is 1.00499999999999989..., 2.675 is 2.67499999999999982...
        assert_eq!(round2(1.005), 1.0);
        assert_eq!(round2(2.675), 2.67);
        assert_eq!(round2(0.285), 0.28);
        assert_eq!(round2(12.3456), 12.35);
    }

    #[test]
    fn options_out_of_range_are_errors_naming_them() {
        let check = |o: VadOptions| o.validate().map_err(|e| e.to_string());
        let d = VadOptions::default;
        assert_eq!(check(d()), Ok(()));
        let err = check(VadOptions { threshold: 1.5, ..d() }).unwrap_err();
        assert!(err.contains("vad_options.threshold: 1.5 is not a probability from 0 to 1"), "{err}");
        let err = check(VadOptions { neg_threshold: Some(f64::NAN), ..d() }).unwrap_err();
        assert!(err.contains("vad_options.neg_threshold: NaN"), "{err}");
        let err = check(VadOptions { max_speech_duration_s: Some(0.0), ..d() }).unwrap_err();
        assert!(err.contains("vad_options.max_speech_duration_s: 0 is not a time in seconds > 0"), "{err}");
        let parsed: VadOptions = serde_json::from_str(r#"{"minSilenceDurationMs": 500, "negThreshold": 0.2}"#).unwrap();
        assert_eq!(parsed, VadOptions { min_silence_duration_ms: 500, neg_threshold: Some(0.2), ..d() });
        let err = serde_json::from_str::<VadOptions>(r#"{"threshhold": 0.2}"#).unwrap_err().to_string();
        assert!(err.starts_with("unknown field `threshhold`"), "{err}");
    }
}
