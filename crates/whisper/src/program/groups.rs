//! Groups: the beam searches of several windows (of several transcriptions) advanced by one
//! step graph, each group in its own rows of ring KV caches; windows encoded together, joined
//! to a free group after their prefill, and their candidates read back per group.

use super::*;

impl Program {
    /// Groups the group step runs ([`ProgramSpec::groups`]; 0 without group graphs).
    pub fn max_groups(&self) -> usize {
        self.groups.as_ref().map_or(0, |g| g.count)
    }

    /// Encodes several windows' log-mels at once, each into the cross-attention rows of the
    /// group given with it (for [`Program::take_group`] and the group steps): in as few runs
    /// of the group encoders as their sizes allow, a run short of windows repeating its
    /// first (a window alone is better encoded by [`Program::encode`], which its prefill
    /// reads at once).
    pub async fn encode_groups(&mut self, windows: &[(&Tensor, usize)]) -> Result<()> {
        let count = self.max_groups();
        let heads = self.decoder_heads;
        let groups = self.groups.as_mut().ok_or_else(|| Error::bad_argument("this program has no group graphs"))?;
        if let Some((_, g)) = windows.iter().find(|(_, g)| *g >= count) {
            return Err(Error::bad_argument(format!("group {g} of {count}")));
        }
        let largest = groups.encoders.last().map_or(1, |(w, _)| *w);
        for chunk in windows.chunks(largest) {
            let (size, encoder) = groups
                .encoders
                .iter_mut()
                .find(|(w, _)| *w >= chunk.len())
                .ok_or_else(|| Error::backend("no group encoder"))?;
            let dims = chunk[0].0.shape().dims().to_vec();
            let mut values = Vec::with_capacity(*size * chunk[0].0.numel());
            let mut scalars = HashMap::new();
            for w in 0..*size {
                let (mel, g) = chunk.get(w).unwrap_or(&chunk[0]);
                if mel.shape().dims() != dims {
                    return Err(Error::bad_argument(format!(
                        "log-mels {:?} and {dims:?} in one batch",
                        mel.shape().dims()
                    )));
                }
                values.extend_from_slice(mel.as_f32().ok_or_else(|| Error::bad_argument("a log-mel of f32"))?);
                scalars.insert(window_cross_row(w), (g * heads) as u32);
            }
            let mel = Tensor::f32([*size, dims[0], dims[1]], values)?;
            encoder.run(&HashMap::from([(MEL.to_string(), mel)]), &scalars, &[]).await?;
        }
        Ok(())
    }

    /// Copies group `group`'s window, encoded by [`Program::encode_groups`], into the
    /// one-window cross-attention buffers, for its prefill.
    pub async fn take_group(&mut self, group: usize) -> Result<()> {
        let (count, heads, audio) = (self.max_groups(), self.decoder_heads, self.audio_positions);
        if group >= count {
            return Err(Error::bad_argument(format!("group {group} of {count}")));
        }
        let first = (group * heads * audio) as u32;
        let rows = Tensor::u32([heads * audio], (first..first + (heads * audio) as u32).collect())?;
        let take = &mut self.groups.as_mut().ok_or_else(|| Error::backend("no group graphs"))?.take;
        take.run(&HashMap::from([(TAKE_ROWS.to_string(), rows)]), &HashMap::new(), &[]).await?;
        Ok(())
    }

    /// Runs `prompt` from position 0 as [`Program::prefill`] does and returns the no-speech
    /// probability and the best `2 · beams` first tokens, as [`Program::beam_prefill`], without
    /// starting the one-window beams: what [`Program::join_group`] then copies into a group.
    pub async fn group_prefill(&mut self, prompt: &[u32], sot: usize, rules: &Rules) -> Result<(f32, Vec<Candidate>)> {
        let beams = self.max_beams();
        if self.max_groups() < 2 {
            return Err(Error::bad_argument("this program has no group graphs"));
        }
        let out = self
            .run_prefill(prompt, sot, rules, Sampling::Greedy, &[CANDIDATES, CANDIDATE_SCORES, NO_SPEECH_PROB])
            .await?;
        Ok((scalar_f32(&out, NO_SPEECH_PROB)?, self.read_candidates(&out, 2 * beams)?))
    }

