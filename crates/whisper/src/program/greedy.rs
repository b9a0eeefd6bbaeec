//! Greedy decoding and sampling: the prefill of a prompt, and decoder steps one at a time
//! ([`Program::step`], when sampling) or in chains ([`Program::steps`]) that feed each chosen
//! token to the next step on the device.

use super::*;

impl Program {
    /// Sets the token penalties of the next runs (a program whose selection has
    /// [`Selection::penalties`]): `codes` holds a row of [`TOKEN_PENALTIES`] per sequence,
    /// one for a prefill or step, [`Program::max_beams`] for a beam step (rows past the
    /// beams given are not read).
    pub fn set_token_penalties(&mut self, repetition_penalty: f32, codes: Vec<f32>) -> Result<()> {
        if codes.is_empty() || !codes.len().is_multiple_of(self.vocab) {
            return Err(Error::bad_argument(format!(
                "{} token penalties for a vocabulary of {}",
                codes.len(),
                self.vocab
            )));
        }
        let rows = codes.len() / self.vocab;
        self.inputs.insert(TOKEN_PENALTIES.into(), Tensor::f32([rows, self.vocab], codes)?);
        self.inputs.insert(REPETITION_PENALTY.into(), Tensor::f32([1, 1], vec![repetition_penalty])?);
        Ok(())
    }

    /// Sets the sampling inputs of the next run. Greedy runs reuse the zero noise already in
    /// place, so a greedy step allocates nothing vocabulary-sized.
    pub(super) fn set_sampling(&mut self, sampling: Sampling) -> Result<()> {
        let inv_t = match sampling {
            Sampling::Greedy => {
                if self.noisy {
                    self.inputs.insert(NOISE.into(), Tensor::f32([1, self.vocab], vec![0.0; self.vocab])?);
                    self.noisy = false;
                }
                1.0
            }
            Sampling::Temperature { temperature, noise } => {
                if !(temperature > 0.0 && temperature.is_finite()) {
                    return Err(Error::bad_argument(format!("sampling temperature {temperature} is not positive")));
                }
                if noise.len() != self.vocab {
                    return Err(Error::bad_argument(format!(
                        "sampling noise has {} values for a vocabulary of {}",
                        noise.len(),
                        self.vocab
                    )));
                }
                self.inputs.insert(NOISE.into(), Tensor::f32([1, self.vocab], noise.to_vec())?);
                self.noisy = true;
                1.0 / temperature
            }
        };
        self.inputs.insert(INV_TEMPERATURE.into(), Tensor::f32([1, 1], vec![inv_t])?);
        Ok(())
    }

    /// Runs `prompt` from position 0 (the KV caches start over) and chooses the first
    /// generated token; also gives the no-speech probability at row `sot`.
    pub async fn prefill(
        &mut self,
        prompt: &[u32],
        sot: usize,
        rules: &Rules,
        sampling: Sampling<'_>,
    ) -> Result<Choice> {
        let out = self.run_prefill(prompt, sot, rules, sampling, &[TOKEN, LOGPROB, NO_SPEECH_PROB]).await?;
        let mut choice = read_choice(&out)?;
        choice.no_speech_prob = Some(scalar_f32(&out, NO_SPEECH_PROB)?);
        Ok(choice)
    }

