//! Gather rows of a table (embedding lookup): `table [V, D...]`, `ids [N...]` (i32 or u32)
//! -> `[N..., D...]`. An id outside `0..V` is a run-time error.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Gather;

impl OpKind for Gather {
    fn name(&self) -> &'static str {
        "gather"
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("gather", inputs.len(), 2)?;
        let (table, ids) = (inputs[0], inputs[1]);
        if table.shape.rank() == 0 || !ids.dtype.is_int() {
            return Err(Error::shape(
                "gather",
                format!("needs a table of rank >= 1 and integer ids, got {table} and {ids}"),
            ));
        }
        let mut dims = ids.shape.dims().to_vec();
        dims.extend_from_slice(&table.shape.dims()[1..]);
        Ok(TensorType::new(table.dtype, Shape(dims)))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("gather", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