    /// Makes the last prefill's window (its `prompt_len` tokens' caches and the encoded
    /// window) group `group`'s, for a first group step writing ring slot `slot`: the prompt's
    /// keys go to the `prompt_len` slots before it.
    pub async fn join_group(&mut self, group: usize, prompt_len: usize, slot: usize) -> Result<()> {
        let (beams, heads, ctx) = (self.max_beams(), self.decoder_heads, self.n_text_ctx);
        let count = self.max_groups();
        if group >= count || prompt_len == 0 || prompt_len >= ctx || slot >= ctx {
            return Err(Error::bad_argument(format!(
                "group {group} of {count}, a prompt of {prompt_len} tokens, slot {slot} of {ctx}"
            )));
        }
        // Slot s holds position (s - slot + prompt_len) mod ctx: the prompt's keys are the
        // prompt_len slots before `slot`; the others hold keys no row of the group sees.
        let mut rows = Vec::with_capacity(beams * heads * ctx);
        for _ in 0..beams {
            for h in 0..heads {
                rows.extend((0..ctx).map(|s| (h * ctx + (s + 2 * ctx - slot + prompt_len) % ctx) as u32));
            }
        }
        let inputs = HashMap::from([(RING_ROWS.to_string(), Tensor::u32([beams * heads * ctx], rows)?)]);
        let scalars = HashMap::from([
            (CACHE_ROW.to_string(), (group * beams * heads) as u32),
            (CROSS_ROW.to_string(), (group * heads) as u32),
        ]);
        let join = &mut self.groups.as_mut().ok_or_else(|| Error::backend("no group graphs"))?.join;
        join.run(&inputs, &scalars, &[]).await?;
        Ok(())
    }

    /// Runs one group step writing ring slot `slot`: the groups given beams (`None` for a
    /// free group, which runs dead) each take one token per beam. Returns each given group's
    /// best `2 · beams` continuations over its beams, best first.
    pub async fn group_step(
        &mut self,
        groups: &[Option<GroupInput>],
        slot: usize,
        timestamps: bool,
    ) -> Result<Vec<Option<Vec<Candidate>>>> {
        let (beams, heads, ctx) = (self.max_beams(), self.decoder_heads, self.n_text_ctx);
        let count = self.max_groups();
        if groups.len() != count || slot >= ctx {
            return Err(Error::bad_argument(format!(
                "{} groups for a program of {count}, slot {slot} of {ctx}",
                groups.len()
            )));
        }
        let rows = count * beams;
        let (mut tokens, mut previous, mut latest, mut scores) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut positions, mut parent_rows) = (Vec::with_capacity(rows), Vec::with_capacity(rows * heads));
        let (mut from, mut span) = (Vec::with_capacity(rows * heads), Vec::with_capacity(rows * heads));
        for (g, group) in groups.iter().enumerate() {
            let (seen_from, seen_span) = match group {
                Some(group) => {
                    if group.beams.len() != beams || group.position >= ctx || group.from >= ctx {
                        return Err(Error::bad_argument(format!(
                            "group {g}: {} beams of {beams} at position {} from slot {}, in a context of {ctx}",
                            group.beams.len(),
                            group.position,
                            group.from
                        )));
                    }
                    ((group.from) as f32, ((slot + ctx - group.from) % ctx) as f32)
                }
                None => (slot as f32, 0.0),
            };
            for k in 0..beams {
                let (h, parent, score, position) = match group {
                    Some(group) => {
                        let beam = group.beams[k];
                        (beam.history, beam.parent, beam.score, group.position)
                    }
                    None => (
                        History { last: 0, previous: 0, latest: self.no_timestamps, timestamps },
                        k,
                        f32::NEG_INFINITY,
                        0,
                    ),
                };
                let ids = [h.last, h.previous, h.latest];
                if let Some(bad) = ids.into_iter().find(|&t| t as usize >= self.vocab) {
                    return Err(Error::bad_argument(format!(
                        "token {bad} is outside the vocabulary of {}",
                        self.vocab
                    )));
                }
                if parent >= beams {
                    return Err(Error::bad_argument(format!("group {g}: beam {k} continues beam {parent} of {beams}")));
                }
                tokens.push(h.last);
                previous.push(h.previous);
                latest.push(h.latest as f32);
                scores.push(score);
                positions.push(position as u32);
                parent_rows.extend((0..heads).map(|r| ((g * beams + parent) * heads + r) as u32));
                from.extend(std::iter::repeat_n(seen_from, heads));
                span.extend(std::iter::repeat_n(seen_span, heads));
            }
        }
        let inputs = HashMap::from([
            (TOKENS.to_string(), Tensor::u32([rows], tokens)?),
            (PREVIOUS.to_string(), Tensor::u32([rows], previous)?),
            (LATEST.to_string(), Tensor::f32([rows], latest)?),
            (SCORES.to_string(), Tensor::f32([rows, 1], scores)?),
            (POSITIONS.to_string(), Tensor::u32([rows], positions)?),
            (PARENT_ROWS.to_string(), Tensor::u32([rows * heads], parent_rows)?),
            (SEEN_FROM.to_string(), Tensor::f32([rows * heads, 1], from)?),
            (SEEN_SPAN.to_string(), Tensor::f32([rows * heads, 1], span)?),
        ]);
        let scalars = HashMap::from([(OFFSET.to_string(), slot as u32), (TIMESTAMPS.to_string(), timestamps as u32)]);
        let step = &mut self.groups.as_mut().ok_or_else(|| Error::backend("no group graphs"))?.step;
        let out = step.run(&inputs, &scalars, &[CANDIDATES, CANDIDATE_SCORES]).await?;
        let k = 2 * beams;
        let all = self.read_candidates(&out, count * k)?;
        Ok(groups.iter().zip(all.chunks_exact(k)).map(|(group, c)| group.as_ref().map(|_| c.to_vec())).collect())
    }
}
