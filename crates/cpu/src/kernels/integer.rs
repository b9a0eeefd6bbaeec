//! Comparisons (any dtype, giving u32 0/1) and integer arithmetic (u32/i32, wrapping): the
//! id-range masks of token selection run over the whole vocabulary every decoder step.

use rayon::prelude::*;
use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::{BinaryKind, CmpKind, Op};

use super::super::memory::Bases;
use super::super::memory::Operand;
use super::elementwise::{Broadcast, broadcast, load_broadcast};

#[derive(Clone, Copy, Debug, PartialEq)]
enum What {
    Compare(CmpKind),
    Arith(BinaryKind),
}

#[derive(Debug)]
pub struct Integer {
    what: What,
    dtype: DType,
    a: Broadcast,
    b: Broadcast,
}

impl Integer {
    pub fn choose(op: &Op, t: &[TensorType], out: &TensorType) -> Option<Self> {
        let what = match op {
            Op::Compare(c) => What::Compare(c.kind),
            Op::Binary(b) if !matches!(b.kind, BinaryKind::Div) && matches!(t[0].dtype, DType::U32 | DType::I32) => {
                What::Arith(b.kind)
            }
            _ => return None,
        };
        if t[0].dtype != t[1].dtype || t[0].dtype == DType::F16 {
            return None;
        }
        Some(Integer { what, dtype: t[0].dtype, a: broadcast(&t[0], out)?, b: broadcast(&t[1], out)? })
    }

    /// # Safety
    /// As [`Bases::slice`] for the operands.
    pub unsafe fn run(&self, ops: &[Operand], bases: &Bases, out: &mut [u32]) -> Result<()> {
        // SAFETY: the caller's contract.
        let src = |o: Operand| match o {
            Operand::At(r) => Some(unsafe { bases.slice::<u32>(r) }),
            Operand::Output => None,
        };
        let (a, b) = (src(ops[0]), src(ops[1]));
        let job = |first: usize, part: &mut [u32]| {
            let (mut xa, mut xb) = ([0u32; BLOCK], [0u32; BLOCK]);
            for (c, chunk) in part.chunks_mut(BLOCK).enumerate() {
                let (at, len) = (first + c * BLOCK, chunk.len());
                load(&mut xa[..len], a, self.a, chunk, at);
                load(&mut xb[..len], b, self.b, chunk, at);
                self.block(chunk, &xa[..len], &xb[..len]);
            }
        };
        if out.len() < PARALLEL {
            job(0, out);
        } else {
            out.par_chunks_mut(PARALLEL / 4).enumerate().for_each(|(c, part)| job(c * (PARALLEL / 4), part));
        }
        Ok(())
    }

    /// One block, with the operation chosen outside the element loop so each loop is a
    /// single comparison or operation the compiler vectorises.
    fn block(&self, out: &mut [u32], x: &[u32], y: &[u32]) {
        macro_rules! compare {
            ($k:expr, $conv:expr) => {
                match $k {
                    CmpKind::Eq => apply(out, x, y, |a, b| ($conv(a) == $conv(b)) as u32),
                    CmpKind::Ne => apply(out, x, y, |a, b| ($conv(a) != $conv(b)) as u32),
                    CmpKind::Lt => apply(out, x, y, |a, b| ($conv(a) < $conv(b)) as u32),
                    CmpKind::Le => apply(out, x, y, |a, b| ($conv(a) <= $conv(b)) as u32),
                    CmpKind::Gt => apply(out, x, y, |a, b| ($conv(a) > $conv(b)) as u32),
                    CmpKind::Ge => apply(out, x, y, |a, b| ($conv(a) >= $conv(b)) as u32),
                }
            };
        }
        match (self.what, self.dtype) {
            (What::Compare(k), DType::F32) => compare!(k, f32::from_bits),
            (What::Compare(k), DType::I32) => compare!(k, |v: u32| v as i32),
            (What::Compare(k), _) => compare!(k, |v: u32| v),
            // 32-bit wrapping results: what the reference's i64 arithmetic keeps in 32 bits.
            (What::Arith(BinaryKind::Add), _) => apply(out, x, y, u32::wrapping_add),
            (What::Arith(BinaryKind::Sub), _) => apply(out, x, y, u32::wrapping_sub),
            (What::Arith(BinaryKind::Mul), _) => apply(out, x, y, u32::wrapping_mul),
            (What::Arith(BinaryKind::Max), DType::I32) => apply(out, x, y, |a, b| (a as i32).max(b as i32) as u32),
            (What::Arith(BinaryKind::Min), DType::I32) => apply(out, x, y, |a, b| (a as i32).min(b as i32) as u32),
            (What::Arith(BinaryKind::Max), _) => apply(out, x, y, u32::max),
            (What::Arith(BinaryKind::Min), _) => apply(out, x, y, u32::min),
            // Never chosen: `choose` leaves division to the reference, which reports a zero
            // divisor; without a panic path here all the same.
            (What::Arith(BinaryKind::Div), DType::I32) => {
                apply(out, x, y, |a, b| (a as i32).checked_div(b as i32).map_or(0, |q| q as u32))
            }
            (What::Arith(BinaryKind::Div), _) => apply(out, x, y, |a, b| a.checked_div(b).unwrap_or(0)),
        }
    }
}

/// Elements below which one thread does the whole job.
const PARALLEL: usize = 1 << 15;

/// Elements per block.
const BLOCK: usize = 512;

/// Operand values for output elements `first..first + r.len()` (`None`: the output itself).
fn load(r: &mut [u32], src: Option<&[u32]>, bc: Broadcast, out: &[u32], first: usize) {
    match (src, bc) {
        (None, _) => r.copy_from_slice(out),
        (Some(s), Broadcast::Full) => r.copy_from_slice(&s[first..first + r.len()]),
        (Some(s), Broadcast::Suffix(1)) => r.fill(s[0]),
        (Some(s), bc) => load_broadcast(r, s, first, bc, |w| w),
    }
}

/// `out[i] = f(x[i], y[i])`; generic so each operation gets its own loop.
#[inline(always)]
fn apply(out: &mut [u32], x: &[u32], y: &[u32], f: impl Fn(u32, u32) -> u32) {
    for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
        *o = f(x, y);
    }
}
