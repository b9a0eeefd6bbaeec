//! The fast kernels, one file per op family, and the choice between them and the reference.
//!
//! [`choose`] looks at a node's op and operand types and returns a kernel when one applies
//! (f32 activations, the layouts Whisper's graphs use); anything else runs the op's
//! reference evaluation from the core, so every plan runs, and the hot paths run fast.

mod attention;
mod conv1d;
mod elementwise;
mod integer;
mod layout;
mod linear;
mod norm;
mod product;
mod reduce;
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
mod sgemm_wasm;

use susurrus_core::ir::{NodeId, TensorType};
use susurrus_core::ops::Op;
use susurrus_core::{Error, Result};

use super::memory::{Bases, Operand, Region};

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

/// What runs a step.
#[derive(Debug)]
pub enum Kernel {
    /// The op's reference evaluation on copies of its inputs.
    Reference,
    Linear(linear::Linear),
    Attention(attention::Attention),
    Conv1d(conv1d::Conv1d),
    Norm(norm::Norm),
    Elementwise(elementwise::Elementwise),
    Integer(integer::Integer),
    Reduce(reduce::Reduce),
    TopK(reduce::TopK),
    Slice(reduce::Slice),
    Permute(layout::Permute),
    KvWrite(layout::KvWrite),
    Gather(layout::Gather),
    /// Writes runtime scalar `.0` (a `scalar` read).
    Scalar(usize),
}

/// A fast kernel for `op` on `step`'s operands, and whether it computes elementwise in
/// place (may read an input through its output). `None`: run the reference.
pub fn choose(op: &Op, step: &Step) -> Option<(Kernel, bool)> {
    let t = &step.input_types;
    let out = &step.out_type;
    Some(match op {
        Op::MatMul(_) | Op::MatMulBias(_) => (Kernel::Linear(linear::Linear::choose(op, t, out)?), false),
        Op::Attention(a) => (Kernel::Attention(attention::Attention::choose(a, t, out)?), false),
        Op::Conv1d(c) => (Kernel::Conv1d(conv1d::Conv1d::choose(c, t, out)?), false),
        Op::LayerNorm(_) | Op::AddLayerNorm(_) => (Kernel::Norm(norm::Norm::choose(op, t, out)?), false),
        Op::Unary(_) | Op::Binary(_) | Op::Select(_) | Op::FusedElementwise(_) | Op::Compare(_) => {
            match elementwise::Elementwise::choose(op, t, out) {
                Some(k) => (Kernel::Elementwise(k), true),
                None => (Kernel::Integer(integer::Integer::choose(op, t, out)?), true),
            }
        }
        Op::Reduce(r) => (Kernel::Reduce(reduce::Reduce::choose_reduce(r, t, out)?), false),
        Op::Argmax(a) => (Kernel::Reduce(reduce::Reduce::choose_argmax(a, t)?), false),
        Op::TopK(k) => (Kernel::TopK(reduce::TopK::choose(k, t)?), false),
        Op::Slice(s) => (Kernel::Slice(reduce::Slice::choose(s, t)?), false),
        Op::Permute(p) => (Kernel::Permute(layout::Permute::choose(p, t, out)?), false),
        Op::KvWrite(k) => (Kernel::KvWrite(layout::KvWrite::choose(k, t, out)?), false),
        Op::Gather(_) => (Kernel::Gather(layout::Gather::choose(t, out)?), false),
        Op::ScalarRead(s) => (Kernel::Scalar(s.scalar.index()), false),
        _ => return None,
    })
}

/// Scratch memory steps share: widened weights, im2col columns. Grows to the largest need
/// during the first run and is reused after.
#[derive(Default)]
pub struct Scratch {
    pub weights: Vec<f32>,
    pub columns: Vec<f32>,
}

/// The input slice of `operand` (not [`Operand::Output`]).
///
/// # Safety
/// As [`Bases::slice`].
unsafe fn input<'a, T: bytemuck::Pod>(bases: &Bases, operand: Operand) -> Result<&'a [T]> {
    match operand {
        // SAFETY: the caller's contract.
        Operand::At(r) => Ok(unsafe { bases.slice(r) }),
        Operand::Output => Err(Error::Backend("cpu: a kernel that cannot run in place was given its output".into())),
    }
}

/// Runs a fast kernel (not [`Kernel::Reference`], which the executable runs itself).
pub fn run(step: &Step, bases: &Bases, scalars: &[u32], scratch: &mut Scratch, threads: usize) -> Result<()> {
    let out: Region = step.out;
    // SAFETY (all slices below): `compile::steps` resolved every region inside its buffer
    // (checked by the executable against `Bases::contains`), at an offset aligned for its
    // dtype (arena offsets are multiples of 256, buffers start aligned), and proved that
    // the output overlaps no input except as `Operand::Output`, which only elementwise and
    // KV-write kernels accept and read through the output slice. Weights and constants are
    // never outputs.
    unsafe {
        match &step.kernel {
            Kernel::Reference => Err(Error::Backend("cpu: the reference step reached the kernel table".into())),
            Kernel::Linear(k) => k.run(&step.inputs, bases, bases.slice_mut(out), scratch, threads),
            Kernel::Attention(k) => k.run(
                input(bases, step.inputs[0])?,
                input(bases, step.inputs[1])?,
                input(bases, step.inputs[2])?,
                step.inputs.get(3).map(|&m| input(bases, m)).transpose()?,
                bases.slice_mut(out),
            ),
            Kernel::Conv1d(k) => k.run(&step.inputs, bases, bases.slice_mut(out), scratch, threads),
            Kernel::Norm(k) => k.run(&step.inputs, bases, bases.slice_mut(out)),
            Kernel::Elementwise(k) => k.run(&step.inputs, bases, bases.slice_mut(out)),
            Kernel::Integer(k) => k.run(&step.inputs, bases, bases.slice_mut(out)),
            Kernel::Reduce(k) => k.run(input(bases, step.inputs[0])?, bases.slice_mut(out)),
            Kernel::TopK(k) => k.run(input(bases, step.inputs[0])?, bases.slice_mut(out)),
            Kernel::Slice(k) => k.run(input(bases, step.inputs[0])?, bases.slice_mut(out)),
            Kernel::Permute(k) => k.run(step.inputs[0], bases, out),
            Kernel::KvWrite(k) => k.run(input(bases, step.inputs[1])?, bases.slice_mut(out), scalars),
            Kernel::Gather(k) => k.run(&step.inputs, bases, out),
            Kernel::Scalar(i) => {
                let v = scalars.get(*i).ok_or_else(|| Error::Backend(format!("cpu: no runtime scalar #{i}")))?;
                bases.slice_mut::<u32>(out)[0] = *v;
                Ok(())
            }
        }
    }
}
