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

pub use dce::DeadCodeElimination;
pub use fold::{ConstantFolding, MAX_FOLDED_ELEMENTS};
pub use fuse_add_norm::FuseAddLayerNorm;
pub use fuse_attention::FuseAttention;
pub use fuse_elementwise::{FuseElementwise, MAX_FUSED_INPUTS};
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

    use super::Pass;
    use crate::harness::random::{random_inputs, random_weights};
    use crate::ir::{Graph, evaluate, verify};

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
            let inputs = random_inputs(a, seed);
            let weights = random_weights(a, seed);
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
}

#[cfg(test)]
mod tests {
    use super::testing::assert_same_outputs;
    use super::*;
    use crate::demo::{EncoderLayerShape, encoder_layer};

    #[test]
    fn the_pipeline_fuses_an_encoder_layer() {
        let shape = EncoderLayerShape { positions: 7, d_model: 12, heads: 3, ffn: 20 };
        let before = encoder_layer(&shape).unwrap();
        let mut after = before.clone();
        let fired = optimize(&mut after).unwrap();
        assert_eq!(fired, ["fuse_attention", "fuse_matmul_bias"]);
        assert_same_outputs(&before, &after, 1e-4);
        println!("{after}");
        let text = after.to_string();
        let count = |needle: &str| text.matches(needle).count();
        assert_eq!(count("= attention("), 1, "{text}");
        assert_eq!(count("= matmul_bias("), 5, "{text}");
        assert_eq!(count(" gelu :"), 1, "{text}");
        assert_eq!(count("= softmax("), 0, "{text}");
        // Optimising again finds nothing to do.
        let again = after.clone();
        assert!(optimize(&mut after).unwrap().is_empty());
        assert_eq!(after, again);
    }
}
