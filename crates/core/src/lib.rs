//! Susurrus core: a small graph compiler and runtime (Whisper lives in its own crate on top).
//!
//! Pipeline (modules in this order; a module imports only those before it):
//! `tensor` -> `ir` (graph, builder, verifier, printer) and `ops` (one file per op: semantics
//! only) -> `passes` (dce, folding, fusion) -> `plan` (schedule + arena memory plan) -> `exec`
//! (the backend trait, the link layer that decides where every value lives, and the CPU
//! reference executor). The GPU backends and the fast CPU backend are crates of their own
//! (`susurrus-wgpu`, `susurrus-cuda`, `susurrus-cpu`) on this trait: no GPU stack is compiled
//! into this crate.

pub mod error;
pub mod tensor;

pub mod ir;
pub mod ops;

pub mod passes;
pub mod plan;

pub mod exec;

pub use error::{Error, Result};
pub use ir::{DType, Graph, NodeId, ScalarId, Shape, TensorType};
pub use tensor::{Tensor, TensorData};
