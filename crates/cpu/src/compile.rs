//! Plan -> steps: each scheduled node becomes one [`Step`], a fast kernel where the node's
//! op, dtypes and memory allow one ([`super::kernels`]), else the op's reference evaluation
//! ([`Kernel::Reference`]). Regions come from the link's places once, so a run is a loop
//! over steps with no lookups.

use susurrus_core::exec::link::LinkedPlan;
use susurrus_core::ir::TensorType;
use susurrus_core::ops::Op;

use super::kernels::{self, Kernel, Step};
use super::memory::{Operand, Region};

/// The steps of a linked plan, in schedule order (leaves need none: inputs are copied in
/// before the loop, and weights, constants and states are read where they are).
pub fn steps(linked: &LinkedPlan) -> Vec<Step> {
    let g = &linked.plan.graph;
    let mut out = Vec::new();
    for &id in &linked.plan.schedule {
        let node = g.node(id);
        if node.op.is_leaf() && !matches!(node.op, Op::ScalarRead(_)) {
            continue;
        }
        let out_region = Region::at(linked.place(id));
        let input_regions: Vec<Region> = node.inputs.iter().map(|&i| Region::at(linked.place(i))).collect();
        let input_types: Vec<TensorType> = node.inputs.iter().map(|&i| g.ty(i).clone()).collect();
        // A view (a reshape, or a slice inside its input's bytes) needs no work.
        if linked.plan.views[id.index()] {
            continue;
        }
        let mut step = Step {
            node: id,
            kernel: Kernel::Reference,
            inputs: input_regions.iter().map(|&r| Operand::At(r)).collect(),
            input_regions,
            input_types,
            out: out_region,
            out_type: node.ty.clone(),
        };
        if let Some((kernel, in_place)) = kernels::choose(&node.op, &step)
            && let Some(inputs) = operands(&step, in_place, &node.op)
        {
            step.kernel = kernel;
            step.inputs = inputs;
        }
        out.push(step);
    }
    out
}

/// The operands of a fast kernel, or `None` when its output overlaps an input in a way the
/// kernel cannot take (then the reference evaluation, which copies its inputs first, runs).
/// `in_place`: the kernel reads element `i` of every input before writing element `i` of
/// the output, so an input that is exactly the output is allowed. A KV write's output is
/// its buffer (input 0) by definition.
fn operands(step: &Step, in_place: bool, op: &Op) -> Option<Vec<Operand>> {
    step.input_regions
        .iter()
        .enumerate()
        .map(|(pos, r)| {
            if !r.overlaps(&step.out) {
                Some(Operand::At(*r))
            } else if (in_place && *r == step.out && step.input_types[pos].dtype.size() == step.out_type.dtype.size())
                || (matches!(op, Op::KvWrite(_)) && pos == 0 && *r == step.out)
            {
                Some(Operand::Output)
            } else {
                None
            }
        })
        .collect()
}
