//! Constant folding: a node whose inputs are all constants becomes a constant, computed once
//! at compile time with the op's CPU reference.
//!
//! Results larger than [`MAX_FOLDED_ELEMENTS`] are left alone: folding a broadcast would
//! otherwise trade a cheap kernel for a large upload.

use std::collections::HashMap;

use super::Pass;
use crate::error::Result;
use crate::ir::Graph;
use crate::ops::{Const, EvalCtx, Op};

/// The largest constant (in elements) folding may create.
pub const MAX_FOLDED_ELEMENTS: usize = 1 << 20;

pub struct ConstantFolding;

impl Pass for ConstantFolding {
    fn name(&self) -> &'static str {
        "fold"
    }

    fn run(&self, g: &mut Graph) -> Result<bool> {
        let empty = HashMap::new();
        let ctx = EvalCtx { inputs: &empty, weights: &empty, states: &empty, scalars: &[] };
        let mut changed = false;
        for id in g.ids() {
            let node = g.node(id);
            if node.op.is_leaf() || node.op.has_side_effects() || node.ty.numel() > MAX_FOLDED_ELEMENTS {
                continue;
            }
            let args: Option<Vec<_>> = node
                .inputs
                .iter()
                .map(|&i| match &g.node(i).op {
                    Op::Const(c) => Some(c.value.clone()),
                    _ => None,
                })
                .collect();
            let Some(args) = args else { continue };
            let refs: Vec<_> = args.iter().map(|a| a.as_ref()).collect();
            let value = node.op.eval(&refs, &ctx)?;
            g.replace(id, Const::new(value), &[])?;
            changed = true;
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};
    use crate::passes::testing::run_and_compare;
    use crate::tensor::Tensor;

    #[test]
    fn folds_constant_subexpressions() {
        let mut g = Graph::new("fold");
        let x = g.input("x", TensorType::new(DType::F32, [2])).unwrap();
        let c1 = g.constant(Tensor::f32([2], vec![1.0, 2.0]).unwrap());
        let c2 = g.constant(Tensor::f32([2], vec![3.0, 4.0]).unwrap());
        let s = g.add(c1, c2).unwrap();
        let m = g.mul(s, x).unwrap();
        g.output("y", m).unwrap();
        let (after, changed) = run_and_compare(&ConstantFolding, &g, 0.0);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph fold {\n  %0 = input \"x\" : f32[2]\n  %1 = const [1, 2] : f32[2]\n  %2 = const [3, 4] : f32[2]\n  \
             %3 = const [4, 6] : f32[2]\n  %4 = mul(%3, %0) : f32[2]\n  outputs: y=%4\n}"
        );
    }

    #[test]
    fn leaves_runtime_values_and_big_results_alone() {
        let mut g = Graph::new("fold");
        let x = g.input("x", TensorType::new(DType::F32, [2])).unwrap();
        let c = g.constant(Tensor::f32([2], vec![1.0, 2.0]).unwrap());
        let y = g.add(c, x).unwrap();
        let one = g.constant(Tensor::scalar_f32(1.0));
        let zeros = g.constant(Tensor::zeros(&TensorType::new(DType::F32, [MAX_FOLDED_ELEMENTS + 1])));
        let big = g.add(zeros, one).unwrap();
        g.output("y", y).unwrap();
        g.output("big", big).unwrap();
        let before = g.to_string();
        assert!(!ConstantFolding.run(&mut g).unwrap());
        assert_eq!(g.to_string(), before);
    }
}
