//! `scalar`: the value of a runtime scalar (e.g. the decode position) as a u32 tensor.
//!
//! Runtime scalars change every run without recompiling; backends pass them to kernels
//! through a small per-run uniform.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::exec::wgpu::{KernelCtx, KernelSpec, Lowering};
use crate::ir::{DType, ScalarId, Shape, TensorType};
use crate::tensor::Tensor;

crate::kernel_params! {
    /// Which runtime scalar a `scalar` kernel reads.
    pub struct ScalarParams {
        pub index: u32,
    }
}

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
    /// One thread copies the scalar from the run's uniform. The index is a parameter rather
    /// than a `define`, so reads of different scalars share one pipeline.
    fn kernel(&self, _ctx: &KernelCtx) -> Result<Lowering> {
        let params = ScalarParams { index: self.scalar.0 };
        let spec = KernelSpec::new("scalar", include_str!("../../../../kernels/scalar.wgsl"), &params).groups(1, 1, 1);
        Ok(Lowering::Kernel(spec))
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
