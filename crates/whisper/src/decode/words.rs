//! Word timestamps from the decoder's cross-attention, as faster-whisper computes them with
//! CTranslate2's `align` (`word_timestamps=True`).
//!
//! The alignment graph ([`crate::graphs::align`]) runs the decoder over a window's whole text and
//! returns, for each of the model's alignment heads, the attention of every token over the
//! window's audio frames. Here, on the host: each head's weights are standardised over the
//! tokens and median-filtered over time, the heads averaged, and a dynamic time warping path
//! through `-weights` assigns each token the frame where it starts. Tokens are grouped into
//! words (at spaces, or at whole characters for languages written without them),
//! punctuation is merged into its neighbours, and a word's probability is the mean of its
//! tokens'. Then the reference's corrections: long words at sentence ends and after pauses
//! are shortened, and segment boundaries move to the first and last word.

use crate::error::Result;
use crate::text::tokenizer::{SpecialTokens, Tokenizer};

/// Width of the median filter over each head's weights along time.
pub const MEDIAN_FILTER_WIDTH: usize = 7;
/// Encoder positions (alignment columns) per second of audio.
const TOKENS_PER_SECOND: f64 = 50.0;
/// Punctuation joined to the word after it.
pub const PREPEND_PUNCTUATIONS: &str = "\"'\u{201c}\u{bf}([{-";
/// Punctuation joined to the word before it.
pub const APPEND_PUNCTUATIONS: &str = "\"'.\u{3002},\u{ff0c}!\u{ff01}?\u{ff1f}:\u{ff1a}\u{201d})]}\u{3001}";
/// Python's `string.punctuation`.
const ASCII_PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
/// Characters that end a sentence.
const SENTENCE_END_MARKS: &str = ".\u{3002}!\u{ff01}?\u{ff1f}";

/// A word with its time in the recording. Its serde (`start`, `end`, `word`, `probability`, in
/// this order) is also how every JSON output shows it ([`crate::decode::view`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Word {
    /// Seconds from the start of the audio, rounded to 0.01 s.
    pub start: f64,
    pub end: f64,
    /// The word's text, its leading space and merged punctuation included.
    pub word: String,
    /// The mean probability of its tokens.
    pub probability: f64,
}

/// A word as the alignment finds it, times relative to the window.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Timing {
    pub word: String,
    pub tokens: Vec<u32>,
    pub start: f64,
    pub end: f64,
    pub probability: f64,
}

/// The alignment weights of one window: `[heads, rows, frames]`, each head's row a softmax
/// over the window's frames, for the rows of the whole decoded sequence.
pub(crate) struct Weights<'a> {
    pub values: &'a [f32],
    pub heads: usize,
    pub rows: usize,
    pub frames: usize,
}

impl Weights<'_> {
    /// The `[text + 1, frames]` matrix the path is found in: every head standardised over
    /// the rows (mean 0, variance 1, no epsilon), median-filtered along time, the heads
    /// averaged; then the rows of the text tokens and end of text, from `first`.
    fn matrix(&self, first: usize, text: usize) -> Vec<f32> {
        let (rows, frames) = (self.rows, self.frames);
        let mut mean = vec![0.0f32; (text + 1) * frames];
        let mut column = vec![0.0f32; rows];
        let mut filtered = vec![0.0f32; rows * frames];
        for head in self.values.chunks_exact(rows * frames).take(self.heads) {
            let mut standard = head.to_vec();
            for f in 0..frames {
                for (r, c) in column.iter_mut().enumerate() {
                    *c = head[r * frames + f];
                }
                let m = column.iter().sum::<f32>() / rows as f32;
                let var = column.iter().map(|v| (v - m) * (v - m)).sum::<f32>() / rows as f32;
                let inv = 1.0 / var.sqrt();
                for (r, c) in column.iter().enumerate() {
                    standard[r * frames + f] = (c - m) * inv;
                }
            }
            for (src, dst) in standard.chunks_exact(frames).zip(filtered.chunks_exact_mut(frames)) {
                median_filter(src, dst, MEDIAN_FILTER_WIDTH);
            }
            for (acc, v) in mean.iter_mut().zip(&filtered[first * frames..(first + text + 1) * frames]) {
                *acc += v;
            }
        }
        mean.iter_mut().for_each(|v| *v /= self.heads as f32);
        mean
    }
}

