//! Concatenate one or more tensors of one dtype along an axis.

use super::{EvalCtx, Memory, OpKind};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Concat {
    pub axis: usize,
}

impl OpKind for Concat {
    fn name(&self) -> &'static str {
        "concat"
    }
    fn attrs(&self) -> String {
        format!("axis={}", self.axis)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        let first = inputs.first().ok_or_else(|| Error::shape("concat", "needs at least one input"))?;
        if self.axis >= first.shape.rank() {
            return Err(Error::shape("concat", format!("axis {} is out of range for {first}", self.axis)));
        }
        let mut dims = first.shape.dims().to_vec();
        dims[self.axis] = 0;
        for t in inputs {
            let same_other_dims = t.shape.rank() == dims.len()
                && t.shape
                    .dims()
                    .iter()
                    .zip(first.shape.dims())
                    .enumerate()
                    .all(|(i, (a, b))| i == self.axis || a == b);
            if t.dtype != first.dtype || !same_other_dims {
                return Err(Error::shape("concat", format!("{t} does not match {first} outside axis {}", self.axis)));
            }
            dims[self.axis] += t.shape.dims()[self.axis];
        }
        Ok(TensorType::new(first.dtype, Shape(dims)))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("concat", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
