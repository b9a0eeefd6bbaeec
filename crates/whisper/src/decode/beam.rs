//! Beam search's bookkeeping on the host, as CTranslate2's `BeamSearch` keeps it (the
//! reference decoder of faster-whisper's default `beam_size=5`).
//!
//! The device ranks every beam's continuations and returns the best `2 · beams`
//! ([`Program::beam_step`](crate::program::Program::beam_step)); here, in rank order, the first
//! `beams` candidates continue, except that a candidate ending the text (or any, at the last
//! step) becomes a finished hypothesis and its place goes to the next candidate among the
//! second half that does not end the text. The search ends when `round(beams · patience)`
//! hypotheses have finished (with no length penalty, as soon as the best beam finishes),
//! and the best hypothesis by `score / length ^ length_penalty` wins.

use crate::error::{Error, Result};
use crate::program::Candidate;

/// A finished sequence and its cumulative log-probability (its last token's included, end of
/// text too).
#[derive(Clone, Debug, PartialEq)]
pub struct Hypothesis {
    pub tokens: Vec<u32>,
    pub score: f32,
}

/// One window's beam search state.
pub(crate) struct BeamSearch {
    beams: usize,
    end_of_text: u32,
    /// Hypotheses to wait for: `round(beams · patience)`.
    wanted: usize,
    length_penalty: f32,
    finished: Vec<Hypothesis>,
    /// Whether a best-ranked candidate has finished (which ends the search early when there
    /// is no length penalty).
    top_finished: bool,
}

impl BeamSearch {
    pub fn new(beams: usize, wanted: usize, length_penalty: f32, end_of_text: u32) -> BeamSearch {
        BeamSearch { beams, end_of_text, wanted, length_penalty, finished: Vec::new(), top_finished: false }
    }

    /// Takes one step's ranked `candidates` (`2 · beams`, best first) for the beams whose
    /// tokens so far are `alive`: registers the finished ones and returns the candidates that
    /// continue, one per beam, or `None` when the search is over (`last` is the last step
    /// the window allows).
    pub fn advance(
        &mut self,
        candidates: &[Candidate],
        alive: &[Vec<u32>],
        last: bool,
    ) -> Result<Option<Vec<Candidate>>> {
        if candidates.len() != 2 * self.beams {
            return Err(Error::backend(format!("{} beam candidates for {} beams", candidates.len(), self.beams)));
        }
        let mut next = Vec::with_capacity(self.beams);
        let mut secondary = self.beams;
        for (k, c) in candidates[..self.beams].iter().enumerate() {
            let ends = c.token == self.end_of_text;
            let mut chosen = k;
            if ends || last {
                self.top_finished |= k == 0;
                let mut tokens = alive
                    .get(c.beam)
                    .ok_or_else(|| Error::backend(format!("a candidate extends beam {} of {}", c.beam, alive.len())))?
                    .clone();
                if !ends {
                    tokens.push(c.token);
                }
                self.finished.push(Hypothesis { tokens, score: c.score });
                // The next candidate of the second half that goes on in its place (where none
                // does, this one stays, as the reference keeps it).
                if let Some(j) = (secondary..candidates.len()).find(|&j| candidates[j].token != self.end_of_text) {
                    chosen = j;
                    secondary = j + 1;
                }
            }
            next.push(candidates[chosen]);
        }
        let over = last
            || if self.length_penalty == 0.0 {
                self.top_finished && !self.finished.is_empty()
            } else {
                self.finished.len() >= self.wanted
            };
        Ok((!over).then_some(next))
    }

