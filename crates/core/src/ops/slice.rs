//! Slice `start..end` (step 1) along one axis.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    pub axis: usize,
    pub start: usize,
    pub end: usize,
}

impl OpKind for Slice {
    fn name(&self) -> &'static str {
        "slice"
    }
    fn attrs(&self) -> String {
        format!("axis={} {}..{}", self.axis, self.start, self.end)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("slice", inputs.len(), 1)?;
        let x = inputs[0];
        if self.axis >= x.shape.rank() || self.start > self.end || self.end > x.shape.dims()[self.axis] {
            return Err(Error::shape(
                "slice",
                format!("{}..{} on axis {} is out of range for {x}", self.start, self.end, self.axis),
            ));
        }
        let mut dims = x.shape.dims().to_vec();
        dims[self.axis] = self.end - self.start;
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("slice", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
