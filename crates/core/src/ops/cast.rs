//! Convert to another dtype: floats round to nearest for f16; float to integer truncates
//! toward zero and saturates (NaN becomes 0), as Rust's `as` does.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{DType, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Cast {
    pub to: DType,
}

impl OpKind for Cast {
    fn name(&self) -> &'static str {
        "cast"
    }
    fn attrs(&self) -> String {
        format!("to={}", self.to)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("cast", inputs.len(), 1)?;
        Ok(TensorType::new(self.to, inputs[0].shape.clone()))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("cast", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}
