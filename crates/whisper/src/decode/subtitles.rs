//! Transcripts as text documents: plain text lines, SubRip (SRT) and WebVTT. Pure functions of
//! the segments, shared by the `susurrus` command and the browser package so both write the
//! same files.
//!
//! Times are rounded to the nearest millisecond once, then split into hours, minutes, seconds
//! and milliseconds, so a time like 59.9996 s reads `00:01:00,000` and never `00:00:60,000`.

use crate::decode::transcribe::Segment;
use crate::decode::words::Word;

/// How subtitle cues are cut from timed words, as Whisper's command-line writers cut them
/// (`--max_line_width`, `--max_line_count`, `--max_words_per_line`, `--highlight_words`).
/// Segments without words make one cue each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CueOptions {
    /// Characters per line before a word starts the next line.
    pub max_line_width: Option<usize>,
    /// Lines per cue; with `max_line_width` too, cues ignore segment boundaries and also
    /// break at pauses over 3 s.
    pub max_line_count: Option<usize>,
    /// Words per line.
    pub max_words_per_line: Option<usize>,
    /// One cue per word, that word underlined (`<u>..</u>`), the cue's text around it.
    pub highlight_words: bool,
}

/// A subtitle cue: its times and lines (joined by `\n`).
#[derive(Clone, Debug, PartialEq)]
struct Cue {
    start: f64,
    end: f64,
    text: String,
}

/// The cues of `segments`: from their words when they have them, else one per segment.
/// `escape` is applied to every word's text (WebVTT escapes `&`, `<`, `>`).
fn cues(segments: &[Segment], options: &CueOptions, escape: &dyn Fn(&str) -> String) -> Vec<Cue> {
    if segments.first().is_none_or(|s| s.words.is_none()) {
        return segments.iter().map(|s| Cue { start: s.start, end: s.end, text: escape(&one_line(&s.text)) }).collect();
    }
    let mut out = Vec::new();
    for lines in word_lines(segments, options) {
        let (Some(first), Some(last)) = (lines.first(), lines.last()) else { continue };
        let texts: Vec<String> = lines.iter().map(|w| escape(&w.word)).collect();
        let text = texts.concat();
        if !options.highlight_words {
            out.push(Cue { start: first.start, end: last.end, text });
            continue;
        }
        let mut shown = first.start;
        for (i, word) in lines.iter().enumerate() {
            if milliseconds(shown) != milliseconds(word.start) {
                out.push(Cue { start: shown, end: word.start, text: text.clone() });
            }
            let underlined: String =
                texts.iter().enumerate().map(|(j, t)| if j == i { underline(t) } else { t.clone() }).collect();
            out.push(Cue { start: word.start, end: word.end, text: underlined });
            shown = word.end;
        }
    }
    out
}

/// `text` with its words (not its leading line break or spaces) in `<u>`.
fn underline(text: &str) -> String {
    let body = text.trim_start();
    format!("{}<u>{body}</u>", &text[..text.len() - body.len()])
}

/// The words of `segments` grouped into cues, each word's text as the cue shows it: a line's
/// first word without its leading space, after a `\n` when it starts a cue's second line.
fn word_lines(segments: &[Segment], options: &CueOptions) -> Vec<Vec<Word>> {
    let preserve_segments = options.max_line_count.is_none() || options.max_line_width.is_none();
    let max_width = options.max_line_width.unwrap_or(1000);
    let per_line = options.max_words_per_line.unwrap_or(1000).max(1);
    let mut cues = Vec::new();
    let mut cue: Vec<Word> = Vec::new();
    let (mut line_len, mut line_count) = (0, 1);
    let mut last = segments.iter().flat_map(|s| s.words.iter().flatten()).next().map_or(0.0, |w| w.start);
    for segment in segments {
        let words = segment.words.as_deref().unwrap_or_default();
        for chunk in words.chunks(per_line) {
            for (i, original) in chunk.iter().enumerate() {
                let mut word = original.clone();
                let len = word.word.chars().count();
                let long_pause = !preserve_segments && word.start - last > 3.0;
                let has_room = line_len + len <= max_width;
                let segment_break = i == 0 && !cue.is_empty() && preserve_segments;
                if line_len > 0 && has_room && !long_pause && !segment_break {
                    line_len += len;
                } else {
                    word.word = word.word.trim().to_string();
                    let full = options.max_line_count.is_some_and(|max| long_pause || line_count >= max);
                    if !cue.is_empty() && full || segment_break {
                        cues.push(std::mem::take(&mut cue));
                        line_count = 1;
                    } else if line_len > 0 {
                        line_count += 1;
                        word.word = format!("\n{}", word.word);
                    }
                    line_len = word.word.trim().chars().count();
                }
                last = word.start;
                cue.push(word);
            }
        }
    }
    if !cue.is_empty() {
        cues.push(cue);
    }
    cues
}

