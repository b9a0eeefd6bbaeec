//! Unary, binary, `where` and fused elementwise programs, one interpreter for all: the
//! program runs over blocks of 256 elements, one instruction at a time across the block,
//! so each instruction is a tight loop the compiler vectorises.

use rayon::prelude::*;
use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::{BinaryKind, Instr, Op, UnaryKind};

use super::super::memory::Bases;
use super::super::memory::Operand;
use super::super::simd;

/// Elements per block.
const BLOCK: usize = 256;
/// Elements below which one thread does the whole job.
const PARALLEL: usize = 1 << 15;

/// How an input's elements map onto the output's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Broadcast {
    /// Same shape: element `i`.
    Full,
    /// Its dims are the output's trailing dims (after leading ones): element `i % len`.
    Suffix(usize),
    /// Its dims are the output's leading dims (then ones), each of its elements spread over
    /// `inner` consecutive outputs: element `i / inner` (a beam's score beside its row of
    /// the vocabulary).
    Prefix(usize),
}

#[derive(Debug)]
pub struct Elementwise {
    program: Vec<Instr>,
    inputs: Vec<(Broadcast, Word)>,
    n: usize,
}

impl Elementwise {
    /// f32 operands and output; `where`'s condition may be u32/i32 (read as nonzero).
    pub fn choose(op: &Op, t: &[TensorType], out: &TensorType) -> Option<Self> {
        let program = match op {
            Op::Unary(u) => vec![Instr::Input(0), Instr::Unary(u.kind, 0)],
            Op::Binary(b) => vec![Instr::Input(0), Instr::Input(1), Instr::Binary(b.kind, 0, 1)],
            Op::Select(_) => vec![Instr::Input(0), Instr::Input(1), Instr::Input(2), Instr::Select(0, 1, 2)],
            Op::FusedElementwise(f) => f.program.clone(),
            _ => return None,
        };
        if out.dtype != DType::F32 {
            return None;
        }
        let fused = matches!(op, Op::FusedElementwise(_));
        let conds: Vec<bool> = (0..t.len()).map(|i| matches!(op, Op::Select(_)) && i == 0).collect();
        let inputs = t
            .iter()
            .zip(conds)
            .map(|(ty, cond)| {
                // Fused programs read integers by value (as the reference converts them);
                // `where` reads its integer condition as nonzero.
                let word = match ty.dtype {
                    DType::F32 => Word::F32,
                    DType::U32 if fused => Word::U32,
                    DType::I32 if fused => Word::I32,
                    DType::U32 | DType::I32 if cond => Word::Truth,
                    _ => return None,
                };
                broadcast(ty, out).map(|b| (b, word))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Elementwise { program, inputs, n: out.numel() })
    }

    /// # Safety
    /// As [`Bases::slice`] for the operands.
    pub unsafe fn run(&self, ops: &[Operand], bases: &Bases, out: &mut [f32]) -> Result<()> {
        // Integer conditions are read as raw words: nonzero is true, as the reference has it.
        let sources: Vec<Option<&[u32]>> = ops
            .iter()
            .map(|&o| match o {
                // SAFETY: the caller's contract (f32 and u32/i32 are all 4-byte words).
                Operand::At(r) => Some(unsafe { bases.slice::<u32>(r) }),
                Operand::Output => None,
            })
            .collect();
        let job = |first: usize, chunk: &mut [f32]| {
            let mut regs = vec![[0.0f32; BLOCK]; self.program.len()];
            for (b, block) in chunk.chunks_mut(BLOCK).enumerate() {
                self.block(first + b * BLOCK, block, &sources, &mut regs);
            }
        };
        if self.n < PARALLEL {
            job(0, out);
        } else {
            out.par_chunks_mut(BLOCK * 16).enumerate().for_each(|(c, chunk)| job(c * BLOCK * 16, chunk));
        }
        Ok(())
    }

    /// Runs the program on elements `first..first + out.len()`.
    fn block(&self, first: usize, out: &mut [f32], sources: &[Option<&[u32]>], regs: &mut [[f32; BLOCK]]) {
        let len = out.len();
        for (i, ins) in self.program.iter().enumerate() {
            let (done, rest) = regs.split_at_mut(i);
            let r = &mut rest[0][..len];
            match *ins {
                Instr::Input(n) => {
                    let (bc, word) = self.inputs[n as usize];
                    match sources[n as usize] {
                        None => r.copy_from_slice(out),
                        Some(src) => load(r, src, first, bc, word),
                    }
                }
                Instr::Const(v) => r.fill(v),
                Instr::Unary(kind, a) => unary(kind, &done[a as usize][..len], r),
                Instr::Binary(kind, a, b) => {
                    let (x, y) = (&done[a as usize][..len], &done[b as usize][..len]);
                    binary(kind, x, y, r)
                }
                Instr::Compare(kind, a, b) => {
                    let (x, y) = (&done[a as usize][..len], &done[b as usize][..len]);
                    for j in 0..len {
                        r[j] = f32::from(u8::from(kind.holds(x[j], y[j])));
                    }
                }
                Instr::Select(c, a, b) => {
                    let (c, x, y) = (&done[c as usize][..len], &done[a as usize][..len], &done[b as usize][..len]);
                    for j in 0..len {
                        r[j] = if c[j] != 0.0 { x[j] } else { y[j] };
                    }
                }
            }
        }
        out.copy_from_slice(&regs[self.program.len() - 1][..len]);
    }
}

/// The broadcast of an input of type `t` to `out`, if it is one this kernel takes.
pub(super) fn broadcast(t: &TensorType, out: &TensorType) -> Option<Broadcast> {
    if t.shape == out.shape {
        return Some(Broadcast::Full);
    }
    let dims: Vec<usize> = t.shape.dims().iter().copied().skip_while(|&d| d == 1).collect();
    let o = out.shape.dims();
    if dims.len() <= o.len() && o[o.len() - dims.len()..] == dims[..] {
        return Some(Broadcast::Suffix(dims.iter().product::<usize>().max(1)));
    }
    // The same rank as the output: its leading dims, then ones.
    let t = t.shape.dims();
    let lead = t.len() - t.iter().rev().take_while(|&&d| d == 1).count();
    (t.len() == o.len() && t[..lead] == o[..lead]).then(|| Broadcast::Prefix(o[lead..].iter().product()))
}

/// Fills `r` with the source elements of outputs `first..first + r.len()` under a broadcast,
/// each read by `read`.
#[inline(always)]
pub(super) fn load_broadcast<T: Copy, U>(r: &mut [U], src: &[T], first: usize, bc: Broadcast, read: impl Fn(T) -> U) {
    match bc {
        Broadcast::Full => r.iter_mut().zip(&src[first..]).for_each(|(v, &w)| *v = read(w)),
        Broadcast::Suffix(len) => {
            let mut at = first % len;
            for v in r.iter_mut() {
                *v = read(src[at]);
                at += 1;
                if at == len {
                    at = 0;
                }
            }
        }
        Broadcast::Prefix(inner) => {
            let (mut at, mut within) = (first / inner, first % inner);
            for v in r.iter_mut() {
                *v = read(src[at]);
                within += 1;
                if within == inner {
                    within = 0;
                    at += 1;
                }
            }
        }
    }
}

/// How an operand's 32-bit words are read as f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Word {
    F32,
    /// An integer condition: 1.0 when nonzero.
    Truth,
    /// Integers by value (rounded to f32 as `as` does).
    U32,
    I32,
}

