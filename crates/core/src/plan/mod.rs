//! The planner: a schedule and a memory plan for an optimised graph.
//!
//! Every intermediate value lives in one arena at an offset chosen from liveness intervals
//! (best fit, 256-byte aligned, in place where the op allows). Weights, constants and
//! persistent buffers live outside the arena. Backends compile a [`Plan`], never a bare graph.

use crate::ir::{Graph, NodeId};

/// Alignment of every arena offset, in bytes (WebGPU's minimum storage offset alignment).
pub const ARENA_ALIGN: usize = 256;

/// Where a node's value is stored while a plan runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Bytes `offset .. offset + size` of the arena (`size` is the value's byte size).
    Arena { offset: usize, size: usize },
    /// The weight buffer of the param named so.
    Param(String),
    /// The constant held by this (const) node, uploaded once at compile time.
    Const(NodeId),
    /// The persistent buffer named so.
    State(String),
}

/// Sizes of a memory plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    /// Bytes of the arena.
    pub arena_bytes: usize,
    /// Sum of the (aligned) sizes of all values placed in the arena, as if none shared memory.
    pub total_bytes: usize,
    /// The largest sum of (aligned) sizes of arena values live at one step: a lower bound for
    /// any arena.
    pub peak_live_bytes: usize,
    /// Values placed in the arena, and how many of them reuse an input's buffer in place.
    pub arena_values: usize,
    pub in_place: usize,
}

/// A schedule and memory plan for one graph.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The (optimised) graph the plan is for.
    pub graph: Graph,
    /// Nodes in execution order: every node of the graph, each after its inputs.
    pub schedule: Vec<NodeId>,
    /// Storage of every node, indexed by node id.
    pub storage: Vec<Storage>,
    pub report: MemoryReport,
}
