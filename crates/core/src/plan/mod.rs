//! The planner: a schedule and a memory plan for an optimised graph.
//!
//! Every intermediate value lives in one arena at an offset chosen from liveness intervals
//! (best fit, 256-byte aligned, in place where the op allows). Weights, constants and
//! persistent buffers live outside the arena. Backends compile a [`Plan`], never a bare graph.
//!
//! [`plan`] works in three steps: the schedule (the graph's own topological order), the
//! places and liveness intervals of values (`liveness.rs`), and arena offsets by best fit
//! (`arena.rs`). The arena is sized for the whole plan once, so nothing grows while running.

mod arena;
mod liveness;

use std::fmt;

use crate::error::Result;
use crate::ir::{DType, Graph, NodeId, TensorType, verify};
use crate::ops::Memory;

use liveness::Place;

/// Alignment of every arena offset, in bytes (WebGPU's minimum storage offset alignment).
pub const ARENA_ALIGN: usize = 256;

/// Rounds `bytes` up to a multiple of [`ARENA_ALIGN`].
pub fn align(bytes: usize) -> usize {
    bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN
}

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

/// Schedule steps `start..=end` (both inclusive) during which a buffer must keep its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub start: usize,
    pub end: usize,
}

impl Interval {
    /// True when the two intervals share a step.
    pub fn overlaps(&self, other: &Interval) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// One block of the arena: a value together with the values that share its bytes (views of
/// it and in-place results that took it over).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaBuffer {
    /// Offset in the arena, a multiple of [`ARENA_ALIGN`].
    pub offset: usize,
    /// Size reserved, rounded up to [`ARENA_ALIGN`].
    pub bytes: usize,
    /// From the step that defines the first value to the last step that reads any of them.
    pub live: Interval,
    /// The values stored here, in schedule order; the first one defines the buffer.
    pub values: Vec<NodeId>,
}

/// Sizes of a memory plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    /// Bytes of the arena.
    pub arena_bytes: usize,
    /// Sum of the (aligned) sizes of all values placed in the arena, as if none shared memory.
    /// Views (reshapes) are not counted: they never need bytes of their own.
    pub total_bytes: usize,
    /// The largest sum of (aligned) sizes of arena values live at one step: a lower bound for
    /// any arena.
    pub peak_live_bytes: usize,
    /// Values placed in the arena (views and slice views not counted), and how many of them
    /// reuse an input's buffer in place.
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
    /// The arena buffers with their offsets and liveness intervals.
    pub buffers: Vec<ArenaBuffer>,
    /// The index in `buffers` of every node stored in the arena, indexed by node id.
    pub buffer_of: Vec<Option<usize>>,
    /// Per node (indexed by id): a view that computes nothing, its value already in its
    /// input's bytes: a reshape, or a slice that is one contiguous range of an arena value
    /// starting at an aligned byte (stored inside its input's buffer). Executors skip them.
    pub views: Vec<bool>,
    pub report: MemoryReport,
    /// The options the plan was made with.
    pub options: PlanOptions,
}

/// What a backend needs of a memory plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// No arena value may cross a multiple of this many bytes, so a backend can split the
    /// arena into buffers of at most this size (WebGPU limits one binding to
    /// `max_storage_buffer_binding_size`, 128 MiB by default in browsers).
    pub max_buffer_bytes: usize,
    /// Bytes an f16 value takes in the arena: 2, or 4 for backends that keep f16 activations
    /// widened to f32 (GPUs without `shader-f16`).
    pub f16_bytes: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions { max_buffer_bytes: usize::MAX, f16_bytes: 2 }
    }
}

impl PlanOptions {
    /// Bytes of a value of type `ty` in the arena.
    pub fn value_bytes(&self, ty: &TensorType) -> usize {
        let elem = if ty.dtype == DType::F16 { self.f16_bytes } else { ty.dtype.size() };
        ty.numel() * elem
    }
}

/// Verifies `graph`, schedules it and plans its memory with the default options.
pub fn plan(graph: Graph) -> Result<Plan> {
    plan_with(graph, &PlanOptions::default())
}

