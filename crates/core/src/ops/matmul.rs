//! Batched matrix multiply: `a [..., M, K] x b [..., K, N] -> [..., M, N]`, or with
//! `transpose_b`, `b [..., N, K]` (weights stored `[out, in]`). Batch dimensions broadcast
//! numpy-style, so a 2-D weight serves every batch. Accumulates in f32; the output has `a`'s
//! dtype, so f16 weights can multiply f32 activations.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct MatMul {
    pub transpose_b: bool,
}

/// The output type of `a x b` (shared with the fused matmul + bias).
pub(crate) fn matmul_type(op: &str, a: &TensorType, b: &TensorType, transpose_b: bool) -> Result<TensorType> {
    if !a.dtype.is_float() || !b.dtype.is_float() || a.shape.rank() < 2 || b.shape.rank() < 2 {
        return Err(Error::shape(op, format!("needs float operands of rank >= 2, got {a} and {b}")));
    }
    let (ra, rb) = (a.shape.rank(), b.shape.rank());
    let (m, k) = (a.shape.dims()[ra - 2], a.shape.dims()[ra - 1]);
    let (kb, n) = if transpose_b {
        (b.shape.dims()[rb - 1], b.shape.dims()[rb - 2])
    } else {
        (b.shape.dims()[rb - 2], b.shape.dims()[rb - 1])
    };
    if k != kb {
        return Err(Error::shape(
            op,
            format!("inner dimensions differ: {a} x {b}{} ({k} vs {kb})", if transpose_b { "^T" } else { "" }),
        ));
    }
    let batch = Shape::broadcast(&Shape::from(&a.shape.dims()[..ra - 2]), &Shape::from(&b.shape.dims()[..rb - 2]))
        .ok_or_else(|| Error::shape(op, format!("batch dimensions of {a} and {b} do not broadcast")))?;
    let mut dims = batch.0;
    dims.extend([m, n]);
    Ok(TensorType::new(a.dtype, Shape(dims)))
}

impl OpKind for MatMul {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn attrs(&self) -> String {
        if self.transpose_b { "transpose_b".into() } else { String::new() }
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("matmul", inputs.len(), 2)?;
        matmul_type("matmul", inputs[0], inputs[1], self.transpose_b)
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("matmul", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