/// One segment as a line of the text format, newline included: what `susurrus transcribe`
/// prints as each segment is decoded.
pub fn txt_line(segment: &Segment, timestamps: bool) -> String {
    if timestamps {
        timed_line(segment.start, segment.end, &segment.text)
    } else {
        format!("{}\n", one_line(&segment.text))
    }
}

/// `[mm:ss.mmm --> mm:ss.mmm] text` and a newline: a line of the text format (and of a live
/// stream's committed text).
pub fn timed_line(start: f64, end: f64, text: &str) -> String {
    format!("[{} --> {}] {}\n", short_clock(start), short_clock(end), one_line(text))
}

/// The text format: [`txt_line`] for every segment.
pub fn txt(segments: &[Segment], timestamps: bool) -> String {
    segments.iter().map(|s| txt_line(s, timestamps)).collect()
}

/// SubRip: cues numbered from 1, separated by a blank line, one per segment.
pub fn srt(segments: &[Segment]) -> String {
    srt_with(segments, &CueOptions::default())
}

/// SubRip with cues cut from the segments' words by `options` (see [`CueOptions`]).
pub fn srt_with(segments: &[Segment], options: &CueOptions) -> String {
    let cues: Vec<String> = cues(segments, options, &|t| t.to_string())
        .into_iter()
        .enumerate()
        .map(|(i, c)| format!("{}\n{} --> {}\n{}\n", i + 1, clock(c.start, ','), clock(c.end, ','), c.text))
        .collect();
    cues.join("\n")
}

/// WebVTT: the header, then cues separated by a blank line, one per segment. Cue text is
/// escaped (`&`, `<`, `>`), which also keeps a `-->` in the text from reading as a timing line.
pub fn vtt(segments: &[Segment]) -> String {
    vtt_with(segments, &CueOptions::default())
}

/// WebVTT with cues cut from the segments' words by `options` (see [`CueOptions`]).
pub fn vtt_with(segments: &[Segment], options: &CueOptions) -> String {
    let escape = |t: &str| t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let mut out = String::from("WEBVTT\n");
    for c in cues(segments, options, &escape) {
        out.push_str(&format!("\n{} --> {}\n{}\n", clock(c.start, '.'), clock(c.end, '.'), c.text));
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

    /// Two segments with their words: " One two three." (0.0-1.5) and " Four & five" after a
    /// 4 s pause (5.5-6.5).
    fn worded() -> Vec<Segment> {
        let w = |start, end, word: &str| Word { start, end, word: word.into(), probability: 0.9 };
        let mut a = segment(0.0, 1.5, " One two three.", &[]);
        a.words = Some(vec![w(0.0, 0.4, " One"), w(0.4, 0.9, " two"), w(0.9, 1.5, " three.")]);
        let mut b = segment(5.5, 6.5, " Four & five", &[]);
        b.words = Some(vec![w(5.5, 6.0, " Four"), w(6.0, 6.2, " &"), w(6.2, 6.5, " five")]);
        vec![a, b]
    }

    #[test]
    fn cues_from_words_follow_segments_unless_lines_and_counts_are_set() {
        // By default one cue per segment, from its first word's start to its last's end.
        assert_eq!(
            srt_with(&worded(), &CueOptions::default()),
            "1\n00:00:00,000 --> 00:00:01,500\nOne two three.\n\n2\n00:00:05,500 --> 00:00:06,500\nFour & five\n"
        );
        // Lines of at most 8 characters ("One two" is 7; " three." would make 14), two
        // lines a cue; the 4 s pause starts a cue although the second has room.
        let lines = CueOptions { max_line_width: Some(8), max_line_count: Some(2), ..CueOptions::default() };
        assert_eq!(
            vtt_with(&worded(), &lines),
            "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nOne two\nthree.\n\n00:00:05.500 --> 00:00:06.500\nFour &amp;\nfive\n"
        );
        // At most two words a line, segments kept (no line count): each line of words is a
        // cue of its own, as Whisper's writer cuts them.
        let words = CueOptions { max_words_per_line: Some(2), ..CueOptions::default() };
        assert_eq!(
            srt_with(&worded()[..1], &words),
            "1\n00:00:00,000 --> 00:00:00,900\nOne two\n\n2\n00:00:00,900 --> 00:00:01,500\nthree.\n"
        );
    }

    #[test]
    fn highlighting_gives_each_word_its_cue_and_fills_the_gaps() {
        let mut one = worded();
        one.truncate(1);
        if let Some(words) = one[0].words.as_mut() {
            words[1].start = 0.5;
        }
        let highlight = CueOptions { highlight_words: true, ..CueOptions::default() };
        assert_eq!(
            vtt_with(&one, &highlight),
            "WEBVTT\n\n00:00:00.000 --> 00:00:00.400\n<u>One</u> two three.\n\n\
             00:00:00.400 --> 00:00:00.500\nOne two three.\n\n\
             00:00:00.500 --> 00:00:00.900\nOne <u>two</u> three.\n\n\
             00:00:00.900 --> 00:00:01.500\nOne two <u>three.</u>\n"
        );
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
