//! Layer norm over the last axis: `(x - mean) / sqrt(var + eps) * gamma + beta`, with the
//! biased variance, in f32.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::TensorType;
use crate::tensor::Tensor;

/// Inputs: `x [..., D]`, `gamma [D]`, `beta [D]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    pub eps: f32,
}

/// Checks `x [..., D]`, `gamma [D]`, `beta [D]`; shared with the fused add + layer norm.
pub(crate) fn check_norm_params(op: &str, x: &TensorType, gamma: &TensorType, beta: &TensorType) -> Result<()> {
    let d = x.shape.last();
    if !x.dtype.is_float() || x.shape.rank() == 0 || d == 0 {
        return Err(Error::shape(op, format!("needs a float tensor with a non-empty last axis, got {x}")));
    }
    for (what, p) in [("gamma", gamma), ("beta", beta)] {
        if !p.dtype.is_float() || p.shape.dims() != [d] {
            return Err(Error::shape(op, format!("{what} must be a float [{d}] for input {x}, got {p}")));
        }
    }
    Ok(())
}

impl OpKind for LayerNorm {
    fn name(&self) -> &'static str {
        "layer_norm"
    }
    fn attrs(&self) -> String {
        format!("eps={}", self.eps)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("layer_norm", inputs.len(), 3)?;
        check_norm_params("layer_norm", inputs[0], inputs[1], inputs[2])?;
        Ok(inputs[0].clone())
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("layer_norm", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