/// The median of each `width` values around every element of `src` (reflected at the ends:
/// index -1 reads 1), as CTranslate2's `MedianFilter`; a row not longer than half the width
/// is copied.
fn median_filter(src: &[f32], dst: &mut [f32], width: usize) {
    let n = src.len() as isize;
    let rank = (width / 2) as isize;
    if n <= rank {
        dst.copy_from_slice(src);
        return;
    }
    let mut window = vec![0.0f32; width];
    for j in 0..n {
        for k in -rank..=rank {
            let mut read = (j + k).abs();
            if read >= n {
                read = n - (read - n) - 2;
            }
            window[(k + rank) as usize] = src[read as usize];
        }
        let (_, median, _) = window.select_nth_unstable_by(rank as usize, f32::total_cmp);
        dst[j as usize] = *median;
    }
}

/// The dynamic time warping path through the cost `-x` of `x [n, m]`, from (0, 0) to
/// (n-1, m-1), as CTranslate2's `negative_dtw`: ties prefer moving along time. Its indices are
/// signed as CTranslate2's: where NaN weights (a window of a few frames under many tokens:
/// their normalisation divides by a deviation of 0) send the path along an edge of the table,
/// a step records -1, and the word times read from it are -0.02 s as the reference's.
fn negative_dtw(x: &[f32], n: usize, m: usize) -> Vec<(i64, i64)> {
    let mut cost = vec![f32::INFINITY; (n + 1) * (m + 1)];
    let mut trace = vec![-1i8; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    cost[0] = 0.0;
    for j in 1..=m {
        for i in 1..=n {
            let (c0, c1, c2) = (cost[at(i - 1, j - 1)], cost[at(i - 1, j)], cost[at(i, j - 1)]);
            let (c, t) = if c0 < c1 && c0 < c2 {
                (c0, 0)
            } else if c1 < c0 && c1 < c2 {
                (c1, 1)
            } else {
                (c2, 2)
            };
            cost[at(i, j)] = -x[(i - 1) * m + (j - 1)] + c;
            trace[at(i, j)] = t;
        }
    }
    for k in 0..=m {
        trace[at(0, k)] = 2;
    }
    for k in 0..=n {
        trace[at(k, 0)] = 1;
    }
    let (mut i, mut j) = (n, m);
    let mut path = Vec::with_capacity(n + m);
    while i > 0 || j > 0 {
        path.push((i as i64 - 1, j as i64 - 1));
        match trace[at(i, j)] {
            0 => {
                i -= 1;
                j -= 1;
            }
            1 => i -= 1,
            _ => j -= 1,
        }
    }
    path.reverse();
    path
}

/// Splits `tokens` where each piece decodes to whole characters (a character split across
/// tokens stays in one piece), as the reference's `split_tokens_on_unicode`.
fn split_on_unicode(tokenizer: &Tokenizer, tokens: &[u32]) -> Result<(Vec<String>, Vec<Vec<u32>>)> {
    let full = tokenizer.decode(tokens, SpecialTokens::Skip)?;
    let full: Vec<char> = full.chars().collect();
    let (mut words, mut pieces) = (Vec::new(), Vec::new());
    let mut current = Vec::new();
    let mut offset = 0;
    for &t in tokens {
        current.push(t);
        let decoded = tokenizer.decode(&current, SpecialTokens::Skip)?;
        let replacement = decoded.chars().position(|c| c == '\u{fffd}').map(|i| i + offset);
        if replacement.is_none_or(|i| full.get(i) == Some(&'\u{fffd}')) {
            offset += decoded.chars().count();
            words.push(decoded);
            pieces.push(std::mem::take(&mut current));
        }
    }
    Ok((words, pieces))
}

/// Groups `tokens` into words: at whole characters for languages written without spaces,
/// else pieces that start with a space, are punctuation or special begin a word.
pub(crate) fn split_words(
    tokenizer: &Tokenizer,
    tokens: &[u32],
    language: &str,
) -> Result<(Vec<String>, Vec<Vec<u32>>)> {
    let (subwords, pieces) = split_on_unicode(tokenizer, tokens)?;
    if ["zh", "ja", "th", "lo", "my", "yue"].contains(&language) {
        return Ok((subwords, pieces));
    }
    let end_of_text = tokenizer.special_ids().end_of_text;
    let (mut words, mut word_tokens): (Vec<String>, Vec<Vec<u32>>) = (Vec::new(), Vec::new());
    for (subword, piece) in subwords.into_iter().zip(pieces) {
        let special = piece.first().is_some_and(|&t| t >= end_of_text);
        let with_space = subword.starts_with(' ');
        let punctuation = is_in(subword.trim(), ASCII_PUNCTUATION);
        match (words.last_mut(), word_tokens.last_mut()) {
            (Some(last), Some(tokens)) if !(special || with_space || punctuation) => {
                last.push_str(&subword);
                tokens.extend(piece);
            }
            _ => {
                words.push(subword);
                word_tokens.push(piece);
            }
        }
    }
    Ok((words, word_tokens))
}

/// Joins opening punctuation to the word after it and closing punctuation to the word
/// before, leaving empty words in their places (as the reference does).
fn merge_punctuations(alignment: &mut [Timing]) {
    if alignment.len() >= 2 {
        let (mut i, mut j) = (alignment.len() as isize - 2, alignment.len() - 1);
        while i >= 0 {
            let p = i as usize;
            let previous = &alignment[p];
            if previous.word.starts_with(' ') && is_in(previous.word.trim(), PREPEND_PUNCTUATIONS) {
                let (word, tokens) = (std::mem::take(&mut alignment[p].word), std::mem::take(&mut alignment[p].tokens));
                let following = &mut alignment[j];
                following.word = word + &following.word;
                following.tokens = [tokens, std::mem::take(&mut following.tokens)].concat();
            } else {
                j = p;
            }
            i -= 1;
        }
    }
    let (mut i, mut j) = (0, 1);
    while j < alignment.len() {
        let joins = !alignment[i].word.ends_with(' ') && is_in(&alignment[j].word, APPEND_PUNCTUATIONS);
        if joins {
            let (word, tokens) = (std::mem::take(&mut alignment[j].word), std::mem::take(&mut alignment[j].tokens));
            alignment[i].word.push_str(&word);
            alignment[i].tokens.extend(tokens);
        } else {
            i = j;
        }
        j += 1;
    }
}

/// Python's `word in chars`, which the reference's rules use on strings of characters: a
/// substring test (so the empty word is in every one, and `"()"` is punctuation).
fn is_in(word: &str, chars: &str) -> bool {
    chars.contains(word)
}

/// The words of `text_tokens` (a window's text, end of text excluded) with times relative to
/// the window and probabilities, from the alignment weights whose rows are the decoded
/// sequence `start_sequence + [<|notimestamps|>] + text + [<|endoftext|>]` and
/// `token_probs` (each text token's probability, in order).
pub(crate) fn find_alignment(
    tokenizer: &Tokenizer,
    language: &str,
    text_tokens: &[u32],
    weights: &Weights,
    sot_len: usize,
    token_probs: &[f32],
) -> Result<Vec<Timing>> {
    if text_tokens.is_empty() || weights.frames == 0 {
        return Ok(Vec::new());
    }
    let text = text_tokens.len();
    let matrix = weights.matrix(sot_len, text);
    let path = negative_dtw(&matrix, text + 1, weights.frames);
    // The frame at which each row's stretch of the path begins.
    let mut jump_times = Vec::with_capacity(text + 1);
    let mut previous = None;
    for &(i, j) in &path {
        if previous != Some(i) {
            jump_times.push(j as f64 / TOKENS_PER_SECOND);
            previous = Some(i);
        }
    }
    let mut with_end = text_tokens.to_vec();
    with_end.push(tokenizer.special_ids().end_of_text);
    let (words, word_tokens) = split_words(tokenizer, &with_end, language)?;
    if word_tokens.len() <= 1 {
        return Ok(Vec::new());
    }
    let mut boundaries = vec![0];
    for t in &word_tokens[..word_tokens.len() - 1] {
        boundaries.push(boundaries.last().copied().unwrap_or(0) + t.len());
    }
    let mut out = Vec::with_capacity(words.len() - 1);
    for (k, (word, tokens)) in words.into_iter().zip(word_tokens).enumerate().take(boundaries.len() - 1) {
        let (b0, b1) = (boundaries[k], boundaries[k + 1]);
        let (Some(&start), Some(&end)) = (jump_times.get(b0), jump_times.get(b1)) else { break };
        let probs = &token_probs[b0.min(token_probs.len())..b1.min(token_probs.len())];
        let probability = probs.iter().map(|&p| p as f64).sum::<f64>() / probs.len().max(1) as f64;
        out.push(Timing { word, tokens, start, end, probability });
    }
    Ok(out)
}

/// A segment of a window before its words are placed: its times (moved to its first and
/// last word by [`add_word_timestamps`]) and its text tokens.
pub(crate) struct Draft {
    pub start: f64,
    pub end: f64,
    pub text_tokens: Vec<u32>,
    pub words: Vec<Word>,
    /// Each word's tokens (punctuation merged in with its text), which a live stream gives
    /// again as the start of the next window's transcript.
    pub word_tokens: Vec<Vec<u32>>,
}

/// The median of a non-empty slice, as numpy's (the mean of the middle two for an even
/// count).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

/// Rounds to 0.01 as Python's `round(x, 2)` does for the values that occur here.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Places the words of one window's `alignment` into its `segments` with the reference's
/// corrections, times offset by `time_offset` (the window's start); `last_speech` is where
/// speech last ended before the window.
pub(crate) fn add_word_timestamps(
    segments: &mut [Draft],
    mut alignment: Vec<Timing>,
    time_offset: f64,
    mut last_speech: f64,
) {
    let mut durations: Vec<f64> = alignment.iter().map(|w| w.end - w.start).filter(|&d| d != 0.0).collect();
    let median_duration = if durations.is_empty() { 0.0 } else { median(&mut durations).min(0.7) };
    let max_duration = median_duration * 2.0;
    if !durations.is_empty() {
        for i in 1..alignment.len() {
            if alignment[i].end - alignment[i].start > max_duration {
                if is_in(&alignment[i].word, SENTENCE_END_MARKS) {
                    alignment[i].end = alignment[i].start + max_duration;
                } else if is_in(&alignment[i - 1].word, SENTENCE_END_MARKS) {
                    alignment[i].start = alignment[i].end - max_duration;
                }
            }
        }
    }
    merge_punctuations(&mut alignment);

    let mut index = 0;
    for segment in segments.iter_mut() {
        let mut saved = 0;
        let mut words = Vec::new();
        let mut word_tokens = Vec::new();
        while index < alignment.len() && saved < segment.text_tokens.len() {
            let timing = &alignment[index];
            if !timing.word.is_empty() {
                words.push(Word {
                    start: round2(time_offset + timing.start),
                    end: round2(time_offset + timing.end),
                    word: timing.word.clone(),
                    probability: timing.probability,
                });
                word_tokens.push(timing.tokens.clone());
            }
            saved += timing.tokens.len();
            index += 1;
        }
        if let Some(first) = words.first() {
            // The first words after a pause are no longer than twice the median word.
            let (first_end, first_start) = (first.end, first.start);
            let long_first = first_end - first_start > max_duration
                || words.get(1).is_some_and(|second| second.end - first_start > max_duration * 2.0);
            if first_end - last_speech > median_duration * 4.0 && long_first {
                if words.len() > 1 && words[1].end - words[1].start > max_duration {
                    let boundary = (words[1].end / 2.0).max(words[1].end - max_duration);
                    words[0].end = boundary;
                    words[1].start = boundary;
                }
                words[0].start = (words[0].end - max_duration).max(0.0);
            }
            // The segment's own start when its first word would begin far earlier.
            if segment.start < words[0].end && segment.start - 0.5 > words[0].start {
                words[0].start = (words[0].end - median_duration).min(segment.start).max(0.0);
            } else {
                segment.start = words[0].start;
            }
            let last = words.len() - 1;
            if segment.end > words[last].start && segment.end + 0.5 < words[last].end {
                words[last].end = (words[last].start + median_duration).max(segment.end);
            } else {
                segment.end = words[last].end;
            }
            last_speech = segment.end;
        }
        segment.words = words;
        segment.word_tokens = word_tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_filter_reflects_at_the_ends() {
        let src = [5.0, 1.0, 9.0, 3.0, 7.0];
        let mut dst = [0.0; 5];
        // Width 3: [1,5,1] [5,1,9] [1,9,3] [9,3,7] [3,7,3].
        median_filter(&src, &mut dst, 3);
        assert_eq!(dst, [1.0, 5.0, 3.0, 7.0, 3.0]);
        // A row no longer than half the width is copied.
        let mut short = [0.0; 3];
        median_filter(&[4.0, 2.0, 8.0], &mut short, 7);
        assert_eq!(short, [4.0, 2.0, 8.0]);
    }

    #[test]
    fn dtw_follows_the_largest_weights_and_prefers_time_on_ties() {
        // The paths CTranslate2's negative_dtw gives (its loops run by hand in Python): token 0
        // loud in frames 0-1, token 1 in frames 2-3; a step down records the cell it leaves.
        let x = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        assert_eq!(negative_dtw(&x, 2, 4), [(0, 0), (0, 1), (1, 1), (1, 2), (1, 3)]);
        // All equal: strict comparisons send ties along time, then down.
        assert_eq!(negative_dtw(&[0.0; 4], 2, 2), [(0, 0), (1, 0), (1, 1)]);
        assert_eq!(negative_dtw(&[0.0; 6], 3, 2), [(0, 0), (1, 0), (2, 0), (2, 1)]);
        // NaN weights fail every comparison, so each step moves along time until the table's
        // edge, then down it, recording column -1 (the wrapped index once gave words times of
        // 3.7e17 s).
        assert_eq!(negative_dtw(&[f32::NAN; 3], 3, 1), [(0, -1), (1, -1), (2, -1), (2, 0)]);
    }

    fn timing(word: &str, tokens: &[u32], start: f64, end: f64) -> Timing {
        Timing { word: word.into(), tokens: tokens.to_vec(), start, end, probability: 0.5 }
    }

    #[test]
    fn punctuation_joins_its_neighbours() {
        let mut a = vec![
            timing(" \"", &[1], 0.0, 0.1),
            timing(" Hello", &[2], 0.1, 0.5),
            timing(",", &[3], 0.5, 0.6),
            timing(" world", &[4], 0.6, 1.0),
            timing("!\"", &[5], 1.0, 1.1),
        ];
        merge_punctuations(&mut a);
        let words: Vec<(&str, &[u32])> = a.iter().map(|t| (t.word.as_str(), t.tokens.as_slice())).collect();
        assert_eq!(
            words,
            [("", &[][..]), (" \" Hello,", &[1, 2, 3][..]), ("", &[][..]), (" world", &[4][..]), ("!\"", &[5][..])]
        );
    }

    #[test]
    fn segments_take_the_times_of_their_first_and_last_words() {
        let alignment =
            vec![timing(" One", &[1], 0.2, 0.5), timing(" two.", &[2, 3], 0.5, 0.9), timing(" Three", &[4], 1.4, 1.8)];
        let mut segments = vec![
            Draft { start: 0.0, end: 1.0, text_tokens: vec![1, 2, 3], words: vec![], word_tokens: vec![] },
            Draft { start: 1.0, end: 2.0, text_tokens: vec![4], words: vec![], word_tokens: vec![] },
        ];
        add_word_timestamps(&mut segments, alignment, 10.0, 9.5);
        let spans: Vec<(f64, f64, usize)> = segments.iter().map(|s| (s.start, s.end, s.words.len())).collect();
        assert_eq!(spans, [(10.2, 10.9, 2), (11.4, 11.8, 1)]);
        assert_eq!(segments[0].words[1], Word { start: 10.5, end: 10.9, word: " two.".into(), probability: 0.5 });
        assert_eq!(segments[0].word_tokens, [vec![1], vec![2, 3]]);
        assert_eq!(segments[1].word_tokens, [vec![4]]);
    }
}
