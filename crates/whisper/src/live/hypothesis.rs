//! One look at a live stream's buffer: the buffer (at most one 30 s window) encoded, its
//! transcript decoded from the words already committed in it (given as the transcript's
//! start, so the model goes on after them) with the text committed before it as the prompt,
//! and the new words timed from the cross-attention.

use crate::audio::Pcm;
use crate::constants::HOP_LENGTH;
use crate::constants::SAMPLE_RATE;
use crate::decode::model::Whisper;
use crate::decode::options::TranscribeOptions;
use crate::decode::transcribe::{TAIL_PADDING, WindowText, is_silence, split_segments, time_words};
use crate::decode::window::{NoiseRng, WindowDecoder};
use crate::decode::windows::WindowModel;
use crate::decode::words::{Draft, Word};
use crate::error::Result;

/// A word of a live stream with the tokens it was decoded as (the next window's forced
/// start, or the prompt once its audio has left the buffer).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LiveWord {
    pub word: Word,
    pub tokens: Vec<u32>,
}

/// What one look at the buffer asks for.
pub(crate) struct Look<'a> {
    /// The buffer's samples (16 kHz) and the time of its first one in the stream.
    pub samples: &'a [f32],
    pub offset: f64,
    /// Tokens of the text committed before the buffer (the prompt's previous text).
    pub context: &'a [u32],
    /// Tokens of the words committed inside the buffer: the transcript's forced start.
    pub committed: &'a [u32],
    /// The language to decode in; `None` detects it on this window.
    pub language: Option<&'a str>,
    pub options: &'a TranscribeOptions,
}

/// The words a look found after the committed ones, and the language it decoded in.
pub(crate) struct Hypothesis {
    pub words: Vec<LiveWord>,
    pub language: String,
    /// Whether the model said all there is to say in the buffer: its text ended as a window
    /// the reference's seek loop moves past whole (a single timestamp at the end, no
    /// timestamp pair, or silence), not at a timestamp pair it would decode again from.
    pub heard_all: bool,
}

impl Whisper {
    /// Decodes the buffer once (with the options' temperature fallback) and times its words.
    /// A window the reference would skip as silence, or whose text repeats itself past the
    /// compression-ratio threshold, has no new words.
    pub(crate) async fn look(&mut self, look: &Look<'_>, rng: &mut NoiseRng) -> Result<Hypothesis> {
        let options = look.options;
        self.prepare_selection(options).await?;
        let ids = self.tokenizer.special_ids().clone();
        let n_frames = self.config.n_frames();
        let front_end = self.mel.clone();
        let audio = Pcm(look.samples);
        let mel = front_end.spectrogram(&audio, TAIL_PADDING)?;
        let frames = (look.samples.len() / HOP_LENGTH).min(n_frames);
        if frames == 0 {
            let language = look.language.unwrap_or("en").to_string();
            return Ok(Hypothesis { words: Vec::new(), language, heard_all: true });
        }
        let window = mel.window(0, frames, n_frames)?;
        self.program.encode(&window, false).await?;
        let language = match look.language {
            Some(language) => language.to_string(),
            None => self.detect_language().await?.0,
        };
        let sot_sequence = self.host().sot_sequence(&language, options.task)?;

        // The previous text as the reference keeps it (half the context), less what the
        // longest prefill would not hold beside the forced start.
        let fixed = 1 + sot_sequence.len() + 1 + look.committed.len();
        let keep = (self.config.n_text_ctx / 2 - 1).min(self.program.max_prompt().saturating_sub(fixed));
        let mut prompt = Vec::new();
        if !look.context.is_empty() && keep > 0 {
            prompt.push(ids.start_of_prev);
            prompt.extend_from_slice(&look.context[look.context.len().saturating_sub(keep)..]);
        }
        let sot = prompt.len();
        prompt.extend_from_slice(&sot_sequence);
        if !options.timestamps {
            prompt.push(ids.no_timestamps);
        }
        // The committed words as they were decoded, timestamps included; a start that lost its
        // first timestamp to a cut gets `<|0.00|>`.
        let mut forced = Vec::new();
        if options.timestamps && look.committed.first().is_some_and(|&t| t < ids.timestamp_begin) {
            forced.push(ids.timestamp_begin);
        }
        forced.extend_from_slice(look.committed);
        prompt.extend_from_slice(&forced);

        let vocab = self.config.n_vocab as u32;
        let decoder = WindowDecoder { ids: &ids, tokenizer: &self.tokenizer, options, vocab, forced: &forced };
        let result = decoder.decode_with_fallback(&mut self.program, &prompt, sot, rng).await?;
        // A look that failed the compression-ratio test is a loop the reference would decode
        // again at a higher temperature (a stream has no fallback by default); its words are
        // dropped, and the next look, with more audio, has another try. (At a stream's end
        // without the VAD, a last look at a quarter second gave " you" 200 times.)
        let repeats = options.compression_ratio_threshold.is_some_and(|th| result.compression_ratio > f64::from(th));
        if repeats {
            return Ok(Hypothesis { words: Vec::new(), language, heard_all: false });
        }
        if is_silence(&result, options, look.offset)? {
            return Ok(Hypothesis { words: Vec::new(), language, heard_all: true });
        }
        let duration = frames as f64 * HOP_LENGTH as f64 / SAMPLE_RATE as f64;
        let precision = ids.timestamp_step as f64;
        let (pieces, next) =
            split_segments(&result.tokens, ids.timestamp_begin, 0, frames, duration, look.offset, precision);
        let mut drafts: Vec<Draft> = pieces
            .into_iter()
            .map(|(start, end, tokens)| Draft {
                start,
                end,
                text_tokens: tokens.into_iter().filter(|&t| t < ids.end_of_text).collect(),
                words: Vec::new(),
                word_tokens: Vec::new(),
            })
            .collect();
        let text = WindowText { sot_sequence: &sot_sequence, language: &language, frames };
        time_words(self, (&window, false), &mut drafts, &text, look.offset, look.offset).await?;
        let words: Vec<(Word, Vec<u32>)> =
            drafts.into_iter().flat_map(|d| d.words.into_iter().zip(d.word_tokens)).collect();
        let skip = forced.iter().filter(|&&t| t < ids.end_of_text).count();
        let words = spans(&result.tokens, ids.end_of_text, words, skip);
        Ok(Hypothesis { words, language, heard_all: next >= frames })
    }
}

