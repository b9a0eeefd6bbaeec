//! Token-exact transcription: the golden clips, transcribed with the reference's options,
//! give the reference's segments — the same token ids, the same text, start and end within
//! 0.02 s, the same language with its detected probability within 1e-3 — on the CPU reference
//! executor and on wgpu. Both are slow here (the reference executor is the plain oracle;
//! lavapipe is a software GPU, on which the 133 s clip alone took most of the suite), so they
//! run one clip's every decoding path that compiles graphs of its own (greedy, beam, word
//! timestamps, per-token penalties), the reference executor the silent clip's no-speech skip
//! too, and one multilingual run of each kind: the detected-language run and the VAD network. The seek over several windows,
//! the VAD filter's transcripts, every clip and every multilingual run are the native crate's, on its fast CPU backend (and on CUDA on a GPU machine), through
//! the same checks (the test kit's `golden` module). The fixtures (audio made with espeak-ng,
//! transcripts from faster-whisper 1.2.1 / CTranslate2 4.8.5, greedy and with 5 beams) come
//! from tests/golden/make_golden.sh.

use susurrus_core::exec::wgpu::{WgpuBackend, WgpuOptions};
use susurrus_testkit::golden;

use golden::{Set, transcripts_match_reference};

#[test]
fn cpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::cpu()), Set::TinyEn, &golden::REFERENCE_RUNS);
}

#[test]
fn wgpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::wgpu()), Set::TinyEn, &golden::LAVAPIPE_RUNS);
}

#[test]
fn cpu_vad_matches_onnxruntime() {
    golden::vad_matches_reference(&golden::cpu());
}

#[test]
fn wgpu_vad_matches_onnxruntime() {
    golden::vad_matches_reference(&golden::wgpu());
}

#[test]
fn cpu_multilingual_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::cpu()), Set::Base, &golden::MULTILINGUAL_RUNS);
}

/// The base model on lavapipe: language detection, then German (a run takes 15-30 s there).
#[test]
fn wgpu_multilingual_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::wgpu()), Set::Base, &["de/detect"]);
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
        let backend = pollster::block_on(WgpuBackend::with_options(&options)).unwrap();
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
        let backend = pollster::block_on(WgpuBackend::with_options(&options)).unwrap();
        golden::beam_run_matches_up_to_a_near_tie(Box::new(backend), 0.001);
    }
}

/// Buffers of at most 16 MiB: the 40 MB token embedding is read as three blocks of rows and
/// each arena as blocks of 16 MiB (what a browser's 128 MiB binding limit does to large-v3),
/// and the transcript is still the reference's.
#[test]
fn wgpu_with_small_buffers_matches_reference() {
    let options = WgpuOptions { max_buffer_bytes: Some(16 << 20), ..WgpuOptions::default() };
    let backend = pollster::block_on(WgpuBackend::with_options(&options)).unwrap();
    transcripts_match_reference(Box::new(backend), Set::TinyEn, &["short_2/default"]);
}

/// int8 (tiny.en quantized by CTranslate2): within 10% of the f16 reference's words on the
/// reference executor, and wgpu's token ids are the reference executor's (one clip: on
/// lavapipe it takes ~9 s; the fast CPU backend runs every short clip).
#[test]
fn wgpu_int8_transcripts_match_the_reference_executor() {
    golden::int8_transcripts_match(Some(Box::new(golden::wgpu())), &["short_2"], 0.10);
}
