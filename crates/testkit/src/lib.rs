//! The Susurrus test kit (a dev-dependency of every crate's tests): the op harness, the
//! golden Whisper checks on the real model, seeded random tensors and a small random Whisper.
//!
//! The op harness runs every op on every backend, on random shapes, against the CPU reference.
//! [`op_cases`] builds, from a seed, small graphs for every op of the registry (primitives
//! and the fused ops passes emit) with random shapes, data and a per-op [`Tolerance`]; each
//! op has its cases in its family's file of [`cases`];
//! [`check_backend_async`] (or [`check_backend`] natively) runs one on a backend through the
//! real plan / compile / run path and compares every output and written state with
//! [`susurrus_core::ir::evaluate`]. It lives in the library, not in a test, so every backend (the CPU
//! executor, wgpu natively and in the browser, CUDA) runs the same cases with one loop.
//! [`golden`] holds the checks of the real models (tiny.en, multilingual base) against the
//! committed reference fixtures, shared by the conformance suite and the command's tests; [`shapes`]
//! runs random-weight models at the real widths of the larger sizes on any backend; [`signal`]
//! compares decoded audio with its references.

#[cfg(not(target_arch = "wasm32"))]
pub mod backends;
#[cfg(not(target_arch = "wasm32"))]
pub mod batch;
pub mod cases;
pub mod check;
pub mod compare;
#[cfg(not(target_arch = "wasm32"))]
pub mod golden;
pub mod random;
pub mod shapes;
pub mod signal;
pub mod whisper;

pub use cases::{CaseRun, OpCase, op_cases};
#[cfg(not(target_arch = "wasm32"))]
pub use check::check_backend;
pub use check::{CaseReport, check_backend_async, summary_table};
pub use compare::{Diff, Tolerance, compare};
pub use random::{Dist, random_inputs, random_tensor, random_tensor_with, random_weights};
