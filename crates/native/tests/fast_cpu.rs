//! The fast CPU backend against the references: every op case of the core's harness (the
//! reference interpreter computes the expected values) and every golden clip token for token
//! against faster-whisper's transcripts (the same checks the core runs on its executors).

use susurrus_testkit::golden::{self, Set};

use susurrus_native::cpu::FastCpuBackend;
use susurrus_testkit::shapes::real_width_model_matches_reference;
use susurrus_testkit::whisper::Architecture;
use susurrus_testkit::{CaseReport, check_backend, op_cases, summary_table};

#[test]
fn every_op_case_matches_the_reference() {
    let backend = FastCpuBackend::new(None).unwrap();
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

#[test]
fn one_thread_matches_the_reference_too() {
    let backend = FastCpuBackend::new(Some(1)).unwrap();
    let cases = op_cases(7).unwrap();
    let failed: Vec<String> =
        cases.iter().map(|case| check_backend(&backend, case)).filter(|r| !r.passed()).map(|r| r.to_string()).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn zero_threads_is_refused() {
    let err = FastCpuBackend::new(Some(0)).err().unwrap();
    assert_eq!(err.to_string(), "invalid option: --threads must be at least 1");
}

#[test]
fn golden_transcripts_match_reference() {
    golden::transcripts_match_reference(Box::new(FastCpuBackend::new(None).unwrap()), Set::TinyEn, &golden::CLIPS);
}

#[test]
fn vad_matches_onnxruntime() {
    golden::vad_matches_reference(&FastCpuBackend::new(None).unwrap());
}

#[test]
fn multilingual_golden_transcripts_match_reference() {
    let backend = Box::new(FastCpuBackend::new(None).unwrap());
    golden::transcripts_match_reference(backend, Set::Base, &golden::MULTILINGUAL_CLIPS);
}

/// int8 tiny.en (CTranslate2's quantization): the int8 dot products, dequantizing gathers and
/// convolutions give the reference executor's token ids, within 10% of the f16 words.
#[test]
fn int8_transcripts_match_the_reference_executor() {
    let backend = Box::new(FastCpuBackend::new(None).unwrap());
    golden::int8_transcripts_match(Some(backend), &golden::SHORT_CLIPS, 0.10);
}

/// The larger sizes at their real widths (random weights, one layer each side) against the
/// reference executor (`susurrus_testkit::shapes`).
#[test]
fn real_width_models_match_the_reference() {
    let backend = FastCpuBackend::new(None).unwrap();
    for arch in [Architecture::Small, Architecture::Medium, Architecture::LargeV3] {
        real_width_model_matches_reference(&backend, arch, 1);
    }
}