    /// The best finished hypothesis and its score normalised by length (`None` before any).
    pub fn best(self) -> Option<(Hypothesis, f32)> {
        let penalty = self.length_penalty;
        let normalised = |h: &Hypothesis| h.score / (h.tokens.len() as f32).powf(penalty);
        let mut ranked: Vec<(f32, Hypothesis)> = self.finished.into_iter().map(|h| (normalised(&h), h)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranked.into_iter().next().map(|(score, h)| (h, score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EOT: u32 = 9;

    fn c(beam: usize, token: u32, score: f32) -> Candidate {
        Candidate { beam, token, score }
    }

    #[test]
    fn ended_candidates_finish_and_the_second_half_fills_their_places() {
        let mut search = BeamSearch::new(2, 2, 1.0, EOT);
        let alive = vec![vec![1], vec![2]];
        // Rank 0 ends the text: beam 0's [1] finishes with -0.5; rank 2 ends too, so rank 3
        // takes its place.
        let next = search.advance(&[c(0, EOT, -0.5), c(1, 4, -0.7), c(0, EOT, -0.9), c(1, 5, -1.0)], &alive, false);
        assert_eq!(next.unwrap(), Some(vec![c(1, 5, -1.0), c(1, 4, -0.7)]));
        assert_eq!(search.finished, [Hypothesis { tokens: vec![1], score: -0.5 }]);
        // The second hypothesis ends the search; where no later candidate goes on, the ended
        // one keeps its place (it would run on, as in the reference).
        let alive = vec![vec![2, 5], vec![2, 4]];
        let next = search.advance(&[c(0, 3, -1.1), c(1, EOT, -1.2), c(0, EOT, -1.3), c(1, EOT, -1.4)], &alive, false);
        assert_eq!(next.unwrap(), None);
        // Per token, [1] at -0.5 beats [2, 4] ending at -1.2 (-0.6).
        assert_eq!(search.finished.len(), 2);
        let (best, score) = search.best().unwrap();
        assert_eq!((best.tokens, score), (vec![1], -0.5));
    }

    #[test]
    fn the_last_step_finishes_every_beam_with_its_token() {
        let mut search = BeamSearch::new(2, 2, 1.0, EOT);
        let next =
            search.advance(&[c(1, 4, -2.0), c(0, 6, -3.0), c(0, 7, -4.0), c(1, 8, -5.0)], &[vec![1], vec![2]], true);
        assert_eq!(next.unwrap(), None);
        assert_eq!(
            search.finished,
            [Hypothesis { tokens: vec![2, 4], score: -2.0 }, Hypothesis { tokens: vec![1, 6], score: -3.0 }]
        );
    }

    #[test]
    fn without_a_length_penalty_the_best_beam_finishing_ends_the_search_and_sums_rank() {
        let mut search = BeamSearch::new(2, 2, 0.0, EOT);
        let alive = vec![vec![1, 2, 3], vec![4]];
        // The second-ranked beam finishing does not end it...
        let next = search.advance(&[c(0, 5, -1.0), c(1, EOT, -1.5), c(0, 6, -2.0), c(1, 7, -2.5)], &alive, false);
        assert_eq!(next.unwrap(), Some(vec![c(0, 5, -1.0), c(0, 6, -2.0)]));
        let alive = vec![vec![1, 2, 3, 5], vec![1, 2, 3, 6]];
        let next = search.advance(&[c(0, EOT, -1.6), c(1, 8, -2.1), c(0, 3, -2.2), c(1, 5, -2.3)], &alive, false);
        assert_eq!(next.unwrap(), None);
        // ...the best one does; unnormalised, [4] at -1.5 beats the longer [1, 2, 3, 5] at -1.6.
        assert_eq!(search.best().unwrap(), (Hypothesis { tokens: vec![4], score: -1.5 }, -1.5));
    }

    #[test]
    fn a_wrong_candidate_count_or_beam_is_an_error() {
        let mut search = BeamSearch::new(2, 2, 1.0, EOT);
        let err = search.advance(&[c(0, 1, -1.0)], &[vec![]], false).unwrap_err().to_string();
        assert!(err.contains("1 beam candidates for 2 beams"), "{err}");
        let err = search.advance(&[c(3, EOT, -1.0), c(0, 1, -1.0), c(0, 2, -1.0), c(0, 3, -1.0)], &[vec![]], false);
        assert!(err.unwrap_err().to_string().contains("a candidate extends beam 3 of 1"));
        assert_eq!(BeamSearch::new(2, 2, 1.0, EOT).best(), None);
    }
}
