//! Plan -> steps: each scheduled node becomes one [`Step`], a fast kernel where the node's
//! op, dtypes and memory allow one ([`super::kernels`]), else the op's reference evaluation
//! ([`Kernel::Reference`]). Regions are resolved and checked here once, so a run is a loop
//! over steps with no lookups.

use susurrus_core::ir::{NodeId, TensorType};
use susurrus_core::ops::Op;
use susurrus_core::plan::{Plan, Storage};
use susurrus_core::{Error, Result};

use super::kernels::{self, Kernel};
use super::memory::{Buf, Region};

/// Where a step reads an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    At(Region),
    /// The input is the output's own region (an elementwise op computed in place): the
    /// kernel reads element `i` through the output before writing it.
    Output,
}

/// One node's work.
#[derive(Debug)]
pub struct Step {
    pub node: NodeId,
    pub kernel: Kernel,
    pub inputs: Vec<Operand>,
    /// The input regions as the plan stored them (the reference evaluation reads these).
    pub input_regions: Vec<Region>,
    pub input_types: Vec<TensorType>,
    pub out: Region,
    pub out_type: TensorType,
}

/// The names behind [`Buf`] indices.
pub struct Names<'a> {
    pub states: &'a [String],
    pub params: &'a [String],
    pub consts: &'a [NodeId],
}

/// The region the plan gave node `id`.
pub fn region(plan: &Plan, id: NodeId, names: &Names) -> Result<Region> {
    let missing = |what: &str| Error::Backend(format!("cpu: %{} is stored in an unknown {what}", id.0));
    let bytes = plan.graph.ty(id).byte_size();
    let (buf, offset) = match &plan.storage[id.index()] {
        Storage::Arena { offset, size } if *size == bytes => (Buf::Arena, *offset),
        Storage::Arena { size, .. } => {
            return Err(Error::Backend(format!(
                "cpu: %{} holds {bytes} bytes but the plan gave it {size} (plan with the default options)",
                id.0
            )));
        }
        Storage::State(name) => {
            (Buf::State(names.states.iter().position(|n| n == name).ok_or_else(|| missing("state"))?), 0)
        }
        Storage::Param(name) => {
            (Buf::Param(names.params.iter().position(|n| n == name).ok_or_else(|| missing("weight"))?), 0)
        }
        Storage::Const(c) => {
            (Buf::Const(names.consts.iter().position(|n| n == c).ok_or_else(|| missing("constant"))?), 0)
        }
    };
    Ok(Region { buf, offset, bytes })
}

/// The steps of `plan`, in schedule order (leaves need none: inputs are copied in before
/// the loop, and weights, constants and states are read where they are).
pub fn steps(plan: &Plan, names: &Names) -> Result<Vec<Step>> {
    let g = &plan.graph;
    let mut out = Vec::new();
    for &id in &plan.schedule {
        let node = g.node(id);
        if node.op.is_leaf() && !matches!(node.op, Op::ScalarRead(_)) {
            continue;
        }
        let out_region = region(plan, id, names)?;
        let input_regions = node.inputs.iter().map(|&i| region(plan, i, names)).collect::<Result<Vec<_>>>()?;
        let input_types: Vec<TensorType> = node.inputs.iter().map(|&i| g.ty(i).clone()).collect();
        // A view (reshape, a KV write's result) stored where its input is needs no work.
        if matches!(node.op, Op::Reshape(_)) && input_regions.first() == Some(&out_region) {
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
        if let Some((kernel, in_place)) = kernels::choose(&node.op, &step) {
            if let Some(inputs) = operands(&step, in_place, &node.op) {
                step.kernel = kernel;
                step.inputs = inputs;
            }
        }
        out.push(step);
    }
    Ok(out)
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
