//! Linked plans -> device memory and the recorded work of every plan: the weights block
//! (uploaded once), the persistent buffers, a scratch block, one arena block per plan, and
//! per plan the list of kernel launches and cuBLAS products with every address resolved.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use susurrus_core::exec::link::{Link, Needs, SCALAR_TABLE_BYTES, StateBuffer};
use susurrus_core::exec::{Executable, Weights};
use susurrus_core::ir::NodeId;
use susurrus_core::ops::Op;
use susurrus_core::plan::{Plan, PlanOptions};
use susurrus_core::{Error, Result};

use super::device::{CudaBackend, DeviceBuffer, PinnedBuffer};
use super::layout::{Bases, ProgramLayout, stored_kind};
use super::lower::{Launch, LowerCtx, Operand, Precision, Scratch, lower};
use super::run::{CudaExecutable, Input, Output, Step};

/// What the executables of one program share.
pub(super) struct Shared {
    pub _weights: DeviceBuffer,
    pub states: DeviceBuffer,
    pub _scratch: DeviceBuffer,
    /// Persistent buffers by name: offset in `states` and the buffer.
    pub state_table: HashMap<String, (usize, StateBuffer)>,
}

/// The plan options of this backend: f16 values of the arena are kept as f32 words.
pub fn plan_options() -> PlanOptions {
    PlanOptions { max_buffer_bytes: usize::MAX, f16_bytes: 4 }
}

/// What this backend needs of the link: its plan options, and f16 weights widened to f32
/// words for f32 products.
pub fn needs(precision: Precision) -> Needs {
    Needs { backend: "cuda", plan: plan_options(), wide_f16_leaves: precision == Precision::F32 }
}

/// The work of every plan of a program: per plan, each scheduled node with its launches.
pub type ProgramWork = Vec<Vec<(NodeId, Vec<Launch>)>>;

/// Lowers every plan of the program `link` places, with its blocks laid out by `layout` at
/// `bases` and scratch at `scratch_base`. Returns the work and the scratch bytes the largest
/// op needs. Pure: the host-side tests run it with made-up addresses.
pub fn lower_program(
    link: &Link,
    layout: &ProgramLayout,
    bases: &Bases,
    scratch_base: u64,
    precision: Precision,
) -> Result<(ProgramWork, u64)> {
    let mut scratch_bytes = 0;
    let mut work = Vec::with_capacity(link.plans.len());
    for (p, linked) in link.plans.iter().enumerate() {
        let plan = &linked.plan;
        let g = &plan.graph;
        let scalars = layout.scalars(bases, p);
        let operand = |id: NodeId| {
            let place = linked.place(id);
            Operand { ptr: layout.address(bases, p, &place), kind: stored_kind(&place), ty: g.ty(id).clone() }
        };
        let mut steps = Vec::new();
        for &id in &plan.schedule {
            // Views are their input's bytes already.
            if plan.views[id.index()] {
                continue;
            }
            let node = g.node(id);
            let inputs: Vec<Operand> = node.inputs.iter().map(|&i| operand(i)).collect();
            let output = operand(id);
            let scratch = Scratch::new(scratch_base);
            let ctx = LowerCtx { inputs: &inputs, output: &output, scalars, precision, scratch: &scratch };
            let launches = lower(&node.op, &ctx).map_err(|e| match e {
                Error::Unsupported { .. } => e,
                other => Error::Backend(format!("cuda: lowering %{} ({}): {other}", id.0, node.op.name())),
            })?;
            scratch_bytes = scratch_bytes.max(scratch.used());
            if !launches.is_empty() {
                steps.push((id, launches));
            }
        }
        work.push(steps);
    }
    Ok((work, scratch_bytes))
}

/// True when no other value is ever stored in the arena bytes of input `id` (no other arena
/// buffer overlaps them and nothing computes in place there), so they still hold the last
/// run's value when the next run starts.
pub fn input_is_kept(plan: &Plan, id: NodeId) -> bool {
    let Some(b) = plan.buffer_of[id.index()] else { return false };
    let own = &plan.buffers[b];
    let only_views = own.values.iter().all(|&v| v == id || matches!(plan.graph.node(v).op, Op::Reshape(_)));
    let alone = plan
        .buffers
        .iter()
        .enumerate()
        .all(|(j, o)| j == b || o.offset + o.bytes <= own.offset || own.offset + own.bytes <= o.offset);
    only_views && alone
}

