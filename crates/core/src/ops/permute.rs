//! Permute axes: output axis `i` is input axis `perm[i]` (a copy into the new layout).

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Permute {
    pub perm: Vec<usize>,
}

impl OpKind for Permute {
    fn name(&self) -> &'static str {
        "permute"
    }
    fn attrs(&self) -> String {
        format!("perm={:?}", self.perm)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("permute", inputs.len(), 1)?;
        let x = inputs[0];
        let mut seen = vec![false; x.shape.rank()];
        let valid = self.perm.len() == x.shape.rank()
            && self.perm.iter().all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
        if !valid {
            return Err(Error::shape("permute", format!("{:?} is not a permutation of the axes of {x}", self.perm)));
        }
        let dims = self.perm.iter().map(|&p| x.shape.dims()[p]).collect();
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("permute", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
