//! Transcription options, with the reference `transcribe()` defaults (greedy decoding).

use serde::Deserialize;

use crate::error::{Error, Result};

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
    /// Never start a window's text with a blank or end of text.
    pub suppress_blank: bool,
    /// Token ids never to produce; `None` uses the model's list (non-speech symbols and the
    /// control tokens).
    pub suppress_tokens: Option<Vec<u32>>,
    /// The latest time the first timestamp of a window may have, in seconds.
    pub max_initial_timestamp: f32,
    /// Samples drawn at each temperature above 0; the most likely is kept.
    pub best_of: usize,
    /// Seed of the sampling noise, so fallback results are reproducible.
    pub seed: u64,
    /// Only these stretches of the audio are transcribed, as start and end times in seconds
    /// (`[start, end, start, end, ...]`; a last start without an end runs to the end of the
    /// audio), as faster-whisper's `clip_timestamps`. Empty transcribes everything. Segments
    /// keep their times in the whole recording.
    pub clip_timestamps: Vec<f64>,
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
            suppress_blank: true,
            suppress_tokens: None,
            max_initial_timestamp: 1.0,
            best_of: 5,
            seed: 0,
            clip_timestamps: Vec::new(),
        }
    }
}

impl TranscribeOptions {
    /// Checks values that would make decoding meaningless.
    pub fn validate(&self) -> Result<()> {
        if self.temperatures.is_empty() {
            return Err(Error::bad_option("temperatures: at least one temperature is needed"));
        }
        if let Some(t) = self.temperatures.iter().find(|t| !(t.is_finite() && **t >= 0.0)) {
            return Err(Error::bad_option(format!("temperatures: {t} is not a finite value >= 0")));
        }
        if self.best_of == 0 {
            return Err(Error::bad_option("best_of must be at least 1"));
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
    fn unknown_json_options_and_tasks_are_errors() {
        let err = serde_json::from_str::<TranscribeOptions>(r#"{"langauge": "en"}"#).unwrap_err().to_string();
        assert!(err.starts_with("unknown field `langauge`, expected one of `language`, `task`"), "{err}");
        let err = serde_json::from_str::<TranscribeOptions>(r#"{"task": "summarise"}"#).unwrap_err().to_string();
        assert!(err.starts_with("unknown variant `summarise`, expected `transcribe` or `translate`"), "{err}");
    }
}
