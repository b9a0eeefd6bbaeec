//! Beam search on the device: the prefill of a window's beams and each step, which ranks
//! every beam's continuations and returns the best `2 · beams` ([`Candidate`]s) to the host's
//! bookkeeping (`crate::decode::beam`).

use super::*;

impl Program {
    /// The most beams [`Program::beam_prefill`] and [`Program::beam_step`] take (0 without
    /// beam graphs).
    pub fn max_beams(&self) -> usize {
        self.beams.as_ref().map_or(0, |b| b.count)
    }

    pub(super) fn beam_count(&self, beams: usize) -> Result<usize> {
        let max = self.max_beams();
        if beams < 2 || beams > max {
            return Err(Error::bad_argument(format!("{beams} beams, where this program runs 2 to {max}")));
        }
        Ok(max)
    }

    /// Runs `prompt` from position 0 as [`Program::prefill`] does, then starts `beams` beams
    /// from it: returns the no-speech probability and the best `2 · beams` first tokens (all
    /// of beam 0), best first.
    pub async fn beam_prefill(
        &mut self,
        prompt: &[u32],
        sot: usize,
        rules: &Rules,
        beams: usize,
    ) -> Result<(f32, Vec<Candidate>)> {
        self.beam_count(beams)?;
        let out = self
            .run_prefill(prompt, sot, rules, Sampling::Greedy, &[CANDIDATES, CANDIDATE_SCORES, NO_SPEECH_PROB])
            .await?;
        let candidates = self.read_candidates(&out, 2 * beams)?;
        let no_speech = scalar_f32(&out, NO_SPEECH_PROB)?;
        let expand = &mut self.beams.as_mut().ok_or_else(|| Error::backend("no beam graphs"))?.expand;
        expand.run(&HashMap::new(), &HashMap::new(), &[]).await?;
        Ok((no_speech, candidates))
    }

    /// Runs the beam step at `position` for `beams` (at most [`Program::max_beams`]; the
    /// graph's other beams run dead, scored -inf): each beam first takes over its parent's
    /// cache, then adds its last token. Returns the best `2 · beams.len()` continuations over
    /// all beams, best first.
    pub async fn beam_step(
        &mut self,
        beams: &[BeamInput],
        position: usize,
        timestamps: bool,
    ) -> Result<Vec<Candidate>> {
        let count = self.beam_count(beams.len())?;
        if position >= self.n_text_ctx {
            return Err(Error::bad_argument(format!(
                "decoder position {position} is past the context of {}",
                self.n_text_ctx
            )));
        }
        let heads = self.decoder_heads;
        let (mut tokens, mut previous, mut latest, mut scores) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut parent_rows = Vec::with_capacity(count * heads);
        for k in 0..count {
            let (h, parent, score) = match beams.get(k) {
                Some(b) => (b.history, b.parent, b.score),
                None => (beams[0].history, 0, f32::NEG_INFINITY),
            };
            let ids = [h.last, h.previous, h.latest];
            if let Some(bad) = ids.into_iter().find(|&t| t as usize >= self.vocab) {
                return Err(Error::bad_argument(format!("token {bad} is outside the vocabulary of {}", self.vocab)));
            }
            if parent >= beams.len() {
                return Err(Error::bad_argument(format!("beam {k} continues beam {parent} of {}", beams.len())));
            }
            tokens.push(h.last);
            previous.push(h.previous);
            latest.push(h.latest as f32);
            scores.push(score);
            parent_rows.extend((0..heads).map(|r| (parent * heads + r) as u32));
        }
        let mut inputs = HashMap::from([
            (TOKENS.to_string(), Tensor::u32([count], tokens)?),
            (PREVIOUS.to_string(), Tensor::u32([count], previous)?),
            (LATEST.to_string(), Tensor::f32([count], latest)?),
            (SCORES.to_string(), Tensor::f32([count, 1], scores)?),
            (PARENT_ROWS.to_string(), Tensor::u32([count * heads], parent_rows)?),
        ]);
        for name in [TOKEN_PENALTIES, REPETITION_PENALTY] {
            if let Some(t) = self.inputs.get(name) {
                inputs.insert(name.to_string(), t.clone());
            }
        }
        let scalars =
            HashMap::from([(OFFSET.to_string(), position as u32), (TIMESTAMPS.to_string(), timestamps as u32)]);
        let step = &mut self.beams.as_mut().ok_or_else(|| Error::backend("no beam graphs"))?.step;
        let out = step.run(&inputs, &scalars, &[CANDIDATES, CANDIDATE_SCORES]).await?;
        self.read_candidates(&out, 2 * beams.len())
    }

    /// The first `n` candidates of a beam run's outputs.
    pub(super) fn read_candidates(&self, out: &HashMap<String, Tensor>, n: usize) -> Result<Vec<Candidate>> {
        let missing = || Error::backend("the decoder returned no beam candidates");
        let ids = out.get(CANDIDATES).and_then(|t| t.as_u32()).ok_or_else(missing)?;
        let scores = out.get(CANDIDATE_SCORES).map(|t| t.to_f32()).ok_or_else(missing)?;
        if ids.len() < n || scores.len() < n {
            return Err(missing());
        }
        Ok(ids[..n]
            .iter()
            .zip(&scores[..n])
            .map(|(&id, &score)| Candidate {
                beam: id as usize / self.vocab,
                token: (id as usize % self.vocab) as u32,
                score,
            })
            .collect())
    }
}
