//! `where(cond, a, b)`: elementwise choice with broadcasting; `cond` is any integer tensor
//! (non-zero picks `a`).

use super::binary::broadcast_same_dtype;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Select;

impl OpKind for Select {
    fn name(&self) -> &'static str {
        "where"
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("where", inputs.len(), 3)?;
        let cond = inputs[0];
        if !cond.dtype.is_int() {
            return Err(Error::shape("where", format!("condition must be an integer mask, got {cond}")));
        }
        let ab = broadcast_same_dtype("where", inputs[1], inputs[2])?;
        let shape = Shape::broadcast(&cond.shape, &ab)
            .ok_or_else(|| Error::shape("where", format!("condition {} does not broadcast with {ab}", cond.shape)))?;
        Ok(TensorType::new(inputs[1].dtype, shape))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("where", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}
