//! Fused residual add + layer norm: `layer_norm(a + b, gamma, beta)` for same-shaped `a`, `b`.
//! Emitted by the fusion pass when the sum feeds only the norm.

use super::layer_norm::check_norm_params;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::TensorType;
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct AddLayerNorm {
    pub eps: f32,
}

impl OpKind for AddLayerNorm {
    fn name(&self) -> &'static str {
        "add_layer_norm"
    }
    fn attrs(&self) -> String {
        format!("eps={}", self.eps)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("add_layer_norm", inputs.len(), 4)?;
        if inputs[0] != inputs[1] {
            return Err(Error::shape(
                "add_layer_norm",
                format!("operands must have one type, got {} and {}", inputs[0], inputs[1]),
            ));
        }
        check_norm_params("add_layer_norm", inputs[0], inputs[2], inputs[3])?;
        Ok(inputs[0].clone())
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("add_layer_norm", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
