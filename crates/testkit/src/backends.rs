//! The backends the suites run on, behind the core's [`Backend`] trait, and
//! [`for_each_backend!`](crate::for_each_backend): one test per backend from one body.
//!
//! Code below the backends (the model crate's own tests) reaches them only through here, so it
//! never names a backend type and Cargo keeps the model crate free of any backend; the
//! conformance suite (`crates/testkit/tests/conformance.rs`) runs the op cases and the golden
//! clips on every backend of the build through the same functions.

use susurrus_core::exec::Backend;
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_cpu::FastCpuBackend;
use susurrus_wgpu::{WgpuBackend, WgpuOptions};

/// The core's plain reference executor: the oracle every other backend is compared with.
pub fn reference() -> Box<dyn Backend> {
    Box::new(CpuBackend::new())
}

/// The fast SIMD CPU backend on every core.
pub fn fast_cpu() -> Box<dyn Backend> {
    Box::new(FastCpuBackend::new(None).expect("the fast CPU backend"))
}

/// wgpu on whatever adapter the machine has (Mesa's lavapipe in CI), with its defaults.
pub fn wgpu() -> Box<dyn Backend> {
    Box::new(wgpu_with(&WgpuOptions::default()))
}

/// wgpu with its defaults, and a switch that destroys its device as a driver reset would, for
/// the device-loss tests that lose it in the middle of a transcription (the model holds the
/// backend by then).
pub fn wgpu_and_its_loss() -> (Box<dyn Backend>, Box<dyn Fn()>) {
    let backend = wgpu_with(&WgpuOptions::default());
    let device = backend.device().clone();
    (Box::new(backend), Box::new(move || device.destroy()))
}

/// wgpu with `options` (a kernel family, a buffer limit), as its concrete type for the checks
/// that ask the adapter what it has.
pub fn wgpu_with(options: &WgpuOptions) -> WgpuBackend {
    pollster::block_on(WgpuBackend::with_options(options)).unwrap_or_else(|e| panic!("wgpu: {e}"))
}

/// One `#[test]` per backend from one body: `for_each_backend!(fn name(backend) { ... })`
/// makes a module `name` with the tests `reference` and `wgpu`, each binding `backend` to a
/// `Box<dyn Backend>` of its kind; `for_each_backend!([reference, fast_cpu] fn name(b) {..})`
/// names the backends (functions of [`backends`](crate::backends)).
#[macro_export]
macro_rules! for_each_backend {
    ($(#[$m:meta])* fn $name:ident($backend:ident) $body:block) => {
        $crate::for_each_backend!([reference, wgpu] $(#[$m])* fn $name($backend) $body);
    };
    ([$($kind:ident),+] $(#[$m:meta])* fn $name:ident($backend:ident) $body:block) => {
        $(#[$m])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $kind() {
                    let $backend: Box<dyn susurrus_core::exec::Backend> = $crate::backends::$kind();
                    $body
                }
            )+
        }
    };
}
