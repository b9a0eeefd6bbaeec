//! Reductions over one axis: sum, mean, max. Floats accumulate in f32.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
}

impl ReduceKind {
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Mean => "reduce_mean",
            ReduceKind::Max => "reduce_max",
        }
    }
}

/// Reduces `axis`; with `keep_dim` the axis stays with size 1, else it is removed.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub axis: usize,
    pub keep_dim: bool,
}

impl OpKind for Reduce {
    fn name(&self) -> &'static str {
        self.kind.name()
    }
    fn attrs(&self) -> String {
        format!("axis={} keep_dim={}", self.axis, self.keep_dim)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity(self.name(), inputs.len(), 1)?;
        let x = inputs[0];
        if !x.dtype.is_float() {
            return Err(Error::shape(self.name(), format!("needs a float tensor, got {x}")));
        }
        if self.axis >= x.shape.rank() || x.shape.dims()[self.axis] == 0 {
            return Err(Error::shape(self.name(), format!("axis {} is out of range or empty for {x}", self.axis)));
        }
        let mut dims = x.shape.dims().to_vec();
        if self.keep_dim {
            dims[self.axis] = 1;
        } else {
            dims.remove(self.axis);
        }
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime(self.name(), "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
