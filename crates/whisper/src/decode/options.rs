//! Transcription options, with the reference `transcribe()` defaults (faster-whisper's: beam
//! search with 5 beams).

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::vad::VadOptions;

/// The most beams a beam search runs (each beam keeps a self-attention cache as large as
/// greedy decoding's whole one).
pub const MAX_BEAM_SIZE: usize = 32;

/// The most samples a temperature draws (each a whole decoding of the window: 65535 ran for
/// minutes on one window).
pub const MAX_BEST_OF: usize = 32;

/// The largest length penalty: `453 ^ 10` (the longest window's length term) still fits an f32
/// score; 1 (the mean per token) is the default and 0 to 2 the usual range.
pub const MAX_LENGTH_PENALTY: f32 = 10.0;

/// The range of a sampling temperature above 0. Below the lower end the logits over the
/// temperature leave f32 (1e-40 sampled "!!" from clear speech); above the upper every token
/// is as likely as any other and the text is noise.
pub const TEMPERATURES: std::ops::RangeInclusive<f32> = 0.001..=100.0;

/// The range of the repetition penalty (CTranslate2 divides positive logits by it and
/// multiplies negative ones): 1 leaves the logits, 1 to 1.5 the usual use; outside, a logit
/// leaves f32 (1e-44 decoded nothing at all).
pub const REPETITION_PENALTIES: std::ops::RangeInclusive<f32> = 0.01..=100.0;

/// The largest beam search patience: `round(beam_size · patience)` finished hypotheses are
/// awaited, 3,200 at the largest beam.
pub const MAX_PATIENCE: f32 = 100.0;

/// What the decoder is asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Text in the spoken language.
    #[default]
    Transcribe,
    /// English text (multilingual models only).
    Translate,
}

/// Options of [`super::Whisper::transcribe`]. `Default` gives the reference defaults.
///
/// As JSON (the browser package's options object) the fields are camelCase (`bestOf`,
/// `initialPrompt`, `task: "translate"`), a missing field keeps its default, `null` turns an
/// optional threshold off, and an unknown field is an error (a misspelt option never passes
/// silently).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscribeOptions {
    /// Language code (`"en"`, `"de"`, ...); `None` detects it on the first window
    /// (English-only models always use English).
    pub language: Option<String>,
    pub task: Task,
    /// Timestamp tokens and segments between them; off gives one segment per window.
    pub timestamps: bool,
    /// Temperatures tried in order until a window's result passes the thresholds
    /// (temperature fallback). The first is usually 0 (greedy).
    pub temperatures: Vec<f32>,
    /// Retry when the text's gzip compression ratio is above this (repetitive output).
    pub compression_ratio_threshold: Option<f32>,
    /// Retry when the average log-probability is below this.
    pub log_prob_threshold: Option<f32>,
    /// Skip a window as silence when the no-speech probability is above this and the
    /// average log-probability is below `log_prob_threshold`.
    pub no_speech_threshold: Option<f32>,
    /// Prompt each window with the text decoded so far.
    pub condition_on_previous_text: bool,
    /// Drop the previous text from the prompt after a window decoded at a temperature above
    /// this.
    pub prompt_reset_on_temperature: f32,
    /// Text that prompts the first window (spelling, names, style).
    pub initial_prompt: Option<String>,
    /// Text the first window's transcript starts with, as faster-whisper's `prefix`: its
    /// tokens are given (after `<|0.00|>` with timestamps) and decoding goes on from them.
    pub prefix: Option<String>,
    /// Words or phrases to expect, as faster-whisper's `hotwords`: given before the previous
    /// text in every window's prompt (not with `prefix`).
    pub hotwords: Option<String>,
    /// Never start a window's text with a blank or end of text.
    pub suppress_blank: bool,
    /// Token ids never to produce, as faster-whisper's `suppress_tokens`: -1 stands for the
    /// model's list (non-speech symbols); `None` is `[-1]`, `Some(vec![])` suppresses only
    /// the control tokens (which are always suppressed).
    pub suppress_tokens: Option<Vec<i64>>,
    /// The latest time the first timestamp of a window may have, in seconds.
    pub max_initial_timestamp: f32,
    /// Beams of the beam search at temperature 0; 1 decodes greedily.
    pub beam_size: usize,
    /// Beam search patience: it ends once `round(beam_size · patience)` hypotheses have
    /// finished (above 1 it looks further than `beam_size` endings).
    pub patience: f32,
    /// Finished hypotheses are ranked by their log-probability over `length ^ length_penalty`
    /// (1: the mean per token; 0: the plain sum, and the search may end when the best beam
    /// finishes).
    pub length_penalty: f32,
    /// Divides the logit of every token already chosen in the window (multiplies it when
    /// negative) by this, as CTranslate2's `repetition_penalty`; 1 leaves them.
    pub repetition_penalty: f32,
    /// Never repeat an n-gram of this many tokens within a window (0: no limit), as
    /// CTranslate2's `no_repeat_ngram_size`.
    pub no_repeat_ngram_size: usize,
    /// Samples drawn at each temperature above 0; the most likely is kept.
    pub best_of: usize,
    /// Time every word from the decoder's cross-attention (segments' `words`); segment
    /// boundaries then follow their words, as the reference's `word_timestamps=True`.
    pub word_timestamps: bool,
    /// With word timestamps, skip silences longer than this (seconds) around segments that
    /// look hallucinated (improbable, very short or very long words), as faster-whisper's
    /// `hallucination_silence_threshold`.
    pub hallucination_silence_threshold: Option<f64>,
    /// Seed of the sampling noise, so fallback results are reproducible.
    pub seed: u64,
    /// Only these stretches of the audio are transcribed, as start and end times in seconds
    /// (`[start, end, start, end, ...]`; a last start without an end runs to the end of the
    /// audio), as faster-whisper's `clip_timestamps`. Empty transcribes everything. Segments
    /// keep their times in the whole recording.
    pub clip_timestamps: Vec<f64>,
    /// Transcribe only the speech the Silero VAD network finds (faster-whisper's
    /// `vad_filter`); the silences between are cut out, times stay the recording's. The
    /// network must be loaded; not with `clip_timestamps`.
    pub vad: bool,
    /// How the VAD tells speech from silence.
    pub vad_options: VadOptions,
}

