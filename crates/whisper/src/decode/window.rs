//! Decoding one window: the token loop with Whisper's logit rules, and the temperature
//! fallback around it.
//!
//! The rules follow the reference decoder (CTranslate2's Whisper `generate`, as
//! faster-whisper calls it): the model's suppress list at every step; blank and end of text
//! banned at the first step (`suppress_blank`); with timestamps, `<|notimestamps|>` always
//! banned, the first token a timestamp no later than `max_initial_timestamp`, timestamps in
//! pairs and never decreasing, and text banned when all timestamps together are more likely
//! than the best text token. The host sets the first step's as id ranges ([`Rules`]); the
//! step graph derives the later ones from the tokens so far on the device (see
//! [`crate::graphs::select`]), so greedy steps run in chains ([`Program::steps`]).

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;

use crate::decode::beam::BeamSearch;
use crate::decode::options::TranscribeOptions;
use crate::error::{Error, Result};
use crate::graphs::select::Rules;
use crate::program::{BeamInput, Choice, Program, Sampling};
use crate::text::tokenizer::{SpecialIds, SpecialTokens, Tokenizer};

/// One decoded window.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// The generated tokens, end of text excluded.
    pub tokens: Vec<u32>,
    /// Sum of the chosen tokens' log-probabilities, the end-of-text step included, divided
    /// by the token count plus one (the reference's `avg_logprob`).
    pub avg_logprob: f64,
    /// Sum of log-probabilities over the token count: what ranks samples.
    pub score: f64,
    pub no_speech_prob: f32,
    pub temperature: f32,
    pub compression_ratio: f64,
}

/// The per-window decoding settings.
pub(crate) struct WindowDecoder<'a> {
    pub ids: &'a SpecialIds,
    pub tokenizer: &'a Tokenizer,
    pub options: &'a TranscribeOptions,
    pub vocab: u32,
    /// The prompt's last tokens, which the transcript starts with (`<|0.00|>` and a prefix's
    /// text): decoding goes on after them as after tokens it chose itself, but the rules
    /// look at what it chooses only (the reference's `sample_begin`), their log-probabilities
    /// count as 0, and they count in the length.
    pub forced: &'a [u32],
}

