//! The GPU suite of the CUDA backend (needs an NVIDIA GPU, so every test is marked ignored:
//! `scripts/gpu/test_cuda.sh` builds it here and runs it, ignored tests included, on a machine
//! with one). The op harness against the reference interpreter with f32 products, and with
//! the default f16 tensor-core products the golden clips token for token, alone and decoded
//! together through the batch scheduler; graph replay with changing runtime scalars; errors
//! for a missing device and for memory the device lacks.

use susurrus_testkit::golden::{self, Set};

use std::collections::HashMap;
use std::time::Instant;

use susurrus_core::exec::Backend;
use susurrus_core::ir::{Graph, TensorType};
use susurrus_core::plan::plan;
use susurrus_core::{DType, Shape, Tensor};
use susurrus_cuda::{CudaBackend, CudaOptions, Precision};
use susurrus_testkit::shapes::real_width_model_matches_reference;
use susurrus_testkit::whisper::Architecture;
use susurrus_testkit::{CaseReport, check_backend, op_cases, summary_table};

fn backend(precision: Precision) -> CudaBackend {
    CudaBackend::new(&CudaOptions { precision, ..CudaOptions::default() }).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn every_op_case_matches_the_reference() {
    let backend = backend(Precision::F32);
    println!("device {} ({})", backend.device_name(), backend.arch());
    let mut failures = Vec::new();
    for seed in [0, 1, 2, 3] {
        let cases = op_cases(seed).unwrap();
        let reports: Vec<CaseReport> = cases.iter().map(|case| check_backend(&backend, case)).collect();
        if seed == 0 {
            println!("{}", summary_table(&reports));
        }
        failures.extend(reports.iter().filter(|r| !r.passed()).map(|r| format!("seed {seed}: {r}")));
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

/// Every golden run (the long clip's beam search up to a near-tie: `golden::GPU_RUNS`).
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn golden_transcripts_match_reference_with_f16_products() {
    golden::transcripts_match_reference(Box::new(backend(Precision::F16)), Set::TinyEn, &golden::GPU_RUNS);
    golden::beam_run_matches_up_to_a_near_tie(Box::new(backend(Precision::F16)), 0.001);
    golden::transcripts_match_reference(Box::new(backend(Precision::F16)), Set::Base, &golden::MULTILINGUAL_CLIPS);
}

/// The golden clips transcribed at once through the batch scheduler, as `serve --api
/// --batch 4` runs them (4 groups, the first windows encoded together): each gets the
/// transcript it gets alone, token for token, with its window scores within 2e-3 (f16
/// tensor-core products of more rows may round otherwise).
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn golden_clips_decoded_together_each_get_their_own_transcript() {
    use std::ops::ControlFlow;
    use susurrus_testkit::batch::{Together, assert_same_transcripts, transcribe_together};
    use susurrus_whisper::{TranscribeOptions, Whisper};
    let dir = Set::TinyEn.model_dir();
    let mut w = pollster::block_on(Whisper::load_dir(Box::new(backend(Precision::F16)), &dir)).unwrap();
    let options = TranscribeOptions::default();
    let clips: Vec<Vec<f32>> =
        ["short_1", "short_2", "short_3", "noisy"].iter().map(|c| golden::read_wav(&format!("{c}.wav"))).collect();
    let alone: Vec<_> = clips
        .iter()
        .map(|pcm| pollster::block_on(w.transcribe(pcm, &options, &mut |_| ControlFlow::Continue(()))).unwrap())
        .collect();
    pollster::block_on(w.compile_groups(4, &options)).unwrap();
    let Together { transcripts, steps, windows, encoded } = transcribe_together(&mut w, &clips, &options, |_| {});
    assert_same_transcripts(&transcripts, &alone, 2e-3);
    assert!(windows > steps, "group steps decoded several windows at once: {windows} windows in {steps} steps");
    assert!(encoded >= clips.len(), "the first windows, held until all came, were encoded together: {encoded}");
}

/// The VAD network's probabilities within 1e-4 of onnxruntime's with either precision: with
/// f16 products the network compiles on the f32 variant (`Backend::with_f32_products`), as
/// tensor-core rounding moved them by up to 2e-3.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn vad_matches_onnxruntime() {
    for precision in [Precision::F16, Precision::F32] {
        golden::vad_matches_reference(&backend(precision));
    }
}

/// int8 tiny.en: q8 weights dequantized into scratch before each product, gather and
/// convolution give the reference executor's token ids, with f16 and f32 products.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn int8_transcripts_match_the_reference_executor() {
    for precision in [Precision::F16, Precision::F32] {
        golden::int8_transcripts_match(Some(Box::new(backend(precision))), &golden::SHORT_CLIPS, 0.10);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn golden_transcripts_match_reference_with_f32_products() {
    golden::transcripts_match_reference(Box::new(backend(Precision::F32)), Set::TinyEn, &golden::GPU_RUNS);
    golden::beam_run_matches_up_to_a_near_tie(Box::new(backend(Precision::F32)), 0.001);
    golden::transcripts_match_reference(Box::new(backend(Precision::F32)), Set::Base, &golden::MULTILINGUAL_CLIPS);
}

/// The larger sizes at their real widths (random weights, one layer each side) against the
/// reference executor, with f32 products (`susurrus_testkit::shapes`).
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn real_width_models_match_the_reference() {
    let backend = backend(Precision::F32);
    for arch in [Architecture::Small, Architecture::Medium, Architecture::LargeV3] {
        real_width_model_matches_reference(&backend, arch, 1);
    }
}

/// `y = concat(x, x) + position`: the first run launches step by step, later ones replay the
/// recorded graph, each with its own scalar. Pairs of runs share an input, which the second
/// does not upload again (nothing else is stored in its bytes): the result must still use it.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn replays_see_each_runs_scalars_and_inputs() {
    let mut g = Graph::new("kept");
    let position = g.scalar("position");
    let s = g.read_scalar(position).unwrap();
    let x = g.input("x", TensorType::new(DType::U32, Shape(vec![4]))).unwrap();
    let c = g.concat(&[x, x], 0).unwrap();
    let y = g.binary(susurrus_core::ops::BinaryKind::Add, c, s).unwrap();
    g.output("y", y).unwrap();
    let p = plan(g).unwrap();
    let backend = backend(Precision::F16);
    let mut exe = pollster::block_on(backend.compile(&p, &HashMap::new())).unwrap();
    for run in 0..8u32 {
        let first = run / 2;
        let input = Tensor::u32([4], vec![first, 10, 20, 30]).unwrap();
        let inputs = HashMap::from([("x".to_string(), input)]);
        let scalars = HashMap::from([("position".to_string(), 100 * run)]);
        let out = pollster::block_on(exe.run(&inputs, &scalars, &["y"])).unwrap();
        let want: Vec<u32> = [first, 10, 20, 30, first, 10, 20, 30].iter().map(|v| v + 100 * run).collect();
        assert_eq!(out["y"].as_u32().unwrap(), want.as_slice(), "run {run}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn a_missing_device_is_an_error() {
    let err = CudaBackend::new(&CudaOptions { device: 99, ..CudaOptions::default() }).err().expect("no device 99");
    let text = err.to_string();
    assert!(text.starts_with("backend error: cuda: there is no device 99 (the driver found "), "{text}");
}

/// A plan whose arena is larger than any GPU: compiling it is an error naming the arena.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn memory_the_device_lacks_is_an_error() {
    let mut g = Graph::new("huge");
    let x = g.input("x", TensorType::new(DType::F32, Shape(vec![1 << 20, 1 << 18]))).unwrap();
    let y = g.unary(susurrus_core::ops::UnaryKind::Neg, x).unwrap();
    g.output("y", y).unwrap();
    let p = plan(g).unwrap();
    let backend = backend(Precision::F16);
    let err = pollster::block_on(backend.compile(&p, &HashMap::new())).err().expect("1 TiB does not fit");
    let text = err.to_string();
    assert!(text.contains("cuda: out of device memory allocating") && text.contains("the arena of 'huge'"), "{text}");
    // The device still works afterwards.
    let mut g = Graph::new("small");
    let x = g.input("x", TensorType::new(DType::F32, Shape(vec![3]))).unwrap();
    let y = g.unary(susurrus_core::ops::UnaryKind::Neg, x).unwrap();
    g.output("y", y).unwrap();
    let mut exe = pollster::block_on(backend.compile(&plan(g).unwrap(), &HashMap::new())).unwrap();
    let inputs =
        HashMap::from([("x".to_string(), Tensor::from_f32(DType::F32, Shape(vec![3]), vec![1.0, -2.0, 0.5]).unwrap())]);
    let out = pollster::block_on(exe.run(&inputs, &HashMap::new(), &["y"])).unwrap();
    assert_eq!(out["y"].to_f32(), vec![-1.0, 2.0, -0.5]);
}

/// The kernels are compiled once per cache folder: the first start writes an entry per kernel
/// file, a later start loads them (and runs the same numbers), and an entry the driver
/// refuses is compiled again and replaced.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn kernels_are_compiled_once_and_kept_in_the_cache() {
    let dir = std::env::temp_dir().join(format!("susurrus-cuda-kernels-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = CudaOptions { kernel_cache: Some(dir.clone()), ..CudaOptions::default() };
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default()
    };
    let negate = |backend: &CudaBackend| {
        let mut g = Graph::new("neg");
        let x = g.input("x", TensorType::new(DType::F32, Shape(vec![4]))).unwrap();
        let y = g.unary(susurrus_core::ops::UnaryKind::Neg, x).unwrap();
        g.output("y", y).unwrap();
        let mut exe = pollster::block_on(backend.compile(&plan(g).unwrap(), &HashMap::new())).unwrap();
        let inputs = HashMap::from([("x".to_string(), Tensor::f32([4], vec![1.0, -2.0, 0.5, 3.0]).unwrap())]);
        pollster::block_on(exe.run(&inputs, &HashMap::new(), &["y"])).unwrap()["y"].to_f32()
    };
    let first = Instant::now();
    let backend = CudaBackend::new(&options).unwrap();
    let compiled = first.elapsed();
    assert_eq!(negate(&backend), [-1.0, 2.0, -0.5, -3.0]);
    drop(backend);
    let mut written = entries();
    written.sort();
    assert_eq!(written.len(), susurrus_cuda::lower::SOURCES.len(), "{written:?}");
    let cubin = std::fs::read(&written[0]).unwrap();
    assert!(cubin.starts_with(b"\x7fELF"), "the entry is not a CUBIN");
    let second = Instant::now();
    let backend = CudaBackend::new(&options).unwrap();
    println!("open with NVRTC: {compiled:.2?}; from the cache: {:.2?}", second.elapsed());
    assert_eq!(negate(&backend), [-1.0, 2.0, -0.5, -3.0]);
    drop(backend);
    // A damaged entry: compiled again, replaced by the module.
    std::fs::write(&written[0], "not a module").unwrap();
    let backend = CudaBackend::new(&options).unwrap();
    assert_eq!(negate(&backend), [-1.0, 2.0, -0.5, -3.0]);
    assert_eq!(std::fs::read(&written[0]).unwrap(), cubin);
    std::fs::remove_dir_all(&dir).unwrap();
}