    /// Runs `prompt` from position 0 and returns the named outputs.
    pub(super) async fn run_prefill(
        &mut self,
        prompt: &[u32],
        sot: usize,
        rules: &Rules,
        sampling: Sampling<'_>,
        outputs: &[&str],
    ) -> Result<HashMap<String, Tensor>> {
        if prompt.is_empty() || sot >= prompt.len() {
            return Err(Error::bad_argument(format!(
                "a prompt of {} tokens with <|startoftranscript|> at {sot}",
                prompt.len()
            )));
        }
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::bad_argument(format!("prompt token {bad} is outside the vocabulary of {}", self.vocab)));
        }
        let max = self.max_prompt();
        let index = self.prefills.iter().position(|(s, _)| *s >= prompt.len()).ok_or_else(|| {
            Error::bad_argument(format!("a prompt of {} tokens is longer than the longest of {max}", prompt.len()))
        })?;
        let size = self.prefills[index].0;
        let mut tokens = prompt.to_vec();
        tokens.resize(size, self.pad_token);
        self.set_sampling(sampling)?;
        self.inputs.insert(TOKENS.to_string(), Tensor::u32([size], tokens)?);
        // The step graph's history inputs are not the prefill's.
        self.inputs.remove(PREVIOUS);
        self.inputs.remove(LATEST);
        let mut scalars = HashMap::from([
            (OFFSET.to_string(), 0),
            (LAST.to_string(), prompt.len() as u32 - 1),
            (SOT.to_string(), sot as u32),
        ]);
        rules.scalars(&mut scalars)?;
        let exe = &mut self.prefills[index].1;
        Ok(exe.run(&self.inputs, &scalars, outputs).await?)
    }

    /// The history after `seq`, the tokens generated so far in a window (at least one):
    /// what [`Program::step`] and [`Program::steps`] start from.
    pub fn history(&self, seq: &[u32], timestamps: bool) -> Result<History> {
        let (&last, before) = seq.split_last().ok_or_else(|| Error::bad_argument("a step needs a token before it"))?;
        let is_ts = |t: &&u32| **t >= self.timestamp_begin;
        Ok(History {
            last,
            previous: before.last().copied().unwrap_or(last),
            latest: seq.iter().rev().find(is_ts).copied().unwrap_or(self.no_timestamps),
            timestamps,
        })
    }

    /// Checks a step's history and position and sets its inputs; returns its scalars.
    pub(super) fn step_inputs(&mut self, history: &History, position: usize) -> Result<HashMap<String, u32>> {
        if position >= self.n_text_ctx {
            return Err(Error::bad_argument(format!(
                "decoder position {position} is past the context of {}",
                self.n_text_ctx
            )));
        }
        let ids = [history.last, history.previous, history.latest];
        if let Some(bad) = ids.into_iter().find(|&t| t as usize >= self.vocab) {
            return Err(Error::bad_argument(format!("token {bad} is outside the vocabulary of {}", self.vocab)));
        }
        self.inputs.insert(TOKENS.to_string(), Tensor::u32([1], vec![history.last])?);
        self.inputs.insert(PREVIOUS.to_string(), Tensor::u32([1], vec![history.previous])?);
        self.inputs.insert(LATEST.to_string(), Tensor::f32([1], vec![history.latest as f32])?);
        Ok(HashMap::from([(OFFSET.to_string(), position as u32), (TIMESTAMPS.to_string(), history.timestamps as u32)]))
    }

    /// Runs the step after `history` at `position` (after a prefill and the steps before it)
    /// and chooses the next token.
    pub async fn step(&mut self, history: &History, position: usize, sampling: Sampling<'_>) -> Result<Choice> {
        let scalars = self.step_inputs(history, position)?;
        self.set_sampling(sampling)?;
        let out = self.step.run(&self.inputs, &scalars, &[TOKEN, LOGPROB]).await?;
        read_choice(&out)
    }

    /// Runs up to `count` greedy steps from `history` at `position` on, each step's token the
    /// next one's input, and returns their choices in order: [`STEPS_PER_SUBMISSION`] per
    /// submission where the backend feeds steps on the device, else one. The caller stops at
    /// end of text; choices after it are to be discarded (their steps only wrote cache rows
    /// past the window's end, which no later query sees before they are written again).
    pub async fn steps(&mut self, history: &History, position: usize, count: usize) -> Result<Vec<Choice>> {
        let chain = if self.step.feeds_on_device() { STEPS_PER_SUBMISSION } else { 1 };
        let count = count.clamp(1, chain);
        if position + count > self.n_text_ctx {
            return Err(Error::bad_argument(format!(
                "{count} decoder steps from position {position} pass the context of {}",
                self.n_text_ctx
            )));
        }
        let first = self.step_inputs(history, position)?;
        self.set_sampling(Sampling::Greedy)?;
        let scalars: Vec<HashMap<String, u32>> = (0..count)
            .map(|k| {
                let mut s = first.clone();
                s.insert(OFFSET.to_string(), (position + k) as u32);
                s
            })
            .collect();
        let chain = Chain {
            inputs: &self.inputs,
            scalars: &scalars,
            feeds: &[(TOKEN, TOKENS), (STEP_TOKEN, PREVIOUS), (LATEST_NEXT, LATEST)],
            outputs: &[TOKEN, LOGPROB],
        };
        let runs = self.step.run_chain(chain).await?;
        runs.iter().map(read_choice).collect()
    }

    /// Runs the decoder step after `history` at `position` `times` times back to back,
    /// greedy, reading nothing, and resolves when the device has finished: the device's time
    /// per step, without the host's work between steps (what benchmarks compare with
    /// [`Program::steps`]). Every run writes the same cache row, so the state after it is that
    /// of one step.
    pub async fn step_repeatedly(&mut self, history: &History, position: usize, times: usize) -> Result<()> {
        let scalars = self.step_inputs(history, position)?;
        self.set_sampling(Sampling::Greedy)?;
        Ok(self.step.run_repeatedly(&self.inputs, &scalars, times).await?)
    }
}

pub(super) fn read_choice(out: &HashMap<String, Tensor>) -> Result<Choice> {
    let token = out
        .get(TOKEN)
        .and_then(|t| t.as_u32())
        .and_then(|v| v.first().copied())
        .ok_or_else(|| Error::backend("the decoder returned no token"))?;
    Ok(Choice { token, logprob: scalar_f32(out, LOGPROB)?, no_speech_prob: None })
}