pub(super) fn compile_linked(
    backend: &CudaBackend,
    plans: &[&Plan],
    weights: &Weights,
) -> Result<Vec<Box<dyn Executable>>> {
    let link = Link::new(plans, weights, &needs(backend.precision))?;
    let layout = ProgramLayout::new(&link);

    let ctx = &backend.ctx;
    let weights_block = DeviceBuffer::zeroed(ctx, layout.leaves_bytes, "the weights")?;
    for (leaf, &offset) in link.leaves.iter().zip(&layout.leaves) {
        weights_block.upload(offset, &leaf.stored())?;
    }
    let states = DeviceBuffer::zeroed(ctx, layout.states_bytes, "the persistent buffers")?;
    let mut arenas = Vec::with_capacity(link.plans.len());
    for (p, linked) in link.plans.iter().enumerate() {
        let what = format!("the arena of '{}'", linked.plan.graph.name());
        arenas.push(DeviceBuffer::zeroed(ctx, layout.arena_allocation(p), &what)?);
    }
    let bases =
        Bases { weights: weights_block.ptr, states: states.ptr, arenas: arenas.iter().map(|a| a.ptr).collect() };
    // Lowered twice: once to learn how much scratch the largest op needs, then with its address.
    let (_, scratch_bytes) = lower_program(&link, &layout, &bases, 0, backend.precision)?;
    let scratch = DeviceBuffer::zeroed(ctx, scratch_bytes as usize, "scratch memory")?;
    let (work, _) = lower_program(&link, &layout, &bases, scratch.ptr, backend.precision)?;

    let state_table =
        link.states.iter().zip(&layout.states).map(|(s, &offset)| (s.name.clone(), (offset, s.clone()))).collect();
    let shared = Rc::new(RefCell::new(Shared { _weights: weights_block, states, _scratch: scratch, state_table }));
    let mut out: Vec<Box<dyn Executable>> = Vec::with_capacity(link.plans.len());
    for (p, (linked, (arena, steps))) in link.plans.iter().zip(arenas.into_iter().zip(work)).enumerate() {
        let plan = &linked.plan;
        let g = &plan.graph;
        let mut compiled = Vec::new();
        for (id, launches) in steps {
            for launch in launches {
                compiled.push(match launch {
                    Launch::Kernel(k) => Step::kernel(backend.function(k.name)?, &k, id),
                    Launch::Gemm(gemm) => Step::Gemm { gemm, node: id },
                });
            }
        }
        let mut inputs = Vec::new();
        let mut input_bytes = 0;
        for id in g.ids() {
            if let Op::Input(i) = &g.node(id).op {
                let at = linked.place(id);
                inputs.push(Input {
                    name: i.name.clone(),
                    address: layout.address(&bases, p, &at),
                    f16_words: at.f16_words,
                    staging_offset: input_bytes,
                    kept: input_is_kept(plan, id),
                    uploaded: false,
                });
                input_bytes = (input_bytes + at.bytes).next_multiple_of(16);
            }
        }
        let mut outputs = HashMap::new();
        for (name, id) in g.outputs() {
            let at = linked.place(*id);
            let staging = PinnedBuffer::new(ctx, at.bytes)?;
            let ty = g.ty(*id).clone();
            let address = layout.address(&bases, p, &at);
            outputs.insert(name.clone(), Output { ty, address, bytes: at.bytes, f16_words: at.f16_words, staging });
        }
        let scalars_address = layout.scalars(&bases, p);
        out.push(Box::new(CudaExecutable {
            ctx: ctx.clone(),
            stream: backend.stream.clone(),
            blas: backend.blas.clone(),
            graph: g.clone(),
            shared: Rc::clone(&shared),
            _arena: arena,
            scalars_address,
            scalar_staging: PinnedBuffer::new(ctx, SCALAR_TABLE_BYTES)?,
            input_staging: PinnedBuffer::new(ctx, input_bytes)?,
            inputs,
            outputs,
            steps: compiled,
            recorded: None,
            eager_runs: 0,
            chain: None,
            profile: backend.profile.clone(),
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use susurrus_core::ir::{Graph, TensorType};
    use susurrus_core::ops::BinaryKind;
    use susurrus_core::plan::plan_with;
    use susurrus_core::{DType, Shape};

    use super::*;

    /// `y = concat(x, x) + position`: `x` dies in `concat`, which cannot compute in place.
    pub(crate) fn kept_input_graph() -> Graph {
        let mut g = Graph::new("kept");
        let position = g.scalar("position");
        let s = g.read_scalar(position).unwrap();
        let x = g.input("x", TensorType::new(DType::U32, Shape(vec![4]))).unwrap();
        let c = g.concat(&[x, x], 0).unwrap();
        let y = g.binary(BinaryKind::Add, c, s).unwrap();
        g.output("y", y).unwrap();
        g
    }

    #[test]
    fn an_input_nothing_overwrites_is_kept() {
        let g = kept_input_graph();
        let plan = plan_with(g, &plan_options()).unwrap();
        let x = plan.graph.ids().find(|&id| matches!(plan.graph.node(id).op, Op::Input(_))).unwrap();
        assert!(input_is_kept(&plan, x));
    }

    /// A value placed in an input's bytes after the input's last use.
    #[test]
    fn an_input_whose_bytes_are_reused_is_not_kept() {
        let mut g = Graph::new("reused");
        let x = g.input("x", TensorType::new(DType::F32, Shape(vec![64]))).unwrap();
        let a = g.unary(susurrus_core::ops::UnaryKind::Neg, x).unwrap();
        let b = g.concat(&[a, a], 0).unwrap();
        let c = g.slice(b, 0, 0, 16).unwrap();
        let d = g.concat(&[c, c], 0).unwrap();
        g.output("d", d).unwrap();
        let plan = plan_with(g, &plan_options()).unwrap();
        let own = &plan.buffers[plan.buffer_of[x.index()].unwrap()];
        let overlapped = plan
            .buffers
            .iter()
            .any(|o| o != own && o.offset < own.offset + own.bytes && own.offset < o.offset + o.bytes);
        assert!(overlapped, "{:?}", plan.buffers);
        assert!(!input_is_kept(&plan, x));
    }
}
