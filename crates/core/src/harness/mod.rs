//! The op harness: every op on every backend, on random shapes, against the CPU reference.
//!
//! [`op_cases`] builds, from a seed, small graphs for every op of the registry (primitives
//! and the fused ops passes emit) with random shapes, data and a per-op [`Tolerance`]; each
//! op file writes its own cases with the toolkit in [`cases`];
//! [`check_backend_async`] (or [`check_backend`] natively) runs one on a backend through the
//! real plan / compile / run path and compares every output and written state with
//! [`crate::ir::evaluate`]. It lives in the library, not in a test, so every backend (the CPU
//! executor, wgpu natively and in the browser, CUDA) runs the same cases with one loop.
//! The random helpers are shared with the pass tests.

pub mod cases;
pub mod check;
pub mod compare;
pub mod random;
pub mod whisper;

pub use cases::{CaseRun, OpCase, op_cases};
#[cfg(not(target_arch = "wasm32"))]
pub use check::check_backend;
pub use check::{CaseReport, check_backend_async, summary_table};
pub use compare::{Diff, Tolerance, compare};
pub use random::{Dist, random_inputs, random_tensor, random_tensor_with, random_weights};
