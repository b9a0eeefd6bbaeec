//! `scalar`: the value of a runtime scalar (e.g. the decode position) as a u32 tensor.
//!
//! Runtime scalars change every run without recompiling; backends pass them to kernels
//! through a small per-run uniform.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{DType, ScalarId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct ScalarRead {
    pub scalar: ScalarId,
}

impl OpKind for ScalarRead {
    fn name(&self) -> &'static str {
        "scalar"
    }
    fn attrs(&self) -> String {
        format!("#{}", self.scalar.0)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("scalar", inputs.len(), 0)?;
        Ok(TensorType::new(DType::U32, Shape::scalar()))
    }
    fn eval(&self, _: &[&Tensor], ctx: &EvalCtx) -> Result<Tensor> {
        let v = ctx
            .scalars
            .get(self.scalar.index())
            .ok_or_else(|| Error::BadArgument(format!("runtime scalar #{} was not supplied", self.scalar.0)))?;
        Tensor::u32(Shape::scalar(), vec![*v])
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::ir::Graph;

    #[test]
    fn reads_the_runs_value() {
        let mut g = Graph::new("t");
        let pos = g.scalar("pos");
        let s = g.read_scalar(pos).unwrap();
        assert_eq!(g.ty(s), &TensorType::new(DType::U32, Shape::scalar()));
        let empty = HashMap::new();
        let ctx = EvalCtx { inputs: &empty, weights: &empty, states: &empty, scalars: &[7] };
        let op = ScalarRead { scalar: pos };
        assert_eq!(op.eval(&[], &ctx).unwrap().as_u32(), Some(&[7u32][..]));
        let none = EvalCtx { scalars: &[], ..ctx };
        assert!(op.eval(&[], &none).is_err());
        assert!(g.read_scalar(ScalarId(5)).is_err());
    }
}