/// Verifies `graph`, schedules it and plans its memory for a backend with these needs.
///
/// The schedule is the graph's insertion order. It is topological by construction and it is
/// the order the model author wrote, which computes values close to where they are used; a
/// reordering search could lower the peak a little but would make plans harder to read.
pub fn plan_with(graph: Graph, options: &PlanOptions) -> Result<Plan> {
    verify(&graph)?;
    let schedule: Vec<NodeId> = graph.ids().collect();
    let liveness::Liveness { place, offset_in_buffer, view: views, mut buffers, in_place } =
        liveness::analyse(&graph, &schedule, options)?;
    let arena_bytes = arena::assign_offsets(&mut buffers, options.max_buffer_bytes)?;
    let peak_live_bytes = arena::peak_live(&buffers, schedule.len());

    let mut storage = Vec::with_capacity(graph.len());
    let mut buffer_of = Vec::with_capacity(graph.len());
    let (mut arena_values, mut total_bytes) = (0, 0);
    for (id, place) in graph.ids().zip(place) {
        let node = graph.node(id);
        let size = options.value_bytes(&node.ty);
        buffer_of.push(match place {
            Place::Buffer(b) => Some(b),
            _ => None,
        });
        storage.push(match place {
            Place::Buffer(b) => {
                if node.op.memory() != Memory::Alias && !views[id.index()] {
                    arena_values += 1;
                    total_bytes += align(size);
                }
                Storage::Arena { offset: buffers[b].offset + offset_in_buffer[id.index()], size }
            }
            Place::Param(name) => Storage::Param(name),
            Place::Const(c) => Storage::Const(c),
            Place::State(name) => Storage::State(name),
        });
    }
    let report = MemoryReport { arena_bytes, total_bytes, peak_live_bytes, arena_values, in_place };
    Ok(Plan { graph, schedule, storage, buffers, buffer_of, views, report, options: options.clone() })
}

/// Bytes in binary units with one decimal (`7.9 MiB`).
fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ratio = if self.peak_live_bytes == 0 { 1.0 } else { self.arena_bytes as f64 / self.peak_live_bytes as f64 };
        write!(
            f,
            "arena {} (peak live {}, {ratio:.2}x; all values {}; {} values, {} in place)",
            human_bytes(self.arena_bytes),
            human_bytes(self.peak_live_bytes),
            human_bytes(self.total_bytes),
            self.arena_values,
            self.in_place
        )
    }
}

impl Plan {
    /// One line per node in schedule order: id, op, type, storage, how it shares its buffer
    /// and the buffer's live interval. Used by the `demo` command.
    pub fn placement_table(&self) -> String {
        let mut rows = vec![["node", "op", "type", "storage", "shares", "live"].map(String::from)];
        for &id in &self.schedule {
            let node = self.graph.node(id);
            let storage = match &self.storage[id.index()] {
                Storage::Arena { offset, size } => format!("arena @{offset} +{}", human_bytes(*size)),
                Storage::Param(name) => format!("param {name}"),
                Storage::Const(c) => format!("const %{}", c.0),
                Storage::State(name) => format!("state {name}"),
            };
            let (shares, live) = match self.buffer_of[id.index()] {
                Some(b) => {
                    let buffer = &self.buffers[b];
                    let shared_input = node.inputs.iter().find(|&&i| self.buffer_of[i.index()] == Some(b));
                    let shares = match shared_input {
                        Some(i) if node.op.memory() == Memory::Alias || self.views[id.index()] => {
                            format!("view of %{}", i.0)
                        }
                        Some(i) => format!("in place of %{}", i.0),
                        None => format!("buffer {b}"),
                    };
                    (shares, format!("{}..={}", buffer.live.start, buffer.live.end))
                }
                None => ("-".to_string(), "-".to_string()),
            };
            rows.push([format!("%{}", id.0), node.op.name().to_string(), node.ty.to_string(), storage, shares, live]);
        }
        let mut widths = [0; 6];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        let lines: Vec<String> = rows
            .iter()
            .map(|row| {
                let cells: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
                cells.join("  ").trim_end().to_string()
            })
            .collect();
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};
    use crate::ops::{KvWrite, Reshape};
    use crate::tensor::Tensor;

