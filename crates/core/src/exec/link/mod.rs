//! The link layer: where every value of a program lives, decided once for every backend.
//!
//! [`Backend::compile_linked`](super::Backend::compile_linked) gets the plans that run as one
//! program and their weights. [`Link::new`] decides, from those and what the backend needs
//! ([`Needs`]):
//!
//! - the leaves: one per weight name, shared by every plan that declares it and checked
//!   against the supplied tensor in each (so a backend uploads it once), and one per constant;
//!   a weight larger than the backend's block limit is split into blocks of rows, each a leaf
//!   of its own, and the plans that read it are rewritten to read the blocks
//!   ([`crate::passes::split_weights`]);
//! - the persistent buffers: one per name, shared by the plans, which must agree on its type;
//! - each plan's arena, split into blocks no larger than the backend's limit (the planner
//!   placed values so that none straddles two; checked here);
//! - every node's [`Place`]: its block, byte offset, size and how its elements are stored
//!   (views and cache writes share their input's bytes), so resolving an operand is a lookup;
//! - the runtime scalars: one limit, [`MAX_RUNTIME_SCALARS`], for every backend.
//!
//! A backend then only allocates the blocks (a buffer each, or several packed into one
//! allocation), uploads the leaves with the one f16 codec ([`codec`]) and lowers its ops on
//! the places.

pub mod codec;
mod place;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::Weights;
use crate::error::{Error, Result};
use crate::ir::{DType, Graph, NodeId, TensorType};
use crate::plan::{Plan, PlanOptions};
use crate::tensor::Tensor;

/// Most runtime scalars a graph may declare, on every backend: wgpu reads them from one small
/// uniform (four `vec4<u32>`), and Whisper's decoder graphs declare 11.
pub const MAX_RUNTIME_SCALARS: usize = 16;

/// Bytes of a run's runtime-scalar table ([`scalar_table`]).
pub const SCALAR_TABLE_BYTES: usize = MAX_RUNTIME_SCALARS * 4;

/// What a backend needs of the placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needs {
    /// The backend's name, for error messages.
    pub backend: &'static str,
    /// The plan options the backend runs: the arena block limit, and the bytes an f16 value
    /// takes in the arena and in persistent buffers (2, or 4 for f32 words). A plan made with
    /// other options is planned again.
    pub plan: PlanOptions,
    /// f16 weights and constants are stored widened to f32 words instead of as f16.
    pub wide_f16_leaves: bool,
}

/// A block of memory a backend allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Block {
    /// A weight or constant: index into [`Link::leaves`].
    Leaf(usize),
    /// A persistent buffer: index into [`Link::states`].
    State(usize),
    /// Block `k` of the plan's own arena (see [`LinkedPlan::arena`]).
    Arena(usize),
}

impl Block {
    /// Whether ops may write it: weights and constants are shared and read-only.
    pub fn writable(self) -> bool {
        matches!(self, Block::State(_) | Block::Arena(_))
    }
}

/// Where a value lives: `bytes` bytes at `offset` in `block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    pub block: Block,
    pub offset: usize,
    /// The bytes its elements take as stored ([`codec::stored_size`]).
    pub bytes: usize,
    /// The value's dtype.
    pub dtype: DType,
    /// An f16 value stored as f32 words (false for every other dtype).
    pub f16_words: bool,
}

/// A weight or a constant, stored in a block of its own.
#[derive(Clone, Debug)]
pub struct Leaf<'w> {
    pub value: LeafValue<'w>,
    /// An f16 tensor stored as f32 words ([`Needs::wide_f16_leaves`]).
    pub f16_words: bool,
}

/// What a leaf holds.
#[derive(Clone, Debug)]
pub enum LeafValue<'w> {
    /// The supplied weight of this name.
    Weight { name: String, tensor: &'w Tensor },
    /// Rows of a supplied weight too large for one of the backend's buffers, cut from it
    /// ([`crate::passes::split_weights`] named them `weight[lo..hi]`).
    Rows { name: String, tensor: Arc<Tensor> },
    /// A constant of a graph (shared with the graph, not copied).
    Const(Arc<Tensor>),
}

