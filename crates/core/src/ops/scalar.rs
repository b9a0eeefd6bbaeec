//! `scalar`: the value of a runtime scalar (e.g. the decode position) as a u32 tensor.
//!
//! Runtime scalars change every run without recompiling; backends pass them to kernels
//! through a small per-run uniform.

use rand::Rng;

use super::CmpKind;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::harness::Tolerance;
use crate::harness::cases::{CaseGen, ODD};
use crate::ir::{DType, Graph, ScalarId, Shape, TensorType};
use crate::tensor::{Tensor, Weights};

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

/// Harness cases: the runtime scalar read on its own, and as an operand of a comparison (how a
/// decoder masks positions past the current one), each over two runs with different values.
pub(crate) fn harness_cases(cases: &mut CaseGen) -> Result<()> {
    let mut g = Graph::new("scalar");
    let pos = g.scalar("pos");
    let s = g.read_scalar(pos)?;
    g.output("pos", s)?;
    let values = [cases.rng.random_range(0..8), cases.rng.random_range(8..100_000)];
    let runs = values.iter().map(|&v| cases.run(&g, &[], &[("pos", v)])).collect::<Result<Vec<_>>>()?;
    let runs = runs.into_iter().map(|(r, _)| r).collect();
    cases.push_runs("scalar", "scalar", g, Tolerance::Exact, Weights::new(), runs);

    let n = cases.pick(&ODD);
    let mut g = Graph::new("scalar");
    let pos = g.scalar("pos");
    let s = g.read_scalar(pos)?;
    let iota = g.constant(Tensor::u32([n], (0..n as u32).collect())?);
    let mask = g.compare(CmpKind::Lt, iota, s)?;
    g.output("mask", mask)?;
    let values = [cases.rng.random_range(0..=n as u32), cases.rng.random_range(0..=n as u32)];
    let runs = values.iter().map(|&v| cases.run(&g, &[], &[("pos", v)])).collect::<Result<Vec<_>>>()?;
    let runs = runs.into_iter().map(|(r, _)| r).collect();
    cases.push_runs("scalar", "scalar in lt", g, Tolerance::Exact, Weights::new(), runs);
    Ok(())
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
