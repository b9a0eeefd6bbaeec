//! The fast CPU backend's own options: on one thread it still matches the reference
//! interpreter (the conformance suite, `crates/testkit/tests/conformance`, runs every op case
//! and the golden clips on all cores), and no threads at all is refused with a clear error.

#![cfg(not(target_arch = "wasm32"))]

use susurrus_cpu::FastCpuBackend;
use susurrus_testkit::{check_backend, op_cases};

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
