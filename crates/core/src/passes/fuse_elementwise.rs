//! Elementwise fusion: a tree of unary, binary and `where` ops with float results becomes one
//! [`FusedElementwise`] op, so it reads its inputs once and writes one result. Comparisons of
//! floats join inside a group (as 1.0 / 0.0, the condition of a `where`: a decoder step's
//! banned id ranges). A cast to f32 joins too, as no instruction: the program reads every
//! input as f32 already, exactly as the cast converts it (a decoder step's f16 embedding row
//! and its position add become one kernel; a u32 runtime scalar compared with float ids).
//!
//! Grown greedily from each root (latest node first): an operand joins the root's group when
//! it is itself fusable, feeds only that group, has the root's shape (so no value is
//! recomputed for broadcast copies; a cast computes nothing, so it joins at any shape; a
//! one-element value joins every group that reads it, at any shape: recomputing it per element
//! is cheaper than a launch, as for a decoder step's timestamp rules), and
//! keeps the group within [`MAX_FUSED_INPUTS`] (an operand whose subtree would exceed it is
//! read as an input instead, and fuses in a group of its own). Scalar constants are held in
//! the program, not read as inputs. Groups of one op are left alone. Inside the fused program
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

/// Most program words of one fused op, a constant taking two: what the CUDA interpreter
/// holds (one register per instruction). Groups grow within it like within the inputs.
pub const MAX_FUSED_WORDS: usize = 64;

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
                if builder.fused_ops < 2 || builder.inputs.len() > MAX_FUSED_INPUTS || builder.words() > MAX_FUSED_WORDS
                {
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

/// Ops a fused program can express with a float result: the roots of groups.
fn fusable(g: &Graph, id: NodeId) -> bool {
    match g.node(id).op {
        Op::Unary(_) | Op::Binary(_) | Op::Select(_) => g.ty(id).dtype.is_float(),
        Op::Cast(_) => is_f32_cast(g, id),
        _ => false,
    }
}

/// A cast to f32 of any value the program can load: the program's load converts alike.
fn is_f32_cast(g: &Graph, id: NodeId) -> bool {
    matches!(g.node(id).op, Op::Cast(_))
        && g.ty(id).dtype == DType::F32
        && g.ty(g.node(id).inputs[0]).dtype != DType::Q8
}

/// A comparison of floats: exact in the program's f32 values (integers, which compare in
/// their own type, stay outside), its 0/1 result read only by the group.
fn float_compare(g: &Graph, id: NodeId) -> bool {
    matches!(g.node(id).op, Op::Compare(_)) && g.node(id).inputs.iter().all(|&i| g.ty(i).dtype.is_float())
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
        let g = self.g;
        let same_shape = g.ty(id).shape == g.ty(self.root).shape;
        // One value recomputed per element costs a few instructions, where a kernel of its
        // own costs a launch: it joins every group that reads it.
        let one = g.ty(id).shape.numel() == 1;
        id == self.root
            || ((self.uses.single(id) || one)
                && (is_f32_cast(g, id) || ((fusable(g, id) || float_compare(g, id)) && (same_shape || one))))
    }

    /// Emits `id` and returns the index of the instruction holding its value. An operand
    /// whose subtree takes the group past [`MAX_FUSED_INPUTS`] or near [`MAX_FUSED_WORDS`] is
    /// taken back and read as an input.
    fn emit(&mut self, id: NodeId) -> u32 {
        if id == self.root || !self.joins(id) || self.emitted.contains_key(&id) {
            return self.emit_here(id);
        }
        let saved = (self.program.len(), self.inputs.len(), self.emitted.clone(), self.fused_ops);
        let index = self.emit_here(id);
        // Room kept for what may follow this operand: its load instead, and the root.
        if self.inputs.len() <= MAX_FUSED_INPUTS && self.words() + 3 <= MAX_FUSED_WORDS {
            return index;
        }
        let (program, inputs, emitted, fused_ops) = saved;
        self.program.truncate(program);
        self.inputs.truncate(inputs);
        (self.emitted, self.fused_ops) = (emitted, fused_ops);
        self.load(id)
    }

    /// The program's length in words, a constant taking two.
    fn words(&self) -> usize {
        self.program.iter().map(|i| if matches!(i, Instr::Const(_)) { 2 } else { 1 }).sum()
    }

    /// Emits `id` as an input of the group (a scalar constant as a constant of the program).
    fn load(&mut self, id: NodeId) -> u32 {
        let instr = match &self.g.node(id).op {
            Op::Const(c) if c.value.numel() == 1 && c.value.dtype() != DType::Q8 => Instr::Const(c.value.to_f32()[0]),
            _ => {
                self.inputs.push(id);
                Instr::Input(self.inputs.len() as u32 - 1)
            }
        };
        self.program.push(instr);
        let index = self.program.len() as u32 - 1;
        self.emitted.insert(id, index);
        index
    }

    /// [`ProgramBuilder::emit`] without the input limit: `id` joins if it may.
    fn emit_here(&mut self, id: NodeId) -> u32 {
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
        if !self.joins(id) {
            return self.load(id);
        }
        self.fused_ops += 1;
        let node = self.g.node(id);
        let args: Vec<u32> = node.inputs.clone().into_iter().map(|i| self.emit(i)).collect();
        let instr = match &node.op {
            Op::Unary(u) => Instr::Unary(u.kind, args[0]),
            Op::Binary(b) => Instr::Binary(b.kind, args[0], args[1]),
            Op::Compare(c) => Instr::Compare(c.kind, args[0], args[1]),
            // `joins` admits only unary, binary, compare, where and (above) casts.
            _ => Instr::Select(args[0], args[1], args[2]),
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
    use crate::ops::CmpKind;
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
            "graph ew {\n  %0 = input \"x\" : f32[4,3]\n  %1 = param \"b\" : f32[3]\n  \
             %2 = fused_elementwise(%0, %1) {in0; 0.5; mul($0,$1); in1; add($2,$3); tanh($4)} : f32[4,3]\n  \
             outputs: y=%2\n}"
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
    fn a_chain_beyond_the_input_limit_fuses_in_groups_within_it() {
        // x masked where ids equal each of 12 scalars: 14 inputs in all. Growing from the last
        // where, the operand that would pass the limit is read as an input instead and fuses
        // on its own: three groups, each within the limit (the scalar constant held inline).
        let mut g = Graph::new("ew");
        let mut x = g.input("x", TensorType::new(DType::F32, [2, 8])).unwrap();
        let ids = g.input("ids", TensorType::new(DType::F32, [2, 8])).unwrap();
        let masked = g.constant(Tensor::scalar_f32(-1e30));
        for i in 0..12 {
            let s = g.input(&format!("s{i}"), TensorType::new(DType::F32, [])).unwrap();
            let hit = g.compare(CmpKind::Eq, ids, s).unwrap();
            x = g.select(hit, masked, x).unwrap();
        }
        g.output("y", x).unwrap();
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 0.0);
        assert!(changed);
        let fused: Vec<_> = after.nodes().iter().filter(|n| matches!(n.op, Op::FusedElementwise(_))).collect();
        assert_eq!(fused.iter().map(|n| n.inputs.len()).collect::<Vec<_>>(), [4, 7, 7], "{after}");
        assert!(!after.to_string().contains("= where"), "{after}");
    }

    #[test]
    fn float_comparisons_join_as_conditions_and_integer_ones_stay() {
        // A banned range of float ids: where(id >= lo, where(id < hi, -1e30, x), x), with lo
        // and hi u32 scalars cast to f32 (no instruction, at any shape).
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F32, [1, 6])).unwrap();
        let ids = g.constant(Tensor::f32([1, 6], (0..6).map(|i| i as f32).collect()).unwrap());
        let lo = g.input("lo", TensorType::new(DType::U32, [])).unwrap();
        let hi = g.input("hi", TensorType::new(DType::U32, [])).unwrap();
        let (lo, hi) = (g.cast(lo, DType::F32).unwrap(), g.cast(hi, DType::F32).unwrap());
        let ban = g.constant(Tensor::scalar_f32(-1e30));
        let ge = g.compare(CmpKind::Ge, ids, lo).unwrap();
        let lt = g.compare(CmpKind::Lt, ids, hi).unwrap();
        let inner = g.select(lt, ban, x).unwrap();
        let y = g.select(ge, inner, x).unwrap();
        g.output("y", y).unwrap();
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 0.0);
        assert!(changed);
        let fused: Vec<_> = after.nodes().iter().filter(|n| matches!(n.op, Op::FusedElementwise(_))).collect();
        assert_eq!(fused.len(), 1, "{after}");
        assert!(["cast", "= ge", "= lt", "= where"].iter().all(|op| !after.to_string().contains(op)), "{after}");
        assert!(after.to_string().contains("ge($0,$1)") && after.to_string().contains("lt($0,$3)"), "{after}");
        // Integers compare in their own type: the comparison stays a node.
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F32, [3])).unwrap();
        let i = g.input("i", TensorType::new(DType::U32, [3])).unwrap();
        let j = g.input("j", TensorType::new(DType::U32, [3])).unwrap();
        let lt = g.compare(CmpKind::Lt, i, j).unwrap();
        let e = g.exp(x).unwrap();
        let y = g.select(lt, e, x).unwrap();
        g.output("y", y).unwrap();
        let (after, _) = run_and_compare(&FuseElementwise, &g, 0.0);
        assert!(after.to_string().contains("= lt(%1, %2)"), "{after}");
    }

    #[test]
    fn long_chains_fuse_in_groups_within_the_word_limit() {
        let mut g = Graph::new("ew");
        let mut x = g.input("x", TensorType::new(DType::F32, [3])).unwrap();
        for _ in 0..150 {
            x = g.neg(x).unwrap();
        }
        g.output("y", x).unwrap();
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 0.0);
        assert!(changed);
        let programs: Vec<usize> = after
            .nodes()
            .iter()
            .filter_map(|n| match &n.op {
                Op::FusedElementwise(f) => Some(f.program.len()),
                _ => None,
            })
            .collect();
        assert!(programs.len() >= 3 && programs.iter().all(|&n| n <= MAX_FUSED_WORDS), "{programs:?}");
    }

    #[test]
    fn one_element_values_join_every_group_that_reads_them() {
        // hi = (t >= 3) * 4 + 1 from a one-element input, read by two groups of another shape:
        // each recomputes it, and no kernel of one element is left.
        let mut g = Graph::new("ew");
        let x = g.input("x", TensorType::new(DType::F32, [1, 6])).unwrap();
        let ids = g.constant(Tensor::f32([1, 6], (0..6).map(|i| i as f32).collect()).unwrap());
        let t = g.input("t", TensorType::new(DType::U32, [1])).unwrap();
        let t = g.cast(t, DType::F32).unwrap();
        let three = g.constant(Tensor::scalar_f32(3.0));
        let is_big = g.compare(CmpKind::Ge, t, three).unwrap();
        let is_big = g.cast(is_big, DType::F32).unwrap();
        let four = g.constant(Tensor::scalar_f32(4.0));
        let one = g.constant(Tensor::scalar_f32(1.0));
        let scaled = g.mul(is_big, four).unwrap();
        let hi = g.add(scaled, one).unwrap();
        let below = g.compare(CmpKind::Lt, ids, hi).unwrap();
        let ban = g.constant(Tensor::scalar_f32(-1e30));
        let y = g.select(below, ban, x).unwrap();
        let e = g.exp(x).unwrap();
        let z = g.mul(e, hi).unwrap();
        g.output("y", y).unwrap();
        g.output("z", z).unwrap();
        let (after, changed) = run_and_compare(&FuseElementwise, &g, 0.0);
        assert!(changed);
        let mut after = after;
        crate::passes::dce::DeadCodeElimination.run(&mut after).unwrap();
        let kernels: Vec<_> = after.nodes().iter().filter(|n| !n.op.is_leaf()).collect();
        assert_eq!(kernels.len(), 2, "{after}");
        assert!(kernels.iter().all(|n| matches!(n.op, Op::FusedElementwise(_)) && n.ty.shape.numel() == 6), "{after}");
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
