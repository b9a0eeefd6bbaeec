//! A permute that only moves axes of size 1 keeps every element where it was: it becomes a
//! reshape, which no backend runs (the value is its input's bytes). Splitting one decoder
//! token into heads (`[1, 6, 64]` -> `[6, 1, 64]`) is such a permute, several times per step.

use super::Pass;
use crate::error::Result;
use crate::ir::Graph;
use crate::ops::{Op, Reshape};

pub struct PermuteAsReshape;

/// True when `perm` keeps the axes of `dims` longer than 1 in their order.
fn moves_only_unit_axes(perm: &[usize], dims: &[usize]) -> bool {
    let kept: Vec<usize> = perm.iter().copied().filter(|&a| dims[a] != 1).collect();
    kept.windows(2).all(|w| w[0] < w[1])
}

impl Pass for PermuteAsReshape {
    fn name(&self) -> &'static str {
        "permute_as_reshape"
    }

    fn run(&self, g: &mut Graph) -> Result<bool> {
        let mut changed = false;
        for id in g.ids().collect::<Vec<_>>() {
            let node = g.node(id);
            let Op::Permute(p) = &node.op else { continue };
            let input = node.inputs[0];
            if !moves_only_unit_axes(&p.perm, g.ty(input).shape.dims()) {
                continue;
            }
            let shape = node.ty.shape.clone();
            g.replace(id, Reshape { shape }, &[input])?;
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

    fn graph(dims: &[usize], perm: &[usize]) -> Graph {
        let mut g = Graph::new("p");
        let x = g.input("x", TensorType::new(DType::F32, dims)).unwrap();
        let y = g.permute(x, perm).unwrap();
        g.output("y", y).unwrap();
        g
    }

    #[test]
    fn a_permute_of_unit_axes_becomes_a_reshape() {
        let (after, changed) = run_and_compare(&PermuteAsReshape, &graph(&[1, 6, 64], &[1, 0, 2]), 0.0);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph p {\n  %0 = input \"x\" : f32[1,6,64]\n  %1 = reshape(%0) to=[6,1,64] : f32[6,1,64]\n  outputs: y=%1\n}"
        );
        let (_, changed) = run_and_compare(&PermuteAsReshape, &graph(&[2, 1, 3, 1], &[1, 0, 3, 2]), 0.0);
        assert!(changed);
    }

    #[test]
    fn a_real_transpose_stays() {
        for (dims, perm) in [(&[2usize, 3][..], &[1usize, 0][..]), (&[1, 6, 2, 64], &[0, 2, 1, 3])] {
            let g = graph(dims, perm);
            let (after, changed) = run_and_compare(&PermuteAsReshape, &g, 0.0);
            assert!(!changed, "{dims:?} {perm:?}");
            assert_eq!(after.to_string(), g.to_string());
        }
    }
}
