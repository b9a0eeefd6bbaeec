//! Dead-code elimination: drops nodes that no output and no side effect depends on.
//!
//! Run inputs are kept even when unused, so a graph's calling convention does not change
//! under optimisation; writes to persistent buffers are kept because they are the point.

use super::Pass;
use crate::error::Result;
use crate::ir::Graph;
use crate::ops::Op;

pub struct DeadCodeElimination;

impl Pass for DeadCodeElimination {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&self, g: &mut Graph) -> Result<bool> {
        Ok(remove_dead(g)? > 0)
    }
}

/// Removes dead nodes; returns how many. Fusion passes call it after each rewrite so that
/// use counts only see live consumers.
pub(crate) fn remove_dead(g: &mut Graph) -> Result<usize> {
    let mut live = vec![false; g.len()];
    for (_, id) in g.outputs() {
        live[id.index()] = true;
    }
    for id in g.ids() {
        let op = &g.node(id).op;
        if op.has_side_effects() || matches!(op, Op::Input(_)) {
            live[id.index()] = true;
        }
    }
    for id in g.ids().collect::<Vec<_>>().into_iter().rev() {
        if live[id.index()] {
            for &inp in &g.node(id).inputs {
                live[inp.index()] = true;
            }
        }
    }
    if live.iter().all(|&l| l) {
        return Ok(0);
    }
    g.compact(&live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};
    use crate::passes::testing::run_and_compare;

    fn f32t(dims: &[usize]) -> TensorType {
        TensorType::new(DType::F32, dims)
    }

    #[test]
    fn removes_unused_nodes_but_keeps_inputs() {
        let mut g = Graph::new("dce");
        let x = g.input("x", f32t(&[2, 3])).unwrap();
        g.input("unused", f32t(&[1])).unwrap();
        let a = g.exp(x).unwrap();
        let b = g.neg(x).unwrap();
        let w = g.param("w", f32t(&[3])).unwrap();
        g.mul(b, w).unwrap();
        g.output("y", a).unwrap();
        let (after, changed) = run_and_compare(&DeadCodeElimination, &g, 0.0);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph dce {\n  %0 = input \"x\" : f32[2,3]\n  %1 = input \"unused\" : f32[1]\n  %2 = exp(%0) : f32[2,3]\n  outputs: y=%2\n}"
        );
    }

    #[test]
    fn keeps_cache_writes_and_leaves_a_live_graph_unchanged() {
        let mut g = Graph::new("dce");
        let pos = g.scalar("pos");
        let cache = g.state("cache", f32t(&[8, 4])).unwrap();
        let x = g.input("x", f32t(&[1, 4])).unwrap();
        g.kv_write(cache, x, 0, pos).unwrap();
        let y = g.tanh(x).unwrap();
        g.output("y", y).unwrap();
        let before = g.to_string();
        assert!(!DeadCodeElimination.run(&mut g).unwrap());
        assert_eq!(g.to_string(), before);
    }
}
