//! Storage classes, arena buffers and their liveness intervals.
//!
//! Walking the schedule once, every value gets a place: weights, constants and persistent
//! buffers stay where they are; every other value gets an arena buffer. Aliasing ops (reshape,
//! KV-cache writes) join their input's place, a slice that is one contiguous range of an arena
//! value starting at an aligned byte joins its input's buffer at that byte (a view: nothing
//! computes it), and an in-place op joins the buffer of an input that dies at it. A buffer is
//! live from the step that defines it to the last step that reads any value stored in it.

use super::{ArenaBuffer, Interval, PlanOptions, align};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId};
use crate::ops::{Memory, Op, Slice};

/// Where a value lives, before arena offsets are chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// Index into [`Liveness::buffers`].
    Buffer(usize),
    Param(String),
    Const(NodeId),
    State(String),
}

/// The result of [`analyse`]: a place per node (indexed by node id) and the arena buffers,
/// whose offsets are still 0.
#[derive(Debug)]
pub(super) struct Liveness {
    pub place: Vec<Place>,
    /// Per node, where in its buffer its bytes start (non-zero only for slice views and the
    /// views of them).
    pub offset_in_buffer: Vec<usize>,
    /// Per node, whether it is a view that computes nothing: a reshape, or a slice stored in
    /// its input's bytes.
    pub view: Vec<bool>,
    pub buffers: Vec<ArenaBuffer>,
    pub in_place: usize,
}

/// Per-buffer facts needed only while places are chosen.
struct Building {
    /// Exact byte size of the values stored in the buffer (all have the same).
    size: usize,
    /// Holds a graph input or a graph output, so it must never be overwritten in place.
    pinned: bool,
}

/// Assigns places and buffers for `g` executed in `schedule` order (a topological order of
/// every node). Inputs are live from step 0 (they are copied in before the run) and graph
/// outputs until the last step (they are read back after it).
pub(super) fn analyse(g: &Graph, schedule: &[NodeId], options: &PlanOptions) -> Result<Liveness> {
    let last_step = schedule.len().saturating_sub(1);
    let mut step = vec![None; g.len()];
    for (s, &id) in schedule.iter().enumerate() {
        step[id.index()] = Some(s);
    }
    if let Some(missing) = step.iter().position(Option::is_none) {
        return Err(Error::InvalidGraph(format!("the schedule leaves out node %{missing}")));
    }
    let mut is_output = vec![false; g.len()];
    let mut last_use: Vec<Option<usize>> = vec![None; g.len()];
    for (s, &id) in schedule.iter().enumerate() {
        for &i in &g.node(id).inputs {
            last_use[i.index()] = last_use[i.index()].max(Some(s));
        }
    }
    for &(_, id) in g.outputs() {
        is_output[id.index()] = true;
        last_use[id.index()] = Some(last_step);
    }

    let mut place: Vec<Option<Place>> = vec![None; g.len()];
    let mut offset_in_buffer = vec![0; g.len()];
    let mut view = vec![false; g.len()];
    let mut buffers: Vec<ArenaBuffer> = Vec::new();
    let mut building: Vec<Building> = Vec::new();
    let mut in_place = 0;
    for (s, &id) in schedule.iter().enumerate() {
        let node = g.node(id);
        let input_place = |k: usize| -> Result<Place> {
            let i = node.inputs[k];
            place[i.index()]
                .clone()
                .ok_or_else(|| Error::InvalidGraph(format!("the schedule runs %{} before its input %{}", id.0, i.0)))
        };
        let slice_view = match &node.op {
            Op::Slice(op) => match input_place(0)? {
                Place::Buffer(b) => slice_bytes(g, id, op, options).map(|at| (b, at)),
                _ => None,
            },
            _ => None,
        };
        let chosen = match (&node.op, slice_view) {
            (Op::Param(p), _) => Place::Param(p.name.clone()),
            (Op::Const(_), _) => Place::Const(id),
            (Op::State(st), _) => Place::State(st.name.clone()),
            (_, Some((b, at))) => {
                offset_in_buffer[id.index()] = offset_in_buffer[node.inputs[0].index()] + at;
                view[id.index()] = true;
                Place::Buffer(b)
            }
            (op, None) if op.memory() == Memory::Alias => {
                view[id.index()] = matches!(op, Op::Reshape(_));
                offset_in_buffer[id.index()] = offset_in_buffer[node.inputs[0].index()];
                input_place(0)?
            }
            (op, None) => {
                let size = options.value_bytes(&node.ty);
                let mut reuse = None;
                if op.memory() == Memory::InPlace {
                    for k in 0..node.inputs.len() {
                        let Place::Buffer(b) = input_place(k)? else { continue };
                        let fits = building[b].size == size
                            && offset_in_buffer[node.inputs[k].index()] == 0
                            && g.ty(node.inputs[k]).shape == node.ty.shape
                            && buffers[b].live.end == s
                            && !building[b].pinned;
                        if fits {
                            reuse = Some(b);
                            break;
                        }
                    }
                }
                match reuse {
                    Some(b) => {
                        in_place += 1;
                        Place::Buffer(b)
                    }
                    None => {
                        let start = if matches!(op, Op::Input(_)) { 0 } else { s };
                        buffers.push(ArenaBuffer {
                            offset: 0,
                            bytes: align(size),
                            live: Interval { start, end: start },
                            values: Vec::new(),
                        });
                        building.push(Building { size, pinned: matches!(op, Op::Input(_)) });
                        Place::Buffer(buffers.len() - 1)
                    }
                }
            }
        };
        if let Place::Buffer(b) = chosen {
            let buffer = &mut buffers[b];
            buffer.values.push(id);
            if let Some(used) = last_use[id.index()] {
                buffer.live.end = buffer.live.end.max(used);
            }
            building[b].pinned |= is_output[id.index()];
        }
        place[id.index()] = Some(chosen);
    }
    // Every node is scheduled (checked above), so every node has a place.
    let place = place.into_iter().flatten().collect();
    Ok(Liveness { place, offset_in_buffer, view, buffers, in_place })
}

/// Where in its input's bytes the slice `op` (node `id`) starts, when its result is one
/// contiguous range of them (every axis before the sliced one has a single element) starting
/// at a multiple of [`ARENA_ALIGN`](super::ARENA_ALIGN) bytes, so that it can be bound as a
/// buffer range of its own (a decoder step's fused q/k/v product, sliced into q, k and v).
fn slice_bytes(g: &Graph, id: NodeId, op: &Slice, options: &PlanOptions) -> Option<usize> {
    let x = g.ty(g.node(id).inputs[0]);
    let dims = x.shape.dims();
    let contiguous = dims[..op.axis].iter().all(|&d| d == 1);
    let inner: usize = dims[op.axis + 1..].iter().product();
    let elem = options.value_bytes(&crate::ir::TensorType::new(x.dtype, [1]));
    let at = op.start * inner * elem;
    (contiguous && at.is_multiple_of(super::ARENA_ALIGN)).then_some(at)
}
