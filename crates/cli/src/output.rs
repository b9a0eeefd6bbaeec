//! Transcript output formats: plain text, SubRip (SRT), WebVTT (the core's
//! [`susurrus_whisper::decode::subtitles`], shared with the browser package) and JSON lines.
//! Pure functions of a transcript, so every format is tested on hand-written transcripts.

use std::io::Write;
use std::time::Duration;

use serde::Serialize;
use susurrus_whisper::Transcript;
use susurrus_whisper::decode::view::SegmentView;

use crate::error::{Error, Result};
pub use susurrus_whisper::decode::subtitles::{CueOptions, srt, srt_with, txt, txt_line, vtt, vtt_with};

/// The `--format` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line per segment: `[00:01.240 --> 00:05.120] text` (just the text with
    /// `--no-timestamps`).
    Txt,
    /// SubRip subtitles: numbered cues, `HH:MM:SS,mmm` times.
    Srt,
    /// WebVTT subtitles: a `WEBVTT` header, `HH:MM:SS.mmm` times.
    Vtt,
    /// One JSON object per file on one line: text, segments (times, text, token ids,
    /// decoding scores), language, backend and timings.
    Json,
}

impl Format {
    /// The file name extension of the format (without the dot).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Txt => "txt",
            Format::Srt => "srt",
            Format::Vtt => "vtt",
            Format::Json => "json",
        }
    }
}

/// Where the time of one file went, as the JSON output reports it. Benchmark scripts read
/// these keys, so they are part of the output format.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timings {
    /// Opening the backend and loading and compiling the model (once per invocation).
    pub load_ms: f64,
    /// Of that: opening the backend (device, context, libraries).
    pub open_ms: f64,
    /// Reading the model folder and planning its graphs, on threads beside the opening.
    pub model_ms: f64,
    /// Compiling the planned graphs on the backend and uploading the weights.
    pub compile_ms: f64,
    /// Reading, decoding and resampling the audio.
    pub audio_ms: f64,
    /// The transcription itself.
    pub transcribe_ms: f64,
    pub audio_duration_s: f64,
    /// Real-time factor: transcription seconds per second of audio (`None`, JSON `null`, for
    /// empty audio).
    pub rtf: Option<f64>,
}

/// Where loading went (once per invocation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    pub open: Duration,
    pub read: Duration,
    pub compile: Duration,
    pub total: Duration,
}

impl Timings {
    pub fn new(load: &Load, audio: Duration, transcribe: Duration, audio_duration_s: f64) -> Timings {
        let rtf = (audio_duration_s > 0.0).then(|| transcribe.as_secs_f64() / audio_duration_s);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Timings {
            load_ms: ms(load.total),
            open_ms: ms(load.open),
            model_ms: ms(load.read),
            compile_ms: ms(load.compile),
            audio_ms: audio.as_secs_f64() * 1e3,
            transcribe_ms: transcribe.as_secs_f64() * 1e3,
            audio_duration_s,
            rtf,
        }
    }
}

/// What the JSON format reports beside the transcript.
#[derive(Clone, Debug)]
pub struct Meta<'a> {
    /// The input as named on the command line (`-` for standard input).
    pub file: &'a str,
    /// The backend's name (`cpu`, `wgpu`).
    pub backend: &'a str,
    pub timings: &'a Timings,
    /// Whether text output shows segment times (off with `--no-timestamps`).
    pub timestamps: bool,
    /// How SRT/VTT cues are cut from words.
    pub cues: CueOptions,
}

/// `transcript` in `format`; text formats end with a newline unless empty.
pub fn render(format: Format, transcript: &Transcript, meta: &Meta) -> String {
    match format {
        Format::Txt => txt(&transcript.segments, meta.timestamps),
        Format::Srt => srt_with(&transcript.segments, &meta.cues),
        Format::Vtt => vtt_with(&transcript.segments, &meta.cues),
        Format::Json => json(transcript, meta),
    }
}

#[derive(Serialize)]
struct JsonTranscript<'a> {
    file: &'a str,
    text: &'a str,
    segments: Vec<SegmentView<'a>>,
    language: &'a str,
    language_probability: f32,
    backend: &'a str,
    timings: &'a Timings,
}

/// One JSON object on one line (newline included). Texts are as decoded, leading space kept;
/// segments as [`SegmentView`] shows them (words with `--word-timestamps`).
pub fn json(transcript: &Transcript, meta: &Meta) -> String {
    let record = JsonTranscript {
        file: meta.file,
        text: &transcript.text,
        segments: transcript.segments.iter().map(SegmentView::new).collect(),
        language: &transcript.language,
        language_probability: transcript.language_probability,
        backend: meta.backend,
        timings: meta.timings,
    };
    // Serialising plain structs of strings and numbers cannot fail (non-finite numbers
    // become `null`).
    let mut line = serde_json::to_string(&record).unwrap_or_default();
    line.push('\n');
    line
}

/// Writes `text` to standard output.
pub fn print(text: &str) -> Result<()> {
    std::io::stdout().lock().write_all(text.as_bytes()).map_err(|e| Error::io(std::path::Path::new("<stdout>"), e))
}