/// Each word with its span of the decoded sequence `tokens` (from the end of the word before,
/// so the timestamps between them go with it), dropping the words of the first `skip` text
/// tokens: the committed ones the window was forced to start with (a committed word that took
/// the following punctuation into it is dropped whole).
fn spans(tokens: &[u32], end_of_text: u32, words: Vec<(Word, Vec<u32>)>, skip: usize) -> Vec<LiveWord> {
    let mut out = Vec::new();
    let (mut at, mut seen) = (0, 0);
    for (word, text) in words {
        let from = at;
        let mut left = text.len();
        while left > 0 && at < tokens.len() {
            left -= usize::from(tokens[at] < end_of_text);
            at += 1;
        }
        if seen >= skip {
            out.push(LiveWord { word, tokens: tokens[from..at].to_vec() });
        }
        seen += text.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(text: &str, tokens: &[u32]) -> (Word, Vec<u32>) {
        (Word { start: 0.0, end: 0.0, word: text.into(), probability: 1.0 }, tokens.to_vec())
    }

    #[test]
    fn words_take_their_span_of_the_sequence_and_the_forced_ones_are_dropped() {
        // 100 is end of text; 101.. timestamps: <|0.00|> The garden gate. <|1.00|><|1.20|> Then
        let sequence = [101, 1, 2, 3, 4, 5, 151, 161, 6];
        let words = vec![word(" The", &[1]), word(" garden", &[2, 3]), word(" gate.", &[4, 5]), word(" Then", &[6])];
        let spans = |skip| {
            spans(&sequence, 100, words.clone(), skip).into_iter().map(|w| (w.word.word, w.tokens)).collect::<Vec<_>>()
        };
        let all = spans(0);
        assert_eq!(all[0], (" The".to_string(), vec![101, 1]));
        assert_eq!(all[2], (" gate.".to_string(), vec![4, 5]));
        assert_eq!(all[3], (" Then".to_string(), vec![151, 161, 6]));
        let texts = |skip| spans(skip).into_iter().map(|w| w.0).collect::<Vec<_>>();
        assert_eq!(texts(3), [" gate.", " Then"]);
        // The forced text ended inside " gate." (its period came after): that word was committed.
        assert_eq!(texts(4), [" Then"]);
        assert_eq!(texts(6), Vec::<String>::new());
    }
}