impl Default for TranscribeOptions {
    fn default() -> Self {
        TranscribeOptions {
            language: None,
            task: Task::Transcribe,
            timestamps: true,
            temperatures: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            compression_ratio_threshold: Some(2.4),
            log_prob_threshold: Some(-1.0),
            no_speech_threshold: Some(0.6),
            condition_on_previous_text: true,
            prompt_reset_on_temperature: 0.5,
            initial_prompt: None,
            prefix: None,
            hotwords: None,
            suppress_blank: true,
            suppress_tokens: None,
            max_initial_timestamp: 1.0,
            beam_size: 5,
            patience: 1.0,
            length_penalty: 1.0,
            repetition_penalty: 1.0,
            no_repeat_ngram_size: 0,
            best_of: 5,
            word_timestamps: false,
            hallucination_silence_threshold: None,
            seed: 0,
            clip_timestamps: Vec::new(),
            vad: false,
            vad_options: VadOptions::default(),
        }
    }
}

impl TranscribeOptions {
    /// Checks values that would make decoding meaningless.
    pub fn validate(&self) -> Result<()> {
        if self.temperatures.is_empty() {
            return Err(Error::bad_option("temperatures: at least one temperature is needed"));
        }
        if let Some(t) = self.temperatures.iter().find(|t| !(**t == 0.0 || TEMPERATURES.contains(t))) {
            return Err(Error::bad_option(format!(
                "temperatures: {t} is not 0 or a value from {} to {}",
                TEMPERATURES.start(),
                TEMPERATURES.end()
            )));
        }
        if !(1..=MAX_BEST_OF).contains(&self.best_of) {
            return Err(Error::bad_option(format!("best_of: {} is not 1 to {MAX_BEST_OF}", self.best_of)));
        }
        if !(1..=MAX_BEAM_SIZE).contains(&self.beam_size) {
            return Err(Error::bad_option(format!("beam_size: {} is not 1 to {MAX_BEAM_SIZE}", self.beam_size)));
        }
        if !(self.patience > 0.0 && self.patience <= MAX_PATIENCE)
            || (self.beam_size > 1 && self.finished_hypotheses() == 0)
        {
            return Err(Error::bad_option(format!(
                "patience: {} is not a value > 0 and up to {MAX_PATIENCE} that leaves {} beams a hypothesis to wait for",
                self.patience, self.beam_size
            )));
        }
        // Past the bound, `length ^ length_penalty` overflows f32 for the longest windows and
        // every score is infinite (an option that looked like damaged weights).
        if !(0.0..=MAX_LENGTH_PENALTY).contains(&self.length_penalty) {
            return Err(Error::bad_option(format!(
                "length_penalty: {} is not a value from 0 to {MAX_LENGTH_PENALTY}",
                self.length_penalty
            )));
        }
        if !REPETITION_PENALTIES.contains(&self.repetition_penalty) {
            return Err(Error::bad_option(format!(
                "repetition_penalty: {} is not a value from {} to {}",
                self.repetition_penalty,
                REPETITION_PENALTIES.start(),
                REPETITION_PENALTIES.end()
            )));
        }
        if !(self.max_initial_timestamp.is_finite() && self.max_initial_timestamp >= 0.0) {
            return Err(Error::bad_option(format!(
                "max_initial_timestamp: {} is not a finite value >= 0",
                self.max_initial_timestamp
            )));
        }
        if let Some(t) = self.clip_timestamps.iter().find(|t| !(t.is_finite() && **t >= 0.0)) {
            return Err(Error::bad_option(format!("clip_timestamps: {t} is not a time in seconds >= 0")));
        }
        if let Some(t) = self.hallucination_silence_threshold {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::bad_option(format!(
                    "hallucination_silence_threshold: {t} is not a time in seconds >= 0"
                )));
            }
            if !self.word_timestamps {
                return Err(Error::bad_option(
                    "hallucination_silence_threshold needs word_timestamps (it judges words)",
                ));
            }
        }
        if self.vad && !self.clip_timestamps.is_empty() {
            return Err(Error::bad_option("vad and clip_timestamps exclude each other: give one or the other"));
        }
        self.vad_options.validate()?;
        let thresholds = [
            ("compression_ratio_threshold", self.compression_ratio_threshold),
            ("log_prob_threshold", self.log_prob_threshold),
            ("no_speech_threshold", self.no_speech_threshold),
        ];
        for (name, v) in thresholds {
            if let Some(v) = v.filter(|v| !v.is_finite()) {
                return Err(Error::bad_option(format!("{name}: {v} is not finite")));
            }
        }
        Ok(())
    }
}