/// `bytes` in B, kB, MB or GB (powers of 1000, one decimal).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "kB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// `n` with thousands separated by spaces: 37 760 640.
pub fn format_count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use susurrus_whisper::Segment;

    use super::*;

    fn segment(start: f64, end: f64, text: &str, tokens: &[u32]) -> Segment {
        Segment {
            start,
            end,
            text: text.to_string(),
            tokens: tokens.to_vec(),
            avg_logprob: -0.25,
            no_speech_prob: 0.5,
            temperature: 0.0,
            compression_ratio: 1.5,
            seek: 0,
            words: None,
        }
    }

    fn transcript(segments: Vec<Segment>) -> Transcript {
        let text = segments.iter().map(|s| s.text.as_str()).collect();
        Transcript { segments, text, language: "en".into(), language_probability: 1.0, duration: 9.5 }
    }

    fn timings() -> Timings {
        let ms = Duration::from_millis;
        let load = Load { open: ms(400), read: ms(300), compile: ms(1100), total: ms(1500) };
        Timings::new(&load, ms(20), ms(4750), 9.5)
    }

    fn meta(timings: &Timings) -> Meta<'_> {
        Meta { file: "clips/a.wav", backend: "cpu", timings, timestamps: true, cues: CueOptions::default() }
    }

    #[test]
    fn an_empty_transcript_renders_empty_documents() {
        let t = timings();
        let empty = transcript(vec![]);
        assert_eq!(render(Format::Txt, &empty, &meta(&t)), "");
        assert_eq!(render(Format::Srt, &empty, &meta(&t)), "");
        assert_eq!(render(Format::Vtt, &empty, &meta(&t)), "WEBVTT\n");
        let none = Load { open: Duration::ZERO, read: Duration::ZERO, compile: Duration::ZERO, total: Duration::ZERO };
        let zero = Timings::new(&none, Duration::ZERO, Duration::ZERO, 0.0);
        let empty = Transcript { duration: 0.0, ..empty };
        assert_eq!(
            render(Format::Json, &empty, &meta(&zero)),
            "{\"file\":\"clips/a.wav\",\"text\":\"\",\"segments\":[],\"language\":\"en\",\"language_probability\":1.0,\"backend\":\"cpu\",\
             \"timings\":{\"load_ms\":0.0,\"open_ms\":0.0,\"model_ms\":0.0,\"compile_ms\":0.0,\"audio_ms\":0.0,\"transcribe_ms\":0.0,\"audio_duration_s\":0.0,\
             \"rtf\":null}}\n"
        );
    }

    #[test]
    fn json_is_one_line_with_segments_tokens_and_timings() {
        let t = timings();
        let one = transcript(vec![segment(0.0, 5.12, " Hello \"there\".", &[50363, 15496, 50619])]);
        assert_eq!(
            render(Format::Json, &one, &meta(&t)),
            "{\"file\":\"clips/a.wav\",\"text\":\" Hello \\\"there\\\".\",\"segments\":[{\"start\":0.0,\"end\":5.12,\
             \"text\":\" Hello \\\"there\\\".\",\"tokens\":[50363,15496,50619],\"avg_logprob\":-0.25,\
             \"no_speech_prob\":0.5,\"temperature\":0.0,\"compression_ratio\":1.5}],\"language\":\"en\",\
             \"language_probability\":1.0,\"backend\":\"cpu\",\"timings\":{\"load_ms\":1500.0,\"open_ms\":400.0,\"model_ms\":300.0,\"compile_ms\":1100.0,\"audio_ms\":20.0,\"transcribe_ms\":4750.0,\
             \"audio_duration_s\":9.5,\"rtf\":0.5}}\n"
        );
    }

    #[test]
    fn timed_words_follow_the_segment_fields_in_json() {
        let t = timings();
        let word = |start, end, word: &str| susurrus_whisper::decode::words::Word {
            start,
            end,
            word: word.into(),
            probability: 0.75,
        };
        let mut s = segment(0.0, 1.0, " Hi you", &[50363, 17250, 345, 50413]);
        s.words = Some(vec![word(0.0, 0.4, " Hi"), word(0.4, 1.0, " you")]);
        let line = render(Format::Json, &transcript(vec![s]), &meta(&t));
        let want = "\"compression_ratio\":1.5,\"words\":[{\"start\":0.0,\"end\":0.4,\"word\":\" Hi\",\"probability\":0.75},\
                    {\"start\":0.4,\"end\":1.0,\"word\":\" you\",\"probability\":0.75}]}]";
        assert!(line.contains(want), "{line}");
    }

    #[test]
    fn formats_name_their_extensions() {
        let all = [Format::Txt, Format::Srt, Format::Vtt, Format::Json];
        assert_eq!(all.map(Format::extension), ["txt", "srt", "vtt", "json"]);
    }

    #[test]
    fn sizes_and_counts_read_easily() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(999), "999 B");
        assert_eq!(format_bytes(1000), "1.0 kB");
        assert_eq!(format_bytes(75_537_502), "75.5 MB");
        assert_eq!(format_bytes(3_200_000_000), "3.2 GB");
        assert_eq!(format_bytes(5_000_000_000_000), "5000.0 GB");
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1000), "1 000");
        assert_eq!(format_count(37_760_640), "37 760 640");
    }
}