impl Leaf<'_> {
    pub fn tensor(&self) -> &Tensor {
        match &self.value {
            LeafValue::Weight { tensor, .. } => tensor,
            LeafValue::Rows { tensor, .. } | LeafValue::Const(tensor) => tensor,
        }
    }

    /// A label for device buffers: the weight's name, or `const`.
    pub fn label(&self) -> &str {
        match &self.value {
            LeafValue::Weight { name, .. } | LeafValue::Rows { name, .. } => name,
            LeafValue::Const(_) => "const",
        }
    }

    /// Bytes as stored.
    pub fn bytes(&self) -> usize {
        codec::stored_size(&self.tensor().ty(), self.f16_words)
    }

    /// The bytes to upload.
    pub fn stored(&self) -> Cow<'_, [u8]> {
        codec::stored_bytes(self.tensor(), self.f16_words)
    }

    /// The tensor for executables that keep it on the host: a weight is copied once for the
    /// whole program, a constant is shared with its graph.
    pub fn shared(&self) -> Arc<Tensor> {
        match &self.value {
            LeafValue::Weight { tensor, .. } => Arc::new((*tensor).clone()),
            LeafValue::Rows { tensor, .. } | LeafValue::Const(tensor) => Arc::clone(tensor),
        }
    }
}

/// A persistent buffer of the program (zeroed at first, kept across runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateBuffer {
    pub name: String,
    pub ty: TensorType,
    /// f16 values stored as f32 words ([`PlanOptions::f16_bytes`] of 4).
    pub f16_words: bool,
}

impl StateBuffer {
    /// Bytes as stored.
    pub fn bytes(&self) -> usize {
        codec::stored_size(&self.ty, self.f16_words)
    }
}

/// One plan of the program, placed.
#[derive(Clone, Debug)]
pub struct LinkedPlan<'w> {
    /// The plan as given, or planned again with [`Needs::plan`].
    pub plan: Cow<'w, Plan>,
    /// Bytes of each block of the arena, in order: at least one, each at most the limit, all
    /// but the last exactly the limit (so block `k` starts at `k * limit` of the plan's arena).
    pub arena: Vec<usize>,
    /// Every node's place, by node id.
    pub places: Vec<Place>,
    /// The persistent buffers the plan declares (indices into [`Link::states`]).
    pub states: Vec<usize>,
}

impl LinkedPlan<'_> {
    /// The place of node `id` of this plan.
    pub fn place(&self, id: NodeId) -> Place {
        self.places[id.index()]
    }
}

/// Where every value of a program lives (see the module docs).
#[derive(Clone, Debug)]
pub struct Link<'w> {
    /// Weights and constants in the order plans first use them (plan by plan, node by node).
    pub leaves: Vec<Leaf<'w>>,
    /// Persistent buffers in the order plans first declare them.
    pub states: Vec<StateBuffer>,
    /// The plans, in the order given.
    pub plans: Vec<LinkedPlan<'w>>,
}

impl<'w> Link<'w> {
    /// Places `plans`, compiled together as one program, with `weights` for a backend with
    /// `needs`. Errors: a weight missing or of another type than a graph declares, a persistent
    /// buffer declared with two types, a graph with more than [`MAX_RUNTIME_SCALARS`] runtime
    /// scalars, a plan whose arena values do not fit the blocks.
    pub fn new(plans: &[&'w Plan], weights: &'w Weights, needs: &Needs) -> Result<Self> {
        place::link(plans, weights, needs)
    }

    /// Bytes of each block of one arena every plan of the program can run in: block `k` is
    /// the largest block `k` of any plan. A program runs one plan at a time and no value lives
    /// in the arena from one run to the next (inputs are copied in, outputs read out, and what
    /// outlives a run is a persistent buffer), so its plans can share one arena: the largest
    /// plan's, where separate arenas would cost the sum of them all.
    pub fn shared_arena(&self) -> Vec<usize> {
        let mut blocks: Vec<usize> = Vec::new();
        for plan in &self.plans {
            for (k, &bytes) in plan.arena.iter().enumerate() {
                match blocks.get_mut(k) {
                    Some(b) => *b = (*b).max(bytes),
                    None => blocks.push(bytes),
                }
            }
        }
        blocks
    }

    /// The index of the persistent buffer `name` when plan `plan` declares it.
    pub fn state_of(&self, plan: usize, name: &str) -> Option<usize> {
        self.plans.get(plan)?.states.iter().copied().find(|&s| self.states[s].name == name)
    }
}

/// The runtime-scalar table of a run of `graph`: scalar `i` at word `i`, the rest zero.
pub fn scalar_table(graph: &Graph, given: &HashMap<String, u32>) -> Result<[u32; MAX_RUNTIME_SCALARS]> {
    let values = graph.scalar_values(given)?;
    let mut table = [0u32; MAX_RUNTIME_SCALARS];
    // Linking refused larger graphs already; this keeps a graph linked elsewhere from panicking.
    table
        .get_mut(..values.len())
        .ok_or_else(|| {
            Error::InvalidGraph(format!("graph '{}' has more than {MAX_RUNTIME_SCALARS} runtime scalars", graph.name()))
        })?
        .copy_from_slice(&values);
    Ok(table)
}