impl TranscribeOptions {
    /// The finished hypotheses a beam search waits for: `round(beam_size · patience)`.
    pub fn finished_hypotheses(&self) -> usize {
        (self.beam_size as f32 * self.patience).round() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_options_are_camel_case_over_the_defaults() {
        let parsed: TranscribeOptions = serde_json::from_str(
            r#"{"task": "translate", "bestOf": 2, "initialPrompt": "Names.", "noSpeechThreshold": null,
                "temperatures": [0.0, 0.5], "conditionOnPreviousText": false}"#,
        )
        .unwrap();
        let want = TranscribeOptions {
            task: Task::Translate,
            best_of: 2,
            initial_prompt: Some("Names.".into()),
            no_speech_threshold: None,
            temperatures: vec![0.0, 0.5],
            condition_on_previous_text: false,
            ..TranscribeOptions::default()
        };
        assert_eq!(parsed, want);
        assert_eq!(serde_json::from_str::<TranscribeOptions>("{}").unwrap(), TranscribeOptions::default());
    }

    #[test]
    fn beam_options_out_of_range_are_errors_naming_them() {
        let check = |o: TranscribeOptions| o.validate().map_err(|e| e.to_string());
        let d = TranscribeOptions::default;
        assert_eq!((d().beam_size, d().patience, d().length_penalty), (5, 1.0, 1.0));
        assert_eq!(check(TranscribeOptions { beam_size: 32, patience: 0.05, length_penalty: 0.0, ..d() }), Ok(()));
        assert!(check(TranscribeOptions { beam_size: 0, ..d() }).unwrap_err().contains("beam_size: 0 is not 1 to 32"));
        assert!(
            check(TranscribeOptions { beam_size: 33, ..d() }).unwrap_err().contains("beam_size: 33 is not 1 to 32")
        );
        // round(5 * 0.09) = 0 hypotheses would end the search before it starts; greedy has none.
        let err = check(TranscribeOptions { patience: 0.09, ..d() }).unwrap_err();
        assert!(err.contains("patience: 0.09 is not a value > 0 and up to 100 that leaves 5 beams"), "{err}");
        assert_eq!(check(TranscribeOptions { beam_size: 1, patience: 0.09, ..d() }), Ok(()));
        assert!(check(TranscribeOptions { patience: f32::NAN, ..d() }).unwrap_err().contains("patience: NaN"));
        assert!(check(TranscribeOptions { patience: 1e30, ..d() }).unwrap_err().contains("patience: 1000000000000000"));
        assert_eq!(check(TranscribeOptions { patience: 100.0, ..d() }), Ok(()));
        let err = check(TranscribeOptions { length_penalty: -0.5, ..d() }).unwrap_err();
        assert!(err.contains("length_penalty: -0.5 is not a value from 0 to 10"), "{err}");
        let err = check(TranscribeOptions { length_penalty: 1000.0, ..d() }).unwrap_err();
        assert!(err.contains("length_penalty: 1000 is not a value from 0 to 10"), "{err}");
        assert!(check(TranscribeOptions { length_penalty: f32::NAN, ..d() }).is_err());
        assert_eq!(check(TranscribeOptions { length_penalty: 10.0, ..d() }), Ok(()));
        let parsed: TranscribeOptions = serde_json::from_str(r#"{"beamSize": 2, "lengthPenalty": 0.5}"#).unwrap();
        assert_eq!((parsed.beam_size, parsed.length_penalty), (2, 0.5));
    }

    #[test]
    fn guard_options_out_of_range_are_errors_naming_them() {
        let check = |o: TranscribeOptions| o.validate().map_err(|e| e.to_string());
        let d = TranscribeOptions::default;
        let err = check(TranscribeOptions { repetition_penalty: 0.0, ..d() }).unwrap_err();
        assert!(err.contains("repetition_penalty: 0 is not a value from 0.01 to 100"), "{err}");
        for bad in [1e-44, 0.009, 100.5, f32::INFINITY, f32::NAN] {
            let err = check(TranscribeOptions { repetition_penalty: bad, ..d() }).unwrap_err();
            assert!(err.contains(&format!("repetition_penalty: {bad} is not a value from 0.01 to 100")), "{err}");
        }
        for good in [0.01, 1.2, 100.0] {
            assert_eq!(check(TranscribeOptions { repetition_penalty: good, ..d() }), Ok(()));
        }
        for bad in [1e-40, 0.0009, 100.5, -1.0, f32::INFINITY, f32::NAN] {
            let err = check(TranscribeOptions { temperatures: vec![0.0, bad], ..d() }).unwrap_err();
            assert!(err.contains(&format!("temperatures: {bad} is not 0 or a value from 0.001 to 100")), "{err}");
        }
        assert_eq!(check(TranscribeOptions { temperatures: vec![0.0, 0.001, 100.0], ..d() }), Ok(()));
        let err = check(TranscribeOptions { hallucination_silence_threshold: Some(2.0), ..d() }).unwrap_err();
        assert!(err.contains("hallucination_silence_threshold needs word_timestamps"), "{err}");
        let err =
            check(TranscribeOptions { hallucination_silence_threshold: Some(-1.0), word_timestamps: true, ..d() })
                .unwrap_err();
        assert!(err.contains("hallucination_silence_threshold: -1 is not a time in seconds >= 0"), "{err}");
        let parsed: TranscribeOptions = serde_json::from_str(
            r#"{"prefix": "So", "hotwords": "Grafana", "suppressTokens": [-1, 13], "repetitionPenalty": 1.2,
                "noRepeatNgramSize": 3, "wordTimestamps": true, "hallucinationSilenceThreshold": 2}"#,
        )
        .unwrap();
        let want = TranscribeOptions {
            prefix: Some("So".into()),
            hotwords: Some("Grafana".into()),
            suppress_tokens: Some(vec![-1, 13]),
            repetition_penalty: 1.2,
            no_repeat_ngram_size: 3,
            word_timestamps: true,
            hallucination_silence_threshold: Some(2.0),
            ..d()
        };
        assert_eq!(parsed, want);
        assert_eq!(check(want), Ok(()));
    }

    #[test]
    fn unknown_json_options_and_tasks_are_errors() {
        let err = serde_json::from_str::<TranscribeOptions>(r#"{"langauge": "en"}"#).unwrap_err().to_string();
        assert!(err.starts_with("unknown field `langauge`, expected one of `language`, `task`"), "{err}");
        let err = serde_json::from_str::<TranscribeOptions>(r#"{"task": "summarise"}"#).unwrap_err().to_string();
        assert!(err.starts_with("unknown variant `summarise`, expected `transcribe` or `translate`"), "{err}");
    }
}