    #[test]
    fn leaves_keep_their_storage_and_views_share_it() {
        let mut g = Graph::new("t");
        let w = g.param("w", TensorType::new(DType::F32, [2, 3])).unwrap();
        let c = g.constant(Tensor::f32([3], vec![1.0, 2.0, 3.0]).unwrap());
        let s = g.state("kv", TensorType::new(DType::F32, [4, 3])).unwrap();
        let pos = g.scalar("pos");
        let x = g.input("x", TensorType::new(DType::F32, [1, 3])).unwrap();
        let wr = g.push(Reshape { shape: [6].into() }, &[w]).unwrap();
        let cr = g.push(Reshape { shape: [1, 3].into() }, &[c]).unwrap();
        let kv = g.push(KvWrite { axis: 0, offset: Some(pos) }, &[s, x]).unwrap();
        let p = g.read_scalar(pos).unwrap();
        g.output("w", wr).unwrap();
        g.output("c", cr).unwrap();
        g.output("kv", kv).unwrap();
        g.output("p", p).unwrap();
        let plan = plan(g).unwrap();
        let st = |id: NodeId| plan.storage[id.index()].clone();
        assert_eq!(st(wr), Storage::Param("w".into()));
        assert_eq!(st(cr), Storage::Const(c));
        assert_eq!(st(kv), Storage::State("kv".into()));
        // x (12 bytes) is live from step 0 to the write at step 6, the scalar only at step 7.
        assert_eq!(st(x), Storage::Arena { offset: 0, size: 12 });
        assert_eq!(st(p), Storage::Arena { offset: 0, size: 4 });
        assert_eq!(plan.report.arena_bytes, 256);
        assert_eq!(plan.report.arena_values, 2);
        assert_eq!(plan.buffers[plan.buffer_of[x.index()].unwrap()].live, Interval { start: 0, end: 6 });
    }

    #[test]
    fn aligned_contiguous_slices_of_arena_values_are_views() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [1, 1, 8])).unwrap();
        let w = g.param("w", TensorType::new(DType::F32, [8, 1152])).unwrap();
        let y = g.tanh(x).unwrap();
        let qkv = g.matmul(y, w).unwrap();
        // One row of a step's fused projection: q, k and v are 1536 bytes apart (6 x 256).
        let (q, k, v) =
            (g.slice(qkv, 2, 0, 384).unwrap(), g.slice(qkv, 2, 384, 768).unwrap(), g.slice(qkv, 2, 768, 1152).unwrap());
        let qr = g.push(Reshape { shape: [6, 64].into() }, &[q]).unwrap();
        let kv = g.add(k, v).unwrap();
        // Not views: 4 bytes in (unaligned), a weight's rows, two rows' columns (not contiguous).
        let odd = g.slice(qkv, 2, 1, 2).unwrap();
        let of_weight = g.slice(w, 0, 0, 4).unwrap();
        let two = g.input("two", TensorType::new(DType::F32, [2, 128])).unwrap();
        let columns = g.slice(two, 1, 64, 128).unwrap();
        for (name, id) in [("q", qr), ("kv", kv), ("odd", odd), ("w", of_weight), ("c", columns)] {
            g.output(name, id).unwrap();
        }
        let plan = plan(g).unwrap();
        let at = |id: NodeId| match plan.storage[id.index()] {
            Storage::Arena { offset, .. } => offset,
            ref other => panic!("{other:?}"),
        };
        assert_eq!([at(k) - at(qkv), at(v) - at(qkv), at(q), at(qr)], [1536, 3072, at(qkv), at(qkv)]);
        assert!(
            [q, k, v, qr]
                .iter()
                .all(|id| plan.views[id.index()] && plan.buffer_of[id.index()] == plan.buffer_of[qkv.index()])
        );
        assert!([qkv, kv, odd, of_weight, columns].iter().all(|id| !plan.views[id.index()]));
        // The fused product's buffer lives until its last view is read (the add).
        let live = plan.buffers[plan.buffer_of[qkv.index()].unwrap()].live;
        assert!(live.end >= plan.schedule.iter().position(|&s| s == kv).unwrap());
        assert!(plan.placement_table().contains("view of"));
    }

    #[test]
    fn report_prints_in_binary_units() {
        let r = MemoryReport {
            arena_bytes: 8_283_750,
            total_bytes: 22_020_096,
            peak_live_bytes: 8_283_750,
            arena_values: 45,
            in_place: 6,
        };
        assert_eq!(
            r.to_string(),
            "arena 7.9 MiB (peak live 7.9 MiB, 1.00x; all values 21.0 MiB; 45 values, 6 in place)"
        );
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
