//! Transcripts as text documents: plain text lines, SubRip (SRT) and WebVTT. Pure functions of
//! the segments, shared by the `susurrus` command and the browser package so both write the
//! same files.
//!
//! Times are rounded to the nearest millisecond once, then split into hours, minutes, seconds
//! and milliseconds, so a time like 59.9996 s reads `00:01:00,000` and never `00:00:60,000`.

use crate::Segment;

/// One segment as a line of the text format, newline included: what `susurrus transcribe`
/// prints as each segment is decoded.
pub fn txt_line(segment: &Segment, timestamps: bool) -> String {
    let text = one_line(&segment.text);
    if timestamps {
        format!("[{} --> {}] {text}\n", short_clock(segment.start), short_clock(segment.end))
    } else {
        format!("{text}\n")
    }
}

/// The text format: [`txt_line`] for every segment.
pub fn txt(segments: &[Segment], timestamps: bool) -> String {
    segments.iter().map(|s| txt_line(s, timestamps)).collect()
}

/// SubRip: cues numbered from 1, separated by a blank line.
pub fn srt(segments: &[Segment]) -> String {
    let cues: Vec<String> = segments
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (start, end) = (clock(s.start, ','), clock(s.end, ','));
            format!("{}\n{start} --> {end}\n{}\n", i + 1, one_line(&s.text))
        })
        .collect();
    cues.join("\n")
}

/// WebVTT: the header, then cues separated by a blank line. Cue text is escaped (`&`, `<`,
/// `>`), which also keeps a `-->` in the text from reading as a timing line.
pub fn vtt(segments: &[Segment]) -> String {
    let mut out = String::from("WEBVTT\n");
    for s in segments {
        let text = one_line(&s.text).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        out.push_str(&format!("\n{} --> {}\n{text}\n", clock(s.start, '.'), clock(s.end, '.')));
    }
    out
}

/// Segment text on one line without the leading space Whisper's tokens carry: subtitle cues
/// end at a blank line, and text lines are one per segment.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whole milliseconds in `seconds`, rounded to the nearest; negative and NaN read as 0.
fn milliseconds(seconds: f64) -> u64 {
    (seconds * 1e3).round().max(0.0) as u64
}

/// `HH:MM:SS<sep>mmm` (SRT uses `,`, WebVTT `.`).
fn clock(seconds: f64, separator: char) -> String {
    let ms = milliseconds(seconds);
    let (h, m, s, ms) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("{h:02}:{m:02}:{s:02}{separator}{ms:03}")
}

/// `MM:SS.mmm`, with `HH:` in front from one hour on: the text format's times.
fn short_clock(seconds: f64) -> String {
    let full = clock(seconds, '.');
    match full.strip_prefix("00:") {
        Some(short) => short.to_string(),
        None => full,
    }
}

#[cfg(test)]
mod tests {
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

    /// Two segments, the second across the hour and with a time that rounds up to it.
    fn two() -> Vec<Segment> {
        vec![
            segment(0.0, 5.12, " Hello there.", &[50363, 15496, 612, 13, 50619]),
            segment(3599.9996, 3725.0404, " Second   line,\nstill one.", &[50619, 5498, 50620]),
        ]
    }

    #[test]
    fn txt_lines_carry_minute_clocks_and_hours_from_one_hour_on() {
        assert_eq!(
            txt(&two(), true),
            "[00:00.000 --> 00:05.120] Hello there.\n[01:00:00.000 --> 01:02:05.040] Second line, still one.\n"
        );
        assert_eq!(txt(&two(), false), "Hello there.\nSecond line, still one.\n");
    }

    #[test]
    fn srt_numbers_cues_and_uses_comma_milliseconds() {
        assert_eq!(
            srt(&two()),
            "1\n00:00:00,000 --> 00:00:05,120\nHello there.\n\n\
             2\n01:00:00,000 --> 01:02:05,040\nSecond line, still one.\n"
        );
    }

    #[test]
    fn vtt_has_a_header_point_milliseconds_and_escaped_text() {
        assert_eq!(
            vtt(&two()),
            "WEBVTT\n\n00:00:00.000 --> 00:00:05.120\nHello there.\n\n\
             01:00:00.000 --> 01:02:05.040\nSecond line, still one.\n"
        );
        let odd = [segment(1.0, 2.0, " a < b & c --> d", &[])];
        assert_eq!(vtt(&odd), "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\na &lt; b &amp; c --&gt; d\n");
    }

    #[test]
    fn milliseconds_round_to_nearest_and_carry_into_every_unit() {
        assert_eq!(clock(2.0004, ','), "00:00:02,000");
        assert_eq!(clock(2.0006, ','), "00:00:02,001");
        assert_eq!(clock(59.9996, '.'), "00:01:00.000");
        assert_eq!(clock(3599.9994, '.'), "00:59:59.999");
        assert_eq!(clock(3599.9996, '.'), "01:00:00.000");
        assert_eq!(clock(36_000.0, '.'), "10:00:00.000");
        assert_eq!(clock(44.400000000000006, '.'), "00:00:44.400");
        assert_eq!(clock(-0.01, ','), "00:00:00,000");
        assert_eq!(clock(f64::NAN, ','), "00:00:00,000");
        assert_eq!(short_clock(59.9996), "01:00.000");
        assert_eq!(short_clock(3599.9996), "01:00:00.000");
    }
}
