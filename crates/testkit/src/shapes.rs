//! The released Whisper sizes at their real widths on any backend: a random-weight model of an
//! [`Architecture`] (fewer layers, so it runs in CI) compiled as Whisper's whole program and
//! run on a backend and on the CPU reference executor, which must agree on the encoder output
//! and on the tokens a prefill and greedy steps choose. Async, so the browser suite runs it too.

use susurrus_core::exec::Backend;
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::ir::DType;
use susurrus_core::tensor::Tensor;
use susurrus_whisper::graphs::layers::ModelWeights;
use susurrus_whisper::graphs::select::{Rules, Selection};
use susurrus_whisper::load::config::WhisperConfig;
use susurrus_whisper::program::{Choice, Program, ProgramSpec, Sampling};

use crate::whisper::{Architecture, random_model};

/// Greedy steps after the prefill.
const STEPS: usize = 3;

/// What one backend computed: the encoder output and the choices of the prefill and steps.
struct Run {
    encoder: Vec<f32>,
    choices: Vec<Choice>,
}

/// `arch` with `layers` encoder and decoder layers (the alignment head in the last).
pub fn config(arch: Architecture, layers: usize) -> WhisperConfig {
    let mut config = WhisperConfig { encoder_layers: layers, decoder_layers: layers, ..arch.config() };
    config.generation.alignment_heads = vec![(layers - 1, 0)];
    config
}

async fn run(backend: &dyn Backend, model: &ModelWeights, name: &str) -> Result<Run, String> {
    let c = &model.config;
    let fail = |e: susurrus_whisper::Error| format!("{name} on {}: {e}", backend.name());
    // The multilingual ids: 50363 is <|notimestamps|> in 51865 tokens, shifted by large-v3's
    // extra language.
    let shift = (c.n_vocab - 51865) as u32;
    let (sot, no_timestamps) = (50258, 50363 + shift);
    let spec = ProgramSpec {
        selection: Selection {
            suppress: c.generation.suppress_ids.clone(),
            blank: c.generation.suppress_ids_begin.clone(),
            timestamp_begin: no_timestamps + 1,
            end_of_text: 50257,
            no_timestamps,
            penalties: false,
        },
        no_speech: no_timestamps - 1,
        beams: 0,
        alignment: false,
        long_prompts: false,
        groups: 0,
    };
    let mut program = Program::compile(backend, model, &spec).await.map_err(fail)?;
    let frames = c.n_frames();
    let mel: Vec<f32> = (0..c.n_mels * frames).map(|i| ((i * 37 % 101) as f32 / 101.0 - 0.5) * 1.5).collect();
    let mel = Tensor::f32([c.n_mels, frames], mel).map_err(|e| e.to_string())?;
    let encoder = program.encode(&mel, true).await.map_err(fail)?.ok_or("no encoder output")?.to_f32();
    let prompt = [sot, c.generation.lang_ids[0], no_timestamps - 4, no_timestamps];
    let mut choices = vec![program.prefill(&prompt, 0, &Rules::default(), Sampling::Greedy).await.map_err(fail)?];
    // Steps in chains where the backend feeds them on the device (one by one on the CPU
    // reference), with the timestamp rules on.
    while choices.len() <= STEPS {
        let seq: Vec<u32> = choices.iter().map(|c| c.token).collect();
        let history = program.history(&seq, true).map_err(fail)?;
        let position = prompt.len() + seq.len() - 1;
        choices.extend(program.steps(&history, position, STEPS + 1 - seq.len()).await.map_err(fail)?);
    }
    Ok(Run { encoder, choices })
}

/// Runs a random model of `config` (weights of `dtype`, seeded) on `backend` and on the CPU
/// reference executor: the encoder outputs agree within 1e-3 of their largest magnitude, every
/// prefill and step chooses the same token with a log-probability within 1e-2 and the same
/// no-speech probability within 1e-3. `Err` names what differs.
pub async fn model_matches_reference(
    backend: &dyn Backend,
    config: WhisperConfig,
    dtype: DType,
    name: &str,
) -> Result<(), String> {
    let weights = random_model(config, dtype, 11).map_err(|e| e.to_string())?;
    let model = ModelWeights::new(&weights).map_err(|e| e.to_string())?;
    let want = run(&CpuBackend::new(), &model, name).await?;
    let got = run(backend, &model, name).await?;
    let name = format!("{name} on {}", backend.name());

    let scale = want.encoder.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let (diff, at) = got
        .encoder
        .iter()
        .zip(&want.encoder)
        .enumerate()
        .map(|(i, (a, b))| ((a - b).abs(), i))
        .fold((0.0f32, 0), |m, d| if d.0 > m.0 { d } else { m });
    if diff > 1e-3 * scale {
        return Err(format!(
            "{name}: encoder output differs by {diff} at {at} (largest magnitude {scale}): {} vs {}",
            got.encoder[at], want.encoder[at]
        ));
    }
    for (i, (g, w)) in got.choices.iter().zip(&want.choices).enumerate() {
        let close = g.token == w.token
            && (g.logprob - w.logprob).abs() <= 1e-2
            && match (g.no_speech_prob, w.no_speech_prob) {
                (Some(a), Some(b)) => (a - b).abs() <= 1e-3,
                (a, b) => a == b,
            };
        if !close {
            return Err(format!("{name}: choice {i} is {g:?}, the reference's {w:?}"));
        }
    }
    Ok(())
}

/// `arch` with `layers` layers each side and f16 weights on `backend` against the reference
/// executor (see [`model_matches_reference`]); panics naming what differs.
#[cfg(not(target_arch = "wasm32"))]
pub fn real_width_model_matches_reference(backend: &dyn Backend, arch: Architecture, layers: usize) {
    let name = format!("{} ({layers} + {layers} layers)", arch.name());
    let result = pollster::block_on(model_matches_reference(backend, config(arch, layers), DType::F16, &name));
    if let Err(e) = result {
        panic!("{e}");
    }
}
