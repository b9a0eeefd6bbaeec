//! Softmax over the last axis, computed stably (subtracting the row maximum) in f32.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::TensorType;
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Softmax;

impl OpKind for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("softmax", inputs.len(), 1)?;
        let x = inputs[0];
        if !x.dtype.is_float() || x.shape.rank() == 0 || x.shape.last() == 0 {
            return Err(Error::shape("softmax", format!("needs a float tensor with a non-empty last axis, got {x}")));
        }
        Ok(x.clone())
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("softmax", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
