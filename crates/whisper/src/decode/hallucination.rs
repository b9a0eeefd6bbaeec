//! faster-whisper's `hallucination_silence_threshold`: with word timestamps, a segment whose
//! first words are improbable, very short or very long is a likely hallucination; when it
//! sits in silence longer than the threshold, the silence before it is skipped and the
//! window decoded again from there (or the window ends before it), instead of keeping text
//! the model invented over a pause.

use crate::decode::words::{Draft, Word};

/// What the reference does not count as words when scoring a segment: a word whose text is
/// part of this string (Python's `in` on strings).
const PUNCTUATION: &str = "\"'“¿([{-\"'.。,，!！?？:：”)]}、";

/// How strange a word is: improbable, shorter than 0.133 s or longer than 2 s.
fn word_anomaly(word: &Word) -> f64 {
    let duration = word.end - word.start;
    let mut score = 0.0;
    if word.probability < 0.15 {
        score += 1.0;
    }
    if duration < 0.133 {
        score += (0.133 - duration) * 15.0;
    }
    if duration > 2.0 {
        score += duration - 2.0;
    }
    score
}

/// A segment whose first eight words (punctuation aside) are strange enough.
fn is_anomaly(segment: Option<&Draft>) -> bool {
    let Some(segment) = segment.filter(|s| !s.words.is_empty()) else { return false };
    let words: Vec<&Word> = segment.words.iter().filter(|w| !PUNCTUATION.contains(w.word.as_str())).take(8).collect();
    let score: f64 = words.iter().map(|w| word_anomaly(w)).sum();
    score >= 3.0 || score + 0.01 >= words.len() as f64
}

/// The window as the guard sees it (seconds).
pub(crate) struct WindowTimes {
    /// Where the window starts, and its audio's length.
    pub offset: f64,
    pub duration: f64,
    /// Where a full window would end (start + 30 s).
    pub full_end: f64,
    /// The whole recording's length.
    pub content: f64,
    /// Where speech last ended before the window.
    pub last_speech: f64,
}

/// What the guard decided for a window.
#[derive(Debug, PartialEq)]
pub(crate) enum Guard {
    /// Keep every segment.
    Keep,
    /// Keep nothing: decode again `gap` seconds after the window's start.
    SkipLeading { gap: f64 },
    /// Keep the segments before `index`; the next window starts at `seek` frames.
    Cut { index: usize, seek: usize },
}

/// The reference's checks on a window's timed `segments` with `threshold` seconds of
/// silence; `content_frames` is where the recording ends.
pub(crate) fn guard(segments: &[Draft], threshold: f64, w: &WindowTimes, content_frames: usize) -> Guard {
    let with_words = |from: usize| segments.get(from..).and_then(|s| s.iter().find(|d| !d.words.is_empty()));
    // A strange first segment after a long pause: skip the pause.
    if let Some(first) = with_words(0).filter(|s| is_anomaly(Some(s))) {
        let gap = first.start - w.offset;
        if gap > threshold {
            return Guard::SkipLeading { gap };
        }
    }
    // A strange segment with silence (or more strangeness) on both sides: drop it and what
    // follows, and go on from its start.
    let mut last_end = w.last_speech;
    for (i, segment) in segments.iter().enumerate() {
        if segment.words.is_empty() {
            continue;
        }
        if is_anomaly(Some(segment)) {
            let next = with_words(i + 1);
            let next_start = next.and_then(|n| n.words.first()).map_or(w.offset + w.duration, |word| word.start);
            let silence_before =
                segment.start - last_end > threshold || segment.start < threshold || segment.start - w.offset < 2.0;
            let silence_after =
                next_start - segment.end > threshold || is_anomaly(next) || w.full_end - segment.end < 2.0;
            if silence_before && silence_after {
                let mut seek = (w.offset + 1.0).max(segment.start) * 100.0;
                if w.content - segment.end < threshold {
                    seek = content_frames as f64;
                }
                return Guard::Cut { index: i, seek: seek.round_ties_even() as usize };
            }
        }
        last_end = segment.end;
    }
    Guard::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(start: f64, end: f64, text: &str, probability: f64) -> Word {
        Word { start, end, word: text.into(), probability }
    }

    fn segment(words: Vec<Word>) -> Draft {
        let (start, end) = (words[0].start, words[words.len() - 1].end);
        Draft { start, end, text_tokens: vec![], words, word_tokens: vec![] }
    }

    fn window(offset: f64) -> WindowTimes {
        WindowTimes { offset, duration: 30.0, full_end: offset + 30.0, content: 100.0, last_speech: offset }
    }

    /// Three improbable words score 3: an anomaly; two ordinary ones do not.
    #[test]
    fn improbable_short_or_long_words_make_a_segment_strange() {
        let strange =
            segment(vec![word(5.0, 5.5, " Thank", 0.1), word(5.5, 6.0, " you", 0.1), word(6.0, 6.5, ".", 0.9)]);
        // Punctuation aside, two words of score 1 each: 2 + 0.01 >= 2.
        assert!(is_anomaly(Some(&strange)));
        let fine = segment(vec![word(5.0, 5.5, " Good", 0.9), word(5.5, 6.0, " morning", 0.8)]);
        assert!(!is_anomaly(Some(&fine)));
        // 0.05 s is 0.083 short of 0.133: 1.245 for one word.
        let short = segment(vec![word(1.0, 1.05, " a", 0.9)]);
        assert!(is_anomaly(Some(&short)));
        assert!(!is_anomaly(None));
    }

    #[test]
    fn a_strange_first_segment_after_a_long_pause_skips_the_pause() {
        let strange = segment(vec![word(12.0, 12.5, " Thank", 0.05), word(12.5, 13.0, " you", 0.05)]);
        assert_eq!(guard(&[strange], 2.0, &window(0.0), 10_000), Guard::SkipLeading { gap: 12.0 });
    }

    #[test]
    fn a_strange_segment_between_pauses_is_cut_with_what_follows() {
        let speech = segment(vec![word(0.5, 1.0, " Hello", 0.9), word(1.0, 1.5, " there", 0.9)]);
        let strange = segment(vec![word(9.0, 9.5, " Thank", 0.05), word(9.5, 10.0, " you", 0.05)]);
        let after = segment(vec![word(20.0, 20.5, " Bye", 0.9), word(20.5, 21.0, " now", 0.9)]);
        let w = window(0.0);
        // 9.0 - 1.5 > 3 before, 20.0 - 10.0 > 3 after: cut from index 1, go on at 9 s.
        let segments = [speech, strange, after];
        assert_eq!(guard(&segments, 3.0, &w, 10_000), Guard::Cut { index: 1, seek: 900 });
        // Pauses shorter than the threshold keep it.
        assert_eq!(guard(&segments, 10.0, &w, 10_000), Guard::Keep);
    }
}
