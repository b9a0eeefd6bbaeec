//! Reshape to a shape with the same element count. Tensors are contiguous, so this is a view:
//! the planner gives the output the input's storage and backends run nothing.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Reshape {
    pub shape: Shape,
}

impl OpKind for Reshape {
    fn name(&self) -> &'static str {
        "reshape"
    }
    fn attrs(&self) -> String {
        format!("to={}", self.shape)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("reshape", inputs.len(), 1)?;
        let x = inputs[0];
        if x.numel() != self.shape.numel() {
            return Err(Error::shape(
                "reshape",
                format!("cannot reshape {x} ({} elements) to {}", x.numel(), self.shape),
            ));
        }
        Ok(TensorType::new(x.dtype, self.shape.clone()))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("reshape", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Alias
    }
}
