//! Susurrus core: a small graph compiler and runtime for Whisper.
//!
//! Pipeline (folders in this order):
//! `ir` (graph, builder, verifier, printer) -> `ops` (one file per op) -> `passes` (dce,
//! folding, fusion) -> `plan` (schedule + arena memory plan) -> `exec` (backends: the CPU
//! reference executor here, wgpu and others plug into the same trait).

pub mod demo;
pub mod error;
pub mod exec;
pub mod harness;
pub mod ir;
pub mod ops;
pub mod passes;
pub mod plan;
pub mod tensor;
pub mod whisper;

pub use error::{Error, Result};
pub use ir::{DType, Graph, NodeId, ScalarId, Shape, TensorType};
pub use tensor::{Tensor, TensorData};
