//! The golden clips on every backend: transcribed with the reference's options, they give the
//! reference's segments — the same token ids, the same text, start and end within 0.02 s, the
//! same language with its detected probability within 1e-3 — and the VAD network gives
//! onnxruntime's probabilities. The fixtures (audio made with espeak-ng, transcripts from
//! faster-whisper 1.2.1 / CTranslate2 4.8.5, greedy and with 5 beams) come from
//! tests/golden/make_golden.sh; the checks are the test kit's `golden` module.
//!
//! The fast CPU backend runs every clip and every multilingual run, the seek over several
//! windows and the VAD filter's transcripts among them. The CPU reference executor (the plain
//! oracle) and wgpu on lavapipe (a software GPU, on which the 133 s clip alone took most of the
//! suite) are slow here, so they run one clip's every decoding path that compiles graphs of its
//! own (greedy, beam, word timestamps, per-token penalties), the reference executor the silent
//! clip's no-speech skip too, and one multilingual run of each kind: the detected-language run
//! and the VAD network. CUDA runs them in its GPU suite (`crates/cuda/tests/gpu.rs`), wgpu on a
//! real GPU in `gpu_every_kernel_family_matches_reference` (`scripts/gpu/test_wgpu_gpu.sh`).

use susurrus_testkit::backends;
use susurrus_testkit::golden;
use susurrus_testkit::shapes::real_width_model_matches_reference;
use susurrus_testkit::whisper::Architecture;
use susurrus_wgpu::WgpuOptions;

use golden::{Set, transcripts_match_reference};

#[test]
fn fast_cpu_transcripts_match_reference() {
    transcripts_match_reference(backends::fast_cpu(), Set::TinyEn, &golden::CLIPS);
}

#[test]
fn fast_cpu_vad_matches_onnxruntime() {
    golden::vad_matches_reference(backends::fast_cpu().as_ref());
}

#[test]
fn fast_cpu_multilingual_transcripts_match_reference() {
    transcripts_match_reference(backends::fast_cpu(), Set::Base, &golden::MULTILINGUAL_CLIPS);
}

/// int8 tiny.en (CTranslate2's quantization) on the fast CPU backend: the int8 dot products,
/// dequantizing gathers and convolutions give the reference executor's token ids, within 10%
/// of the f16 words.
#[test]
fn fast_cpu_int8_transcripts_match_the_reference_executor() {
    golden::int8_transcripts_match(Some(backends::fast_cpu()), &golden::SHORT_CLIPS, 0.10);
}

/// The larger sizes at their real widths (random weights, one layer each side) on the fast CPU
/// backend against the reference executor (`susurrus_testkit::shapes`).
#[test]
fn fast_cpu_real_width_models_match_the_reference() {
    let backend = backends::fast_cpu();
    for arch in [Architecture::Small, Architecture::Medium, Architecture::LargeV3] {
        real_width_model_matches_reference(backend.as_ref(), arch, 1);
    }
}

#[test]
fn cpu_transcripts_match_reference() {
    transcripts_match_reference(backends::reference(), Set::TinyEn, &golden::REFERENCE_RUNS);
}

#[test]
fn wgpu_transcripts_match_reference() {
    transcripts_match_reference(backends::wgpu(), Set::TinyEn, &golden::LAVAPIPE_RUNS);
}

#[test]
fn cpu_vad_matches_onnxruntime() {
    golden::vad_matches_reference(backends::reference().as_ref());
}

#[test]
fn wgpu_vad_matches_onnxruntime() {
    golden::vad_matches_reference(backends::wgpu().as_ref());
}

#[test]
fn cpu_multilingual_transcripts_match_reference() {
    transcripts_match_reference(backends::reference(), Set::Base, &golden::MULTILINGUAL_RUNS);
}

/// The base model on lavapipe: language detection, then German (a run takes 15-30 s there).
#[test]
fn wgpu_multilingual_transcripts_match_reference() {
    transcripts_match_reference(backends::wgpu(), Set::Base, &["de/detect"]);
}

/// The GPU suite's golden check (`scripts/gpu/test_wgpu_gpu.sh`; ignored elsewhere: on lavapipe the
/// long clip alone takes most of an hour): every tiny.en run on each kernel family a real
/// GPU adapter has — its matrix units, f16 weights without them (lane folds on subgroups),
/// and the f32 path every adapter has (no subgroups: a browser's) — the long clip's beam
/// search up to a near-tie its rounding may flip (`golden::GPU_RUNS`).
#[test]
#[ignore = "needs a GPU adapter: scripts/gpu/test_wgpu_gpu.sh runs it"]
fn gpu_every_kernel_family_matches_reference() {
    let families = [
        WgpuOptions::default(),
        WgpuOptions { allow_matrix_units: false, ..WgpuOptions::default() },
        WgpuOptions { allow_f16: false, allow_subgroups: false, ..WgpuOptions::default() },
    ];
    let mut seen = Vec::new();
    for options in families {
        let backend = backends::wgpu_with(&options);
        assert!(!backend.cpu_kernels(), "the GPU suite needs a GPU adapter, not {}", backend.adapter());
        let name = susurrus_core::exec::Backend::name(&backend);
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        println!("{name} on {}", backend.adapter());
        golden::vad_matches_reference(&backend);
        let runs: Vec<&str> = golden::GPU_RUNS
            .into_iter()
            .filter(|&run| {
                !(susurrus_core::exec::Backend::f16_products(&backend) && run == golden::F16_MATRIX_WORD_FLIP)
            })
            .collect();
        transcripts_match_reference(Box::new(backend), Set::TinyEn, &runs);
        let backend = backends::wgpu_with(&options);
        golden::beam_run_matches_up_to_a_near_tie(Box::new(backend), 0.001);
    }
}

/// Buffers of at most 16 MiB: the 40 MB token embedding is read as three blocks of rows and
/// each arena as blocks of 16 MiB (what a browser's 128 MiB binding limit does to large-v3),
/// and the transcript is still the reference's.
#[test]
fn wgpu_with_small_buffers_matches_reference() {
    let options = WgpuOptions { max_buffer_bytes: Some(16 << 20), ..WgpuOptions::default() };
    let backend = backends::wgpu_with(&options);
    transcripts_match_reference(Box::new(backend), Set::TinyEn, &["short_2/default"]);
}

/// int8 (tiny.en quantized by CTranslate2): within 10% of the f16 reference's words on the
/// reference executor, and wgpu's token ids are the reference executor's (one clip: on
/// lavapipe it takes ~9 s; the fast CPU backend runs every short clip).
#[test]
fn wgpu_int8_transcripts_match_the_reference_executor() {
    golden::int8_transcripts_match(Some(backends::wgpu()), &["short_2"], 0.10);
}
