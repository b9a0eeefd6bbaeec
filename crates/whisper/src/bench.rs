//! Timing a compiled model's pieces as `susurrus bench` and the browser package's `bench()`
//! report them: the encoder on one window, decoder tokens as transcription decodes them
//! (chains where the backend feeds steps on the device) and one step per submission, a step
//! replayed on the device alone, beam steps, and whole transcriptions. The caller passes its clock (natively `Instant`, in a
//! page `performance.now()`), so both measure the same way.

use crate::audio::mel::pad_or_trim;
use crate::decode::model::Whisper;
use crate::error::Result;
use std::ops::ControlFlow;

use crate::decode::options::TranscribeOptions;
use crate::graphs::select::Rules;
use crate::program::{BeamInput, Sampling};

/// Medians in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieceTimes {
    /// The encoder on one 30 s window, to completion on the device.
    pub encoder_ms: f64,
    /// Greedy tokens as transcription decodes them.
    pub decoder_ms_per_token: f64,
    /// One step per submission, its token fed by the host (what sampling does).
    pub decoder_ms_per_token_single: f64,
    /// A step replayed 100 times back to back on the device, per step.
    pub device_ms_per_step: f64,
    /// One beam step of the program's beams (all of them continuing), as beam search runs
    /// it: a host round trip per step. `None` without beam graphs.
    pub beam_ms_per_step: Option<f64>,
    /// The beams of that step.
    pub beams: usize,
}

/// The median of `values` (0 when empty).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Times `whisper`'s pieces on the first window of `samples` (16 kHz mono): each measure
/// once to warm up, then `runs` times; `tokens` decoder steps per decoding run (1 to 200).
/// `now_ms` is the clock, in milliseconds.
pub async fn time_pieces(
    whisper: &mut Whisper,
    samples: &[f32],
    runs: usize,
    tokens: usize,
    now_ms: &dyn Fn() -> f64,
) -> Result<PieceTimes> {
    if !(1..=200).contains(&tokens) || runs == 0 {
        return Err(crate::error::Error::bad_option(format!(
            "bench: {runs} runs of {tokens} tokens (at least 1 run, 1 to 200 tokens)"
        )));
    }
    let mel = whisper.log_mel().compute(samples)?;
    // One window of the model's frames (3000, 30 s, in every real model).
    let window = pad_or_trim(&mel, whisper.config().n_frames())?;
    let program = whisper.program_mut();
    let mut encoder = Vec::with_capacity(runs);
    for run in 0..=runs {
        let t = now_ms();
        program.encode_repeatedly(&window, 1).await?;
        if run > 0 {
            encoder.push(now_ms() - t);
        }
    }

    let ids = whisper.tokenizer().special_ids().clone();
    let prompt = [ids.start_of_transcript, ids.no_timestamps];
    let program = whisper.program_mut();
    let (mut chained, mut single) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        // Chains where the backend feeds steps on the device; past end of text the steps
        // cost the same.
        let first = program.prefill(&prompt, 0, &Rules::default(), Sampling::Greedy).await?;
        let mut seq = vec![first.token];
        while seq.len() <= tokens {
            let history = program.history(&seq, false)?;
            let position = prompt.len() + seq.len() - 1;
            let t = now_ms();
            let chosen = program.steps(&history, position, tokens + 1 - seq.len()).await?;
            let per_token = (now_ms() - t) / chosen.len().max(1) as f64;
            if run > 0 {
                chained.extend(std::iter::repeat_n(per_token, chosen.len()));
            }
            seq.extend(chosen.iter().map(|c| c.token));
        }
        // One step per submission, the host feeding each its token.
        let first = program.prefill(&prompt, 0, &Rules::default(), Sampling::Greedy).await?;
        let mut seq = vec![first.token];
        for position in prompt.len()..prompt.len() + tokens {
            let history = program.history(&seq, false)?;
            let t = now_ms();
            let choice = program.step(&history, position, Sampling::Greedy).await?;
            if run > 0 {
                single.push(now_ms() - t);
            }
            seq.push(choice.token);
        }
    }

    // The same step replayed back to back on the device, without the host's work between.
    let position = prompt.len() + tokens;
    // Token 220 (a space) is ordinary text in every Whisper vocabulary.
    let history = program.history(&[220], false)?;
    let mut device = Vec::with_capacity(runs);
    for run in 0..=runs {
        let t = now_ms();
        program.step_repeatedly(&history, position, 100).await?;
        if run > 0 {
            device.push((now_ms() - t) / 100.0);
        }
    }
    let beams = program.max_beams();
    let mut beam = Vec::new();
    if beams >= 2 {
        for run in 0..=runs {
            let (_, mut candidates) = program.beam_prefill(&prompt, 0, &Rules::default(), beams).await?;
            let mut seqs = vec![Vec::new()];
            for position in prompt.len()..prompt.len() + tokens {
                // Each beam continues one of the best candidates, as a search without
                // endings would.
                let next = &candidates[..beams];
                seqs = next.iter().map(|c| [seqs[c.beam].as_slice(), &[c.token]].concat()).collect();
                let inputs = next
                    .iter()
                    .zip(&seqs)
                    .map(|(c, seq)| {
                        Ok(BeamInput { history: program.history(seq, false)?, parent: c.beam, score: c.score })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let t = now_ms();
                candidates = program.beam_step(&inputs, position, false).await?;
                if run > 0 {
                    beam.push(now_ms() - t);
                }
            }
        }
    }
    Ok(PieceTimes {
        encoder_ms: median(encoder),
        decoder_ms_per_token: median(chained),
        decoder_ms_per_token_single: median(single),
        device_ms_per_step: median(device),
        beam_ms_per_step: (beams >= 2).then(|| median(beam)),
        beams,
    })
}

/// Times whole transcriptions of `samples` with `options`: once to warm up, then `runs`
/// times; the median in milliseconds.
pub async fn time_transcriptions(
    whisper: &mut Whisper,
    samples: &[f32],
    options: &TranscribeOptions,
    runs: usize,
    now_ms: &dyn Fn() -> f64,
) -> Result<f64> {
    let mut times = Vec::with_capacity(runs);
    for run in 0..=runs {
        let t = now_ms();
        whisper.transcribe(samples, options, &mut |_| ControlFlow::Continue(())).await?;
        if run > 0 {
            times.push(now_ms() - t);
        }
    }
    Ok(median(times))
}
