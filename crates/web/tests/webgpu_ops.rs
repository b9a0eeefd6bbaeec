//! The op harness in a real browser: every op case runs on WebGPU (headless Chromium; on the
//! CI machine its SwiftShader adapter) and on the fast CPU backend compiled to wasm (its
//! SIMD128 kernels exist only there), and must match the reference interpreter, compiled to
//! wasm and run in the same page. Run with `wasm-pack test --headless --chrome`.
#![cfg(target_arch = "wasm32")]

use half::f16;
use susurrus_core::exec::Backend;
use susurrus_cpu::FastCpuBackend;
use susurrus_cpu::simd::{dot_f16, f16_to_f32};
use susurrus_testkit::{CaseReport, check_backend_async, op_cases, summary_table};
use susurrus_wgpu::{WgpuBackend, WgpuOptions};
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

/// The browser's CPU path: the fast CPU backend's wasm kernels (the SIMD128 products and f16
/// rows), two seeds of cases as the native suite runs four.
#[wasm_bindgen_test]
async fn every_op_matches_the_reference_on_the_cpu_backend() {
    let backend = FastCpuBackend::new(Some(1)).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    for seed in [0, 1] {
        let cases = op_cases(seed).unwrap_or_else(|e| panic!("{e}"));
        let mut reports: Vec<CaseReport> = Vec::with_capacity(cases.len());
        for case in &cases {
            reports.push(check_backend_async(&backend, case).await);
        }
        failures.extend(reports.iter().filter(|r| !r.passed()).map(|r| format!("seed {seed}: {r}")));
    }
    assert!(failures.is_empty(), "{} case(s) failed on the CPU backend:\n{}", failures.len(), failures.join("\n"));
}

/// Decoder steps' f16 dot product takes a shortcut for finite weights: every one of the 65536
/// f16 values, as a weight row of 16 (the SIMD width) against `[1, 0, ...]`, gives the value
/// (0 x inf is NaN, so an infinity or a NaN gives NaN), as the exact branch-free conversion.
#[wasm_bindgen_test]
fn f16_dot_products_read_every_f16_value() {
    let mut x = [0.0f32; 16];
    x[0] = 1.0;
    let wrong: Vec<String> = (0..=u16::MAX)
        .map(f16::from_bits)
        .filter_map(|v| {
            let got = dot_f16(&x, &[v; 16]);
            let want = f16_to_f32(v);
            let ok = if want.is_finite() { got == want } else { got.is_nan() };
            (!ok).then(|| format!("{:#06x}: {got}, want {want}", v.to_bits()))
        })
        .collect();
    assert!(wrong.is_empty(), "{} f16 values read wrong, the first: {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
}
