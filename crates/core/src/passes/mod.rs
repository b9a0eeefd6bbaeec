//! Optimisation passes and the one ordered pipeline that runs them.
//!
//! Every pass keeps the graph's numbers the same (its tests compare outputs before and after
//! on random inputs) and the graph valid (the pipeline runs the verifier after each pass in
//! debug builds and tests).

use crate::error::Result;
use crate::ir::{Graph, verify};

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
