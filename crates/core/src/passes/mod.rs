//! Optimisation passes and the one ordered pipeline that runs them.
//!
//! Every pass keeps the graph's numbers the same (its tests compare outputs before and after
//! on random inputs) and the graph valid (the pipeline runs the verifier after each pass in
//! debug builds and tests).

mod dce;
mod fold;
mod fuse_add_norm;
mod fuse_attention;
mod fuse_elementwise;
mod fuse_matmul;
mod pattern;
mod permute_as_reshape;
pub mod split_weights;

pub use dce::DeadCodeElimination;
pub use fold::{ConstantFolding, MAX_FOLDED_ELEMENTS};
pub use fuse_add_norm::FuseAddLayerNorm;
pub use fuse_attention::FuseAttention;
pub use fuse_elementwise::{FuseElementwise, MAX_FUSED_INPUTS, MAX_FUSED_WORDS};
pub use fuse_matmul::FuseMatMulBias;
pub use permute_as_reshape::PermuteAsReshape;

use crate::error::Result;
use crate::ir::{Graph, verify};

/// Runs the default pipeline on `g`; returns the names of the passes that changed it.
pub fn optimize(g: &mut Graph) -> Result<Vec<&'static str>> {
    Pipeline::default().run(g)
}

/// A graph rewrite.
pub trait Pass {
    fn name(&self) -> &'static str;
    /// Rewrites `g`; returns whether anything changed.
    fn run(&self, g: &mut Graph) -> Result<bool>;
}

/// An ordered list of passes.
pub struct Pipeline {
    passes: Vec<Box<dyn Pass>>,
}

impl Pipeline {
    pub fn new(passes: Vec<Box<dyn Pass>>) -> Self {
        Pipeline { passes }
    }

    /// Runs every pass in order, verifying the graph after each one in debug builds.
    /// Returns the names of the passes that changed something.
    pub fn run(&self, g: &mut Graph) -> Result<Vec<&'static str>> {
        let mut changed = Vec::new();
        for pass in &self.passes {
            if pass.run(g)? {
                changed.push(pass.name());
            }
            if cfg!(debug_assertions) {
                verify(g).map_err(|e| crate::Error::InvalidGraph(format!("after pass {}: {e}", pass.name())))?;
            }
        }
        Ok(changed)
    }
}

impl Default for Pipeline {
    /// The order matters: folding first exposes constant scales and masks; attention is
    /// matched before its scale multiply could be swallowed by elementwise fusion; permutes
    /// that move only unit axes become reshapes (no work on any backend); add + norm
    /// before the matmul epilogue takes the add; elementwise fusion last takes what is left;
    /// a final sweep drops what the rewrites left dead.
    fn default() -> Self {
        Pipeline::new(vec![
            Box::new(DeadCodeElimination),
            Box::new(ConstantFolding),
            Box::new(FuseAttention),
            Box::new(PermuteAsReshape),
            Box::new(FuseAddLayerNorm),
            Box::new(FuseMatMulBias),
            Box::new(FuseElementwise),
            Box::new(DeadCodeElimination),
        ])
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::collections::HashMap;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::Pass;
    use crate::ir::{Graph, evaluate, verify};
    use crate::ops::Op;
    use crate::tensor::Tensor;

    /// Runs `pass` on a copy of `g`, checks the result verifies, and checks that both graphs
    /// give the same outputs on random inputs (within `rel_tol` relative error). Returns the
    /// rewritten graph and whether the pass reported a change.
    pub fn run_and_compare(pass: &dyn Pass, g: &Graph, rel_tol: f32) -> (Graph, bool) {
        let mut after = g.clone();
        let changed = pass.run(&mut after).unwrap();
        verify(&after).unwrap();
        assert_same_outputs(g, &after, rel_tol);
        (after, changed)
    }

    /// Asserts that `a` and `b` compute the same outputs on random inputs and weights.
    pub fn assert_same_outputs(a: &Graph, b: &Graph, rel_tol: f32) {
        for seed in 0..3 {
            let inputs = leaves(a, seed, |op| matches!(op, Op::Input(_)));
            let weights = leaves(a, seed + 100, |op| matches!(op, Op::Param(_)));
            let (states, scalars) = (HashMap::new(), HashMap::new());
            let ra = evaluate(a, &inputs, &weights, &states, &scalars).unwrap();
            let rb = evaluate(b, &inputs, &weights, &states, &scalars).unwrap();
            for (name, want) in &ra.outputs {
                let got = &rb.outputs[name];
                assert_eq!(got.ty(), want.ty(), "output {name}");
                for (i, (x, y)) in got.to_f32().iter().zip(want.to_f32()).enumerate() {
                    let ok = (x - y).abs() <= rel_tol * y.abs().max(1.0) || (x.is_nan() && y.is_nan());
                    assert!(ok, "output {name}[{i}]: {x} after the pass, {y} before (seed {seed})");
                }
            }
        }
    }

    /// Seeded values for the leaves of `g` that `wanted` picks, by name: floats uniform in
    /// [-2, 2), integers in 0..8 (in range for the small index tensors of pass tests).
    fn leaves(g: &Graph, seed: u64, wanted: impl Fn(&Op) -> bool) -> HashMap<String, Tensor> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = HashMap::new();
        for node in g.nodes() {
            if let Some(name) = node.op.leaf_name().filter(|_| wanted(&node.op)) {
                let (ty, n) = (&node.ty, node.ty.numel());
                let t = if ty.dtype.is_float() {
                    Tensor::from_f32(ty.dtype, ty.shape.clone(), (0..n).map(|_| rng.random_range(-2.0..2.0)).collect())
                } else {
                    Tensor::from_i64(ty.dtype, ty.shape.clone(), (0..n).map(|_| rng.random_range(0..8)).collect())
                };
                out.insert(name.to_string(), t.expect("one value per element"));
            }
        }
        out
    }
}
