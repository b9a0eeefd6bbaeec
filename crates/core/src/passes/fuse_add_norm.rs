//! Residual add + layer norm fusion: `layer_norm(a + b)` becomes one [`AddLayerNorm`] op when
//! the sum feeds only the norm and `a`, `b` have one type (no broadcast).
//!
//! When the sum is also used elsewhere (the residual stream of a pre-norm transformer) the
//! pattern is left alone: fusing would compute the add twice and save nothing.

use super::Pass;
use super::pattern::{Uses, rewrite_to_fixpoint, try_replace};
use crate::error::Result;
use crate::ir::Graph;
use crate::ops::{AddLayerNorm, BinaryKind, Op};

pub struct FuseAddLayerNorm;

impl Pass for FuseAddLayerNorm {
    fn name(&self) -> &'static str {
        "fuse_add_layer_norm"
    }

    fn run(&self, g: &mut Graph) -> Result<bool> {
        rewrite_to_fixpoint(g, |g| {
            let uses = Uses::of(g);
            for id in g.ids() {
                let node = g.node(id);
                let Op::LayerNorm(ln) = &node.op else { continue };
                let eps = ln.eps;
                let sum = node.inputs[0];
                let is_add = matches!(&g.node(sum).op, Op::Binary(b) if b.kind == BinaryKind::Add);
                if !is_add || !uses.single(sum) {
                    continue;
                }
                let [a, b] = [g.node(sum).inputs[0], g.node(sum).inputs[1]];
                let inputs = [a, b, node.inputs[1], node.inputs[2]];
                if try_replace(g, id, AddLayerNorm { eps }, &inputs)? {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};
    use crate::passes::testing::run_and_compare;

    fn graph(sum_is_output: bool) -> Graph {
        let t = |d: &[usize]| TensorType::new(DType::F32, d);
        let mut g = Graph::new("addln");
        let a = g.input("a", t(&[3, 8])).unwrap();
        let b = g.input("b", t(&[3, 8])).unwrap();
        let gamma = g.param("ln.gamma", t(&[8])).unwrap();
        let beta = g.param("ln.beta", t(&[8])).unwrap();
        let s = g.add(a, b).unwrap();
        let n = g.layer_norm(s, gamma, beta, 1e-5).unwrap();
        g.output("y", n).unwrap();
        if sum_is_output {
            g.output("sum", s).unwrap();
        }
        g
    }

    #[test]
    fn fuses_a_residual_add_into_the_norm() {
        let (after, changed) = run_and_compare(&FuseAddLayerNorm, &graph(false), 1e-5);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph addln {\n  %0 = input \"a\" : f32[3,8]\n  %1 = input \"b\" : f32[3,8]\n  \
             %2 = param \"ln.gamma\" : f32[8]\n  %3 = param \"ln.beta\" : f32[8]\n  \
             %4 = add_layer_norm(%0, %1, %2, %3) eps=0.00001 : f32[3,8]\n  outputs: y=%4\n}"
        );
    }

    #[test]
    fn a_sum_used_elsewhere_is_left_alone() {
        let mut g = graph(true);
        let before = g.to_string();
        assert!(!FuseAddLayerNorm.run(&mut g).unwrap());
        assert_eq!(g.to_string(), before);
    }
}