impl WindowDecoder<'_> {
    /// The first chosen step's bans: after forced tokens only the blank ones (the
    /// reference applies its first-step timestamp rules at the window's very first step
    /// alone).
    pub fn first_rules(&self) -> Rules {
        match self.forced.is_empty() {
            true => first_rules(self.ids, self.options, self.vocab),
            false => Rules { banned: vec![], blank: self.options.suppress_blank },
        }
    }

    /// Whether the options penalise repetition (the graphs then take each sequence's token
    /// penalties, so steps run one at a time).
    fn penalized(&self) -> bool {
        self.options.repetition_penalty != 1.0 || self.options.no_repeat_ngram_size > 0
    }

    /// Sets the token penalties of `sequences` (the tokens of each so far, forced ones
    /// included) for the next run, when the options ask for them.
    fn set_penalties(&self, program: &mut Program, sequences: &[&[u32]]) -> Result<()> {
        if !self.penalized() {
            return Ok(());
        }
        let vocab = self.vocab as usize;
        let mut codes = vec![0.0f32; sequences.len() * vocab];
        for (row, seq) in codes.chunks_exact_mut(vocab).zip(sequences) {
            penalty_codes(seq, self.options.repetition_penalty != 1.0, self.options.no_repeat_ngram_size, row);
        }
        program.set_token_penalties(self.options.repetition_penalty, codes)
    }

    /// The most tokens to choose after `prompt`: the reference decodes at most half the
    /// context, never past its end, forced tokens included.
    pub(crate) fn max_steps(&self, program: &Program, prompt: &[u32]) -> usize {
        let ctx = program.n_text_ctx();
        let forced = self.forced.len();
        (ctx / 2).min((ctx + 1).saturating_sub(prompt.len() - forced)).saturating_sub(forced)
    }

    /// Decodes one window at `temperature` from `prompt` (whose `<|startoftranscript|>` is at
    /// `sot`): beam search at 0 (greedy with one beam), else the best of `best_of` samples.
    pub async fn decode_at(
        &self,
        program: &mut Program,
        prompt: &[u32],
        sot: usize,
        temperature: f32,
        rng: &mut NoiseRng,
    ) -> Result<Decoded> {
        if temperature == 0.0 {
            if self.options.beam_size > 1 {
                return self.decode_beams(program, prompt, sot).await;
            }
            return self.decode_once(program, prompt, sot, None, rng).await;
        }
        let mut best: Option<Decoded> = None;
        for _ in 0..self.options.best_of {
            let d = self.decode_once(program, prompt, sot, Some(temperature), rng).await?;
            if best.as_ref().is_none_or(|b| d.score > b.score) {
                best = Some(d);
            }
        }
        best.ok_or_else(|| Error::bad_option("best_of must be at least 1"))
    }

    /// One pass of the token loop: greedy steps in chains, sampled ones one at a time (each
    /// draws its noise).
    async fn decode_once(
        &self,
        program: &mut Program,
        prompt: &[u32],
        sot: usize,
        temperature: Option<f32>,
        rng: &mut NoiseRng,
    ) -> Result<Decoded> {
        let max_steps = self.max_steps(program, prompt);
        let mut noise = vec![0.0f32; if temperature.is_some() { self.vocab as usize } else { 0 }];
        let mut seq = Vec::new();
        gumbel(&mut noise, rng);
        self.set_penalties(program, &[self.forced])?;
        let first = program.prefill(prompt, sot, &self.first_rules(), mode(temperature, &noise)).await?;
        let no_speech_prob = first.no_speech_prob.unwrap_or(0.0);
        let mut pending: VecDeque<Choice> = VecDeque::from([first]);
        let mut sum = 0.0f64;
        for step in 0..max_steps {
            let choice = match pending.pop_front() {
                Some(choice) => choice,
                None => {
                    // The step of seq's last token, at its position.
                    let history = program.history(&seq, self.options.timestamps)?;
                    let position = prompt.len() + step - 1;
                    if temperature.is_some() || self.penalized() {
                        // One step at a time: a draw needs its noise, a penalty the tokens so far.
                        gumbel(&mut noise, rng);
                        self.set_penalties(program, &[&[self.forced, &seq].concat()])?;
                        program.step(&history, position, mode(temperature, &noise)).await?
                    } else {
                        pending.extend(program.steps(&history, position, max_steps - step).await?);
                        pending.pop_front().ok_or_else(|| Error::backend("a chain of decoder steps chose nothing"))?
                    }
                }
            };
            sum += choice.logprob as f64;
            if choice.token == self.ids.end_of_text {
                break;
            }
            seq.push(choice.token);
        }
        let tokens = [self.forced, &seq].concat();
        let n = tokens.len() as f64;
        Ok(Decoded {
            avg_logprob: sum / (n + 1.0),
            score: if tokens.is_empty() { sum } else { sum / n },
            compression_ratio: self.compression_ratio(&tokens)?,
            tokens,
            no_speech_prob,
            temperature: temperature.unwrap_or(0.0),
        })
    }

    /// Beam search over one window, as the reference's (see [`crate::decode::beam`]): one prefill
    /// starts the beams, then one beam step per token, each reading back only the ranked
    /// candidates.
    async fn decode_beams(&self, program: &mut Program, prompt: &[u32], sot: usize) -> Result<Decoded> {
        let o = self.options;
        let max_steps = self.max_steps(program, prompt);
        let beams = o.beam_size;
        let mut search = BeamSearch::new(beams, o.finished_hypotheses(), o.length_penalty, self.ids.end_of_text);
        self.set_penalties(program, &[self.forced])?;
        let (no_speech_prob, mut candidates) = program.beam_prefill(prompt, sot, &self.first_rules(), beams).await?;
        // Hypotheses start with the forced tokens (their length counts); the rules see the
        // chosen ones.
        let mut alive: Vec<Vec<u32>> = vec![self.forced.to_vec()];
        for step in 0..max_steps {
            let Some(next) = search.advance(&candidates, &alive, step + 1 == max_steps)? else { break };
            let mut inputs = Vec::with_capacity(beams);
            let mut grown = Vec::with_capacity(beams);
            for c in next {
                let mut seq = alive
                    .get(c.beam)
                    .ok_or_else(|| Error::backend(format!("a candidate extends beam {} of {}", c.beam, alive.len())))?
                    .clone();
                seq.push(c.token);
                inputs.push(BeamInput {
                    history: program.history(&seq[self.forced.len()..], o.timestamps)?,
                    parent: c.beam,
                    score: c.score,
                });
                grown.push(seq);
            }
            alive = grown;
            let mut rows: Vec<&[u32]> = alive.iter().map(Vec::as_slice).collect();
            rows.resize(program.max_beams().max(rows.len()), &[]);
            self.set_penalties(program, &rows)?;
            candidates = program.beam_step(&inputs, prompt.len() + step, o.timestamps).await?;
        }
        self.beam_result(search, no_speech_prob)
    }

    /// The best hypothesis of a finished beam search as a decoded window.
    pub(crate) fn beam_result(&self, search: BeamSearch, no_speech_prob: f32) -> Result<Decoded> {
        let o = self.options;
        let (best, score) = search.best().ok_or_else(|| Error::backend("beam search finished no hypothesis"))?;
        // As the reference recovers it: the normalised score times length ^ penalty.
        let n = best.tokens.len() as f64;
        let cumulative = score as f64 * n.powf(o.length_penalty as f64);
        Ok(Decoded {
            avg_logprob: cumulative / (n + 1.0),
            score: score as f64,
            compression_ratio: self.compression_ratio(&best.tokens)?,
            tokens: best.tokens,
            no_speech_prob,
            temperature: 0.0,
        })
    }

    /// Decodes a window with temperature fallback: each temperature in turn until the
    /// result is neither too repetitive nor too unlikely (or is silence).
    pub async fn decode_with_fallback(
        &self,
        program: &mut Program,
        prompt: &[u32],
        sot: usize,
        rng: &mut NoiseRng,
    ) -> Result<Decoded> {
        self.fallback_from(None, program, prompt, sot, rng).await
    }

    /// [`WindowDecoder::decode_with_fallback`] given the result at the first temperature
    /// (`first`, where it was decoded already: a group's in a batch), the window encoded.
    pub async fn fallback_from(
        &self,
        mut first: Option<Decoded>,
        program: &mut Program,
        prompt: &[u32],
        sot: usize,
        rng: &mut NoiseRng,
    ) -> Result<Decoded> {
        let o = self.options;
        let mut all = Vec::new();
        let mut below_cr = Vec::new();
        for &t in &o.temperatures {
            let d = match first.take() {
                Some(d) => d,
                None => self.decode_at(program, prompt, sot, t, rng).await?,
            };
            let (repetitive, accepted) = self.judge(&d);
            if !repetitive {
                below_cr.push(d.clone());
            }
            if accepted {
                return Ok(d);
            }
            all.push(d);
        }
        // Every temperature failed: the most likely result, reported at the last temperature.
        let pool = if below_cr.is_empty() { all } else { below_cr };
        let best = pool.into_iter().reduce(|b, d| if d.avg_logprob > b.avg_logprob { d } else { b });
        match (best, o.temperatures.last()) {
            (Some(best), Some(&last)) => Ok(Decoded { temperature: last, ..best }),
            _ => Err(Error::bad_option("temperatures: at least one temperature is needed")),
        }
    }

    /// How `decoded` fares against the fallback's thresholds: whether it is too repetitive,
    /// and whether it stands (neither too repetitive nor too unlikely, or silence).
    fn judge(&self, decoded: &Decoded) -> (bool, bool) {
        let o = self.options;
        let repetitive = o.compression_ratio_threshold.is_some_and(|th| decoded.compression_ratio > th as f64);
        let unlikely = o.log_prob_threshold.is_some_and(|th| decoded.avg_logprob < th as f64);
        let silence = o.no_speech_threshold.is_some_and(|th| decoded.no_speech_prob > th) && unlikely;
        (repetitive, !(repetitive || unlikely) || silence)
    }

    /// Whether the options' fallback decodes a window again after `decoded` (at the first
    /// temperature).
    pub(crate) fn falls_back(&self, decoded: &Decoded) -> bool {
        !self.judge(decoded).1 && self.options.temperatures.len() > 1
    }

    /// The text's UTF-8 length over its zlib-compressed length (level 6, as the reference's
    /// default `zlib.compress`); high for repetitive text. Another deflate implementation can
    /// differ from zlib's by a few bytes, which matters only at the threshold itself.
    fn compression_ratio(&self, tokens: &[u32]) -> Result<f64> {
        let text_ids: Vec<u32> = tokens.iter().copied().filter(|&t| t < self.ids.end_of_text).collect();
        let text = self.tokenizer.decode(&text_ids, SpecialTokens::Skip)?;
        let bytes = text.trim().as_bytes();
        let compressed = miniz_oxide::deflate::compress_to_vec_zlib(bytes, 6);
        Ok(bytes.len() as f64 / compressed.len() as f64)
    }
}

