//! Index of the largest value along an axis (the axis is removed), as u32. Ties pick the
//! first index; NaN is treated as larger than every number.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{DType, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Argmax {
    pub axis: usize,
}

impl OpKind for Argmax {
    fn name(&self) -> &'static str {
        "argmax"
    }
    fn attrs(&self) -> String {
        format!("axis={}", self.axis)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("argmax", inputs.len(), 1)?;
        let x = inputs[0];
        if self.axis >= x.shape.rank() || x.shape.dims()[self.axis] == 0 {
            return Err(Error::shape("argmax", format!("axis {} is out of range or empty for {x}", self.axis)));
        }
        let mut dims = x.shape.dims().to_vec();
        dims.remove(self.axis);
        Ok(TensorType::new(DType::U32, Shape(dims)))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("argmax", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
