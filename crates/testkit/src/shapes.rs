//! The released Whisper sizes at their real widths on any backend: a random-weight model of an
//! [`Architecture`] (fewer layers, so it runs in CI) compiled as Whisper's whole program and
//! run on a backend and on the CPU reference executor, which must agree on the encoder output
//! and on the tokens a prefill and greedy steps choose.

use susurrus_core::exec::Backend;
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::ir::DType;
use susurrus_core::tensor::Tensor;
use susurrus_whisper::config::WhisperConfig;
use susurrus_whisper::layers::ModelWeights;
use susurrus_whisper::program::{Choice, Program, ProgramSpec, Sampling};
use susurrus_whisper::select::{Rules, Selection};

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

fn run(backend: &dyn Backend, model: &ModelWeights, arch: Architecture) -> Run {
    let c = &model.config;
    let (sot, no_timestamps, timestamp_begin) = arch.special_ids();
    let spec = ProgramSpec {
        selection: Selection {
            suppress: c.generation.suppress_ids.clone(),
            blank: c.generation.suppress_ids_begin.clone(),
            timestamp_begin,
        },
        no_speech: no_timestamps - 1,
    };
    let mut program = pollster::block_on(Program::compile(backend, model, &spec))
        .unwrap_or_else(|e| panic!("{} on {}: {e}", arch.name(), backend.name()));
    let frames = c.n_frames();
    let mel: Vec<f32> = (0..c.n_mels * frames).map(|i| ((i * 37 % 101) as f32 / 101.0 - 0.5) * 1.5).collect();
    let mel = Tensor::f32([c.n_mels, frames], mel).unwrap();
    let encoder = pollster::block_on(program.encode(&mel, true)).unwrap().expect("the encoder output").to_f32();
    let prompt = [sot, c.generation.lang_ids[0], no_timestamps - 4, no_timestamps];
    let rules = Rules::default();
    let mut choices = vec![pollster::block_on(program.prefill(&prompt, 0, &rules, Sampling::Greedy)).unwrap()];
    for position in prompt.len()..prompt.len() + STEPS {
        let token = choices.last().unwrap().token;
        choices.push(pollster::block_on(program.step(token, position, &rules, Sampling::Greedy)).unwrap());
    }
    Run { encoder, choices }
}

/// Runs `arch` with `layers` layers (f16 weights, seeded) on `backend` and on the CPU
/// reference executor: the encoder outputs agree within 1e-3 of their largest magnitude, every
/// prefill and step chooses the same token with a log-probability within 1e-2 and the same
/// no-speech probability within 1e-3. Panics naming what differs.
pub fn real_width_model_matches_reference(backend: &dyn Backend, arch: Architecture, layers: usize) {
    let weights = random_model(config(arch, layers), DType::F16, 11).unwrap();
    let model = ModelWeights::new(&weights).unwrap();
    let want = run(&CpuBackend::new(), &model, arch);
    let got = run(backend, &model, arch);
    let name = format!("{} ({layers} + {layers} layers) on {}", arch.name(), backend.name());

    let scale = want.encoder.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let (diff, at) = got
        .encoder
        .iter()
        .zip(&want.encoder)
        .enumerate()
        .map(|(i, (a, b))| ((a - b).abs(), i))
        .fold((0.0f32, 0), |m, d| if d.0 > m.0 { d } else { m });
    assert!(
        diff <= 1e-3 * scale,
        "{name}: encoder output differs by {diff} at {at} (largest magnitude {scale}): {} vs {}",
        got.encoder[at],
        want.encoder[at]
    );
    for (i, (g, w)) in got.choices.iter().zip(&want.choices).enumerate() {
        let close = g.token == w.token
            && (g.logprob - w.logprob).abs() <= 1e-2
            && match (g.no_speech_prob, w.no_speech_prob) {
                (Some(a), Some(b)) => (a - b).abs() <= 1e-3,
                (a, b) => a == b,
            };
        assert!(close, "{name}: choice {i} is {g:?}, the reference's {w:?}");
    }
}