/// The first step's bans: with timestamps, only timestamps up to `max_initial_timestamp`;
/// the blank ids when `suppress_blank` is on.
pub(crate) fn first_rules(ids: &SpecialIds, options: &TranscribeOptions, vocab: u32) -> Rules {
    let blank = options.suppress_blank;
    if !options.timestamps {
        return Rules { banned: vec![], blank };
    }
    let tb = ids.timestamp_begin;
    let max_index = (options.max_initial_timestamp / ids.timestamp_step).round() as u32;
    let after = tb.saturating_add(max_index).saturating_add(1).min(vocab);
    Rules { banned: vec![(0, tb), (after, vocab)], blank }
}

/// One sequence's row of token penalties ([`crate::graphs::select::TOKEN_PENALTIES`]), as
/// CTranslate2 finds them in the tokens chosen so far: with `repetition`, 1 at every token
/// in `seq`; with `ngram` n > 0, 2 at every token that follows an earlier occurrence of the
/// sequence's last n - 1 tokens (choosing it would repeat an n-gram).
fn penalty_codes(seq: &[u32], repetition: bool, ngram: usize, row: &mut [f32]) {
    if repetition {
        for &t in seq {
            if let Some(slot) = row.get_mut(t as usize) {
                *slot = 1.0;
            }
        }
    }
    if ngram == 0 || seq.len() < ngram {
        return;
    }
    let tail = &seq[seq.len() + 1 - ngram..];
    for start in 0..=seq.len() - ngram {
        if seq[start..start + ngram - 1] == *tail
            && let Some(slot) = row.get_mut(seq[start + ngram - 1] as usize)
        {
            *slot = 2.0;
        }
    }
}

