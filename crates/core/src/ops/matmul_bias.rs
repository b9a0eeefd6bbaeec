//! Fused matmul + bias (+ GELU): `act(a x b + bias)` with `bias [N]` added to every row.
//! Emitted by the matmul fusion pass; the linear layers of Whisper are all this op.

use super::matmul::matmul_type;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::TensorType;
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct MatMulBias {
    pub transpose_b: bool,
    /// Apply GELU (erf form) after the bias.
    pub gelu: bool,
}

impl OpKind for MatMulBias {
    fn name(&self) -> &'static str {
        "matmul_bias"
    }
    fn attrs(&self) -> String {
        let mut a = Vec::new();
        if self.transpose_b {
            a.push("transpose_b");
        }
        if self.gelu {
            a.push("gelu");
        }
        a.join(" ")
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("matmul_bias", inputs.len(), 3)?;
        let out = matmul_type("matmul_bias", inputs[0], inputs[1], self.transpose_b)?;
        let bias = inputs[2];
        if !bias.dtype.is_float() || bias.shape.dims() != [out.shape.last()] {
            return Err(Error::shape(
                "matmul_bias",
                format!("bias must be a float [{}], got {bias}", out.shape.last()),
            ));
        }
        Ok(out)
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("matmul_bias", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
