//! Elementwise fusion: a tree of unary, binary and `where` ops with float results becomes one
//! [`FusedElementwise`] op, so it reads its inputs once and writes one result. A cast of a
//! float to f32 joins too, as no instruction: the program reads every input as f32 already
//! (a decoder step's f16 embedding row and its position add become one kernel).
//!
//! Grown greedily from each root (latest node first): an operand joins the root's group when
//! it is itself fusable, feeds only that group, and has the root's shape (so no value is
//! recomputed for broadcast copies). Groups of one op are left alone. Inside the fused program
//! values stay f32, so an f16 chain is rounded once at the end rather than after every op.

use std::collections::HashMap;

use super::Pass;
use super::pattern::{Uses, rewrite_to_fixpoint, try_replace};
use crate::error::Result;
use crate::ir::{DType, Graph, NodeId};
use crate::ops::{FusedElementwise, Instr, Op};

/// Most external inputs of one fused op: a GPU dispatch binds at most 8 storage buffers
/// (WebGPU's default), one of them the output. Larger groups are left unfused.
pub const MAX_FUSED_INPUTS: usize = 7;

pub struct FuseElementwise;

impl Pass for FuseElementwise {
    fn name(&self) -> &'static str {
        "fuse_elementwise"
    }

    fn run(&self, g: &mut Graph) -> Result<bool> {
        rewrite_to_fixpoint(g, |g| {
            let uses = Uses::of(g);
            let ids: Vec<_> = g.ids().collect();
            for &root in ids.iter().rev() {
                if !fusable(g, root) {
                    continue;
                }
                let mut builder = ProgramBuilder::new(g, &uses, root);
                builder.emit(root);
                if builder.fused_ops < 2 || builder.inputs.len() > MAX_FUSED_INPUTS {
                    continue;
                }
                let (program, inputs) = (builder.program, builder.inputs);
                let op = FusedElementwise { program, dtype: g.ty(root).dtype };
                if try_replace(g, root, op, &inputs)? {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }
}

/// Ops a fused program can express, with a float result.
fn fusable(g: &Graph, id: NodeId) -> bool {
    match g.node(id).op {
        Op::Unary(_) | Op::Binary(_) | Op::Select(_) => g.ty(id).dtype.is_float(),
        Op::Cast(_) => g.ty(id).dtype == DType::F32 && g.ty(g.node(id).inputs[0]).dtype.is_float(),
        _ => false,
    }
}

/// Emits the program of one group in operand order, deduplicating shared operands.
struct ProgramBuilder<'g> {
    g: &'g Graph,
    uses: &'g Uses,
    root: NodeId,
    program: Vec<Instr>,
    inputs: Vec<NodeId>,
    /// Instruction index of each value already emitted (fused nodes and loaded inputs).
    emitted: HashMap<NodeId, u32>,
    fused_ops: usize,
}

impl<'g> ProgramBuilder<'g> {
    fn new(g: &'g Graph, uses: &'g Uses, root: NodeId) -> Self {
        ProgramBuilder { g, uses, root, program: Vec::new(), inputs: Vec::new(), emitted: HashMap::new(), fused_ops: 0 }
    }

    /// True when `id` joins the group: the root, or a fusable operand used only by the group
    /// with the root's shape.
    fn joins(&self, id: NodeId) -> bool {
        id == self.root
            || (fusable(self.g, id) && self.uses.single(id) && self.g.ty(id).shape == self.g.ty(self.root).shape)
    }

    /// Emits `id` and returns the index of the instruction holding its value.
    fn emit(&mut self, id: NodeId) -> u32 {
        if let Some(&i) = self.emitted.get(&id) {
            return i;
        }
        if self.joins(id) && matches!(self.g.node(id).op, Op::Cast(_)) {
            // Exact in the program's f32 values: the value is its operand's.
            self.fused_ops += 1;
            let value = self.emit(self.g.node(id).inputs[0]);
            self.emitted.insert(id, value);
            return value;
        }
        let instr = if self.joins(id) {
            self.fused_ops += 1;
            let node = self.g.node(id);
            let args: Vec<u32> = node.inputs.clone().into_iter().map(|i| self.emit(i)).collect();
            match &node.op {
                Op::Unary(u) => Instr::Unary(u.kind, args[0]),
                Op::Binary(b) => Instr::Binary(b.kind, args[0], args[1]),
                // `fusable` admits only unary, binary, where and (above) casts.
                _ => Instr::Select(args[0], args[1], args[2]),
            }
        } else {
            self.inputs.push(id);
            Instr::Input(self.inputs.len() as u32 - 1)
        };
        self.program.push(instr);
        let index = self.program.len() as u32 - 1;
        self.emitted.insert(id, index);
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};
    use crate::passes::testing::run_and_compare;
    use crate::tensor::Tensor;

    #[test]
    fn fuses_a_chain_with_broadcast_inputs() {
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F32, [4, 3])).unwrap();
        let s = g.constant(Tensor::scalar_f32(0.5));
        let b = g.param("b", TensorType::new(DType::F32, [3])).unwrap();
        let t = g.mul(x, s).unwrap();
        let u = g.add(t, b).unwrap();
        let v = g.tanh(u).unwrap();
        g.output("y", v).unwrap();
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 1e-6);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph ew {\n  %0 = input \"x\" : f32[4,3]\n  %1 = const [0.5] : f32[]\n  %2 = param \"b\" : f32[3]\n  \
             %3 = fused_elementwise(%0, %1, %2) {in0; in1; mul($0,$1); in2; add($2,$3); tanh($4)} : f32[4,3]\n  \
             outputs: y=%3\n}"
        );
    }

    #[test]
    fn shared_values_stay_outside_and_are_loaded_once() {
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F32, [5])).unwrap();
        let e = g.exp(x).unwrap();
        // `e` feeds two ops and the output, so it stays a node of its own.
        let a = g.mul(e, e).unwrap();
        let b = g.sigmoid(a).unwrap();
        g.output("y", b).unwrap();
        g.output("e", e).unwrap();
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 1e-6);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph ew {\n  %0 = input \"x\" : f32[5]\n  %1 = exp(%0) : f32[5]\n  \
             %2 = fused_elementwise(%1) {in0; mul($0,$0); sigmoid($1)} : f32[5]\n  outputs: y=%2, e=%1\n}"
        );
    }

    #[test]
    fn single_ops_and_integer_ops_are_left_alone() {
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F32, [3])).unwrap();
        let i = g.input("i", TensorType::new(DType::I32, [3])).unwrap();
        let y = g.relu(x).unwrap();
        let j = g.add(i, i).unwrap();
        let k = g.mul(j, i).unwrap();
        g.output("y", y).unwrap();
        g.output("k", k).unwrap();
        let before = g.to_string();
        assert!(!FuseElementwise.run(&mut g).unwrap());
        assert_eq!(g.to_string(), before);
    }

    #[test]
    fn no_fused_op_takes_more_inputs_than_a_dispatch_can_bind() {
        let mut g = Graph::new("ew");
        let xs: Vec<_> = (0..=MAX_FUSED_INPUTS)
            .map(|i| g.input(&format!("x{i}"), TensorType::new(DType::F32, [3])).unwrap())
            .collect();
        let mut sum = xs[0];
        for &x in &xs[1..] {
            sum = g.add(sum, x).unwrap();
        }
        g.output("y", sum).unwrap();
        // The whole chain reads 8 inputs: the last add stays outside, the rest fuses.
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 1e-6);
        assert!(changed);
        let fused: Vec<_> = after.nodes().iter().filter(|n| matches!(n.op, Op::FusedElementwise(_))).collect();
        assert_eq!(fused.len(), 1, "{after}");
        assert_eq!(fused[0].inputs.len(), MAX_FUSED_INPUTS, "{after}");
        assert!(after.to_string().contains("= add("), "{after}");
    }

    #[test]
    fn widening_casts_join_as_no_instruction_and_narrowing_ones_stay() {
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F16, [2, 3])).unwrap();
        let p = g.input("p", TensorType::new(DType::F32, [2, 3])).unwrap();
        let wide = g.cast(x, DType::F32).unwrap();
        let y = g.add(wide, p).unwrap();
        g.output("y", y).unwrap();
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 0.0);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph ew {\n  %0 = input \"x\" : f16[2,3]\n  %1 = input \"p\" : f32[2,3]\n  \
             %2 = fused_elementwise(%0, %1) {in0; in1; add($0,$1)} : f32[2,3]\n  outputs: y=%2\n}"
        );
        // A cast to f16 rounds: it stays a node of its own.
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F32, [3])).unwrap();
        let e = g.exp(x).unwrap();
        let narrow = g.cast(e, DType::F16).unwrap();
        let y = g.neg(narrow).unwrap();
        g.output("y", y).unwrap();
        let before = g.to_string();
        assert!(!FuseElementwise.run(&mut g).unwrap());
        assert_eq!(g.to_string(), before);
    }
}
