//! The op harness in a real browser: every op case runs on WebGPU (headless Chromium; on the
//! CI machine its SwiftShader adapter) and must match the reference interpreter, compiled to
//! wasm and run in the same page. Run with `wasm-pack test --headless --chrome`.
#![cfg(target_arch = "wasm32")]

use susurrus_core::exec::Backend;
use susurrus_core::exec::wgpu::{WgpuBackend, WgpuOptions};
use susurrus_testkit::{CaseReport, check_backend_async, op_cases, summary_table};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn every_op_matches_the_reference_on_webgpu() {
    let backend = WgpuBackend::new().await.unwrap_or_else(|e| panic!("no WebGPU: {e}"));
    let cases = op_cases(0).unwrap_or_else(|e| panic!("{e}"));
    let mut reports: Vec<CaseReport> = Vec::with_capacity(cases.len());
    for case in &cases {
        reports.push(check_backend_async(&backend, case).await);
    }
    let failures: Vec<String> = reports.iter().filter(|r| !r.passed()).map(|r| r.to_string()).collect();
    wasm_bindgen_test::console_log!("{} on {}\n{}", backend.name(), backend.adapter(), summary_table(&reports));
    assert!(failures.is_empty(), "{} case(s) failed on WebGPU:\n{}", failures.len(), failures.join("\n"));
}

/// The kernels written for GPUs, which a browser with a hardware adapter runs, compiled by
/// Chromium's WGSL compiler (Tint) and checked on SwiftShader like the CPU-adapter variants.
#[wasm_bindgen_test]
async fn every_op_matches_the_reference_with_the_gpu_kernels() {
    let options = WgpuOptions { force_gpu_kernels: true, ..WgpuOptions::default() };
    let backend = WgpuBackend::with_options(&options).await.unwrap_or_else(|e| panic!("no WebGPU: {e}"));
    let cases = op_cases(1).unwrap_or_else(|e| panic!("{e}"));
    let mut reports: Vec<CaseReport> = Vec::with_capacity(cases.len());
    for case in &cases {
        reports.push(check_backend_async(&backend, case).await);
    }
    let failures: Vec<String> = reports.iter().filter(|r| !r.passed()).map(|r| r.to_string()).collect();
    wasm_bindgen_test::console_log!("{} on {}\n{}", backend.name(), backend.adapter(), summary_table(&reports));
    assert!(failures.is_empty(), "{} case(s) failed with the GPU kernels:\n{}", failures.len(), failures.join("\n"));
}