/// Greedy without a temperature, else a draw at it with `noise`.
fn mode(temperature: Option<f32>, noise: &[f32]) -> Sampling<'_> {
    match temperature {
        None => Sampling::Greedy,
        Some(temperature) => Sampling::Temperature { temperature, noise },
    }
}

/// Fills `noise` with standard Gumbel draws `-ln(-ln(u))`, `u` uniform in (0, 1).
fn gumbel(noise: &mut [f32], rng: &mut NoiseRng) {
    for n in noise {
        let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        *n = -(-u.ln()).ln() as f32;
    }
}

/// The sampling noise generator of a transcription: ChaCha12, the generator `StdRng` is
/// (the same stream from the same seed), named so that its position can be read and set
/// ([`crate::Checkpoint`] carries it to another process).
pub type NoiseRng = ChaCha12Rng;

/// The noise generator a transcription with `seed` starts from.
pub(crate) fn noise_rng(seed: u64) -> NoiseRng {
    NoiseRng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tiny.en's ids: end of text 50256, `<|notimestamps|>` 50362, `<|0.00|>` 50363, 51864 ids.
    fn ids() -> SpecialIds {
        SpecialIds {
            end_of_text: 50256,
            start_of_transcript: 50257,
            translate: 50357,
            transcribe: 50358,
            start_of_lm: Some(50359),
            start_of_prev: 50360,
            no_speech: 50361,
            no_timestamps: 50362,
            timestamp_begin: 50363,
            timestamp_count: 1501,
            timestamp_step: 0.02,
        }
    }

    #[test]
    fn the_first_step_allows_early_timestamps_only() {
        let o = TranscribeOptions::default();
        // Only <|0.00|>..<|1.00|> (50363..=50413); blank banned.
        let r = first_rules(&ids(), &o, 51864);
        assert_eq!(r, Rules { banned: vec![(0, 50363), (50414, 51864)], blank: true });
        let o = TranscribeOptions { max_initial_timestamp: 0.0, ..TranscribeOptions::default() };
        assert_eq!(first_rules(&ids(), &o, 51864).banned, [(0, 50363), (50364, 51864)]);
        let o = TranscribeOptions { max_initial_timestamp: 100.0, ..TranscribeOptions::default() };
        assert_eq!(first_rules(&ids(), &o, 51864).banned, [(0, 50363), (51864, 51864)]);
    }

    fn codes(seq: &[u32], repetition: bool, ngram: usize) -> Vec<f32> {
        let mut row = vec![0.0; 10];
        penalty_codes(seq, repetition, ngram, &mut row);
        row
    }

    #[test]
    fn repeated_tokens_and_ngrams_are_marked_as_ctranslate2_finds_them() {
        // Every token so far is penalised.
        assert_eq!(codes(&[3, 5, 3], true, 0), [0., 0., 0., 1., 0., 1., 0., 0., 0., 0.]);
        // Bigrams: the last token 3 came before 5 and before 7, so 5 and 7 are banned.
        assert_eq!(codes(&[3, 5, 3, 7, 3], false, 2), [0., 0., 0., 0., 0., 2., 0., 2., 0., 0.]);
        // Trigrams: (3, 5) came before 3 only.
        assert_eq!(codes(&[3, 5, 3, 5], false, 3), [0., 0., 0., 2., 0., 0., 0., 0., 0., 0.]);
        // Too short for a trigram; unigrams ban everything chosen.
        assert_eq!(codes(&[3, 5], false, 3), [0.0; 10]);
        assert_eq!(codes(&[4, 8], false, 1), [0., 0., 0., 0., 2., 0., 0., 0., 2., 0.]);
        // Both: a ban outranks the penalty.
        assert_eq!(codes(&[1, 2, 1], true, 2), [0., 1., 2., 0., 0., 0., 0., 0., 0., 0.]);
    }

    #[test]
    fn without_timestamps_only_blank_rules_apply() {
        let o = TranscribeOptions { timestamps: false, ..TranscribeOptions::default() };
        assert_eq!(first_rules(&ids(), &o, 51864), Rules { banned: vec![], blank: true });
        let o = TranscribeOptions { timestamps: false, suppress_blank: false, ..TranscribeOptions::default() };
        assert_eq!(first_rules(&ids(), &o, 51864), Rules::default());
    }
}