impl Word {
    fn read(self, w: u32) -> f32 {
        match self {
            Word::F32 => f32::from_bits(w),
            Word::Truth => f32::from(u8::from(w != 0)),
            Word::U32 => w as f32,
            Word::I32 => w as i32 as f32,
        }
    }
}

/// Loads elements `first..` of a source into `r` as f32. Each case is its own loop (no
/// per-element branch or division), so the loads vectorise.
fn load(r: &mut [f32], src: &[u32], first: usize, bc: Broadcast, word: Word) {
    match bc {
        Broadcast::Full if word == Word::F32 => load_broadcast(r, src, first, bc, f32::from_bits),
        Broadcast::Suffix(1) => r.fill(word.read(src[0])),
        _ => load_broadcast(r, src, first, bc, |w| word.read(w)),
    }
}

fn unary(kind: UnaryKind, x: &[f32], r: &mut [f32]) {
    match kind {
        UnaryKind::Gelu => {
            r.copy_from_slice(x);
            simd::gelu_in_place(r);
        }
        UnaryKind::Exp => simd::exp_into(x, r),
        k => r.iter_mut().zip(x).for_each(|(v, &x)| *v = k.apply(x)),
    }
}

fn binary(kind: BinaryKind, x: &[f32], y: &[f32], r: &mut [f32]) {
    match kind {
        BinaryKind::Add => r.iter_mut().zip(x.iter().zip(y)).for_each(|(v, (a, b))| *v = a + b),
        BinaryKind::Mul => r.iter_mut().zip(x.iter().zip(y)).for_each(|(v, (a, b))| *v = a * b),
        BinaryKind::Sub => r.iter_mut().zip(x.iter().zip(y)).for_each(|(v, (a, b))| *v = a - b),
        k => r.iter_mut().zip(x.iter().zip(y)).for_each(|(v, (&a, &b))| *v = k.apply(a, b)),
    }
}
