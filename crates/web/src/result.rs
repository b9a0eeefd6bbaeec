//! What a transcription gives JS: plain objects with camelCase fields, and the transcript as
//! a document (`formatTranscript`), written by the same functions as the native command's
//! files.

use serde::{Deserialize, Serialize};
use susurrus_whisper::decode::subtitles;
use susurrus_whisper::decode::view::SegmentView;
use susurrus_whisper::decode::words::Word;
use susurrus_whisper::{Segment, Transcript};
use wasm_bindgen::prelude::*;

use crate::error::js_error;

/// A segment as JS sees it (`Segment` in the TypeScript types): the view every JSON output
/// shows, with camelCase names.
pub fn js_segment(segment: &Segment) -> SegmentView<'_> {
    SegmentView::new(segment).camel_case()
}

/// Where the time went, in milliseconds.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// Turning the input into 16 kHz samples (decoding, resampling).
    pub decode_ms: f64,
    pub transcribe_ms: f64,
    pub audio_duration_s: f64,
    /// Transcription seconds per second of audio; `null` for empty audio.
    pub rtf: Option<f64>,
}

/// The result of `transcribe`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JsTranscript<'a> {
    pub text: String,
    pub segments: Vec<SegmentView<'a>>,
    pub language: String,
    /// The detected language's probability (1 when the language was given).
    pub language_probability: f32,
    /// `"webgpu"` or `"cpu"`.
    pub backend: String,
    pub adapter: String,
    pub timings: Timings,
    /// What was wrong with an audio file that still gave audio.
    pub warnings: Vec<String>,
}

impl<'a> JsTranscript<'a> {
    pub fn new(
        t: &'a Transcript,
        backend: &str,
        adapter: &str,
        decode_ms: f64,
        transcribe_ms: f64,
        warnings: Vec<String>,
    ) -> Self {
        JsTranscript {
            text: t.text.clone(),
            segments: t.segments.iter().map(js_segment).collect(),
            language: t.language.clone(),
            language_probability: t.language_probability,
            backend: backend.to_string(),
            adapter: adapter.to_string(),
            timings: Timings {
                decode_ms,
                transcribe_ms,
                audio_duration_s: t.duration,
                rtf: (t.duration > 0.0).then(|| transcribe_ms / 1e3 / t.duration),
            },
            warnings,
        }
    }
}

/// Plain JS values (objects, not `Map`s; `None` as `null`).
pub fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| js_error(format!("cannot pass the result to JS: {e}")))
}

/// The part of a result the documents need.
#[derive(Deserialize)]
struct Timed {
    segments: Vec<TimedSegment>,
}

#[derive(Deserialize)]
struct TimedSegment {
    start: f64,
    end: f64,
    text: String,
    #[serde(default)]
    words: Option<Vec<Word>>,
}

/// How `srt`/`vtt` cues are cut from words: `{ maxLineWidth, maxLineCount, maxWordsPerLine,
/// highlightWords }`, as the `susurrus` command's flags (unknown keys are errors).
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
struct JsCueOptions {
    max_line_width: Option<usize>,
    max_line_count: Option<usize>,
    max_words_per_line: Option<usize>,
    highlight_words: bool,
}

/// `result` (what `transcribe` returned) as a `txt` (one segment a line), `srt`, `vtt` or
/// `json` (the whole result, indented) document; `options` cut `srt`/`vtt` cues from the
/// segments' words.
pub fn format(result: &JsValue, format: &str, options: &JsValue) -> Result<String, JsValue> {
    let cues: JsCueOptions = if options.is_undefined() || options.is_null() {
        JsCueOptions::default()
    } else {
        // Through a JSON value, as the transcribe options: serde-wasm-bindgen reads only the
        // fields a struct names, so serde_json does the struct and rejects misspelt keys.
        let invalid = |e: &dyn std::fmt::Display| js_error(format!("format options: {e}"));
        let json: serde_json::Value = serde_wasm_bindgen::from_value(options.clone()).map_err(|e| invalid(&e))?;
        serde_json::from_value(json).map_err(|e| invalid(&e))?
    };
    if [cues.max_line_width, cues.max_line_count, cues.max_words_per_line].contains(&Some(0)) {
        return Err(js_error("format options: line widths and counts are at least 1"));
    }
    let cues = subtitles::CueOptions {
        max_line_width: cues.max_line_width,
        max_line_count: cues.max_line_count,
        max_words_per_line: cues.max_words_per_line,
        highlight_words: cues.highlight_words,
    };
    if format == "json" {
        let text = js_sys::JSON::stringify_with_replacer_and_space(result, &JsValue::NULL, &JsValue::from(2))
            .map_err(|e| js_error(format!("cannot write the result as JSON: {}", crate::error::describe(&e))))?;
        return Ok(String::from(text) + "\n");
    }
    let timed: Timed = serde_wasm_bindgen::from_value(result.clone())
        .map_err(|e| js_error(format!("not a transcription result: {e}")))?;
    let segments: Vec<Segment> = timed
        .segments
        .into_iter()
        .map(|s| Segment {
            start: s.start,
            end: s.end,
            text: s.text,
            tokens: Vec::new(),
            avg_logprob: 0.0,
            no_speech_prob: 0.0,
            temperature: 0.0,
            compression_ratio: 0.0,
            seek: 0,
            words: s.words,
        })
        .collect();
    match format {
        "txt" => Ok(subtitles::txt(&segments, false)),
        "srt" => Ok(subtitles::srt_with(&segments, &cues)),
        "vtt" => Ok(subtitles::vtt_with(&segments, &cues)),
        other => Err(js_error(format!("format '{other}' is not one of \"txt\", \"srt\", \"vtt\", \"json\""))),
    }
}
