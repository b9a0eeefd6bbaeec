//! 1-D convolution as one matrix product: the input unrolled into columns
//! (`[C_in x K, L_out]`, "im2col") times the weight seen as `[C_out, C_in x K]`, then bias.
//! Whisper's two encoder convolutions are ~2 GFLOP per window; as a product they run at
//! matrix-product speed.

use rayon::prelude::*;
use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};

use super::super::memory::Bases;
use super::super::memory::Operand;
use super::linear::{WeightKind, weight_f32};
use super::product::{View, matmul};
use super::{Scratch, input};

#[derive(Debug)]
pub struct Conv1d {
    c_in: usize,
    len: usize,
    c_out: usize,
    k: usize,
    out_len: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    weight: WeightKind,
    bias: bool,
}

impl Conv1d {
    pub fn choose(op: &susurrus_core::ops::Conv1d, t: &[TensorType], out: &TensorType) -> Option<Self> {
        let x = t[0].shape.dims();
        // One batch item: [C_in, L] or [1, C_in, L].
        if t[0].dtype != DType::F32 || out.dtype != DType::F32 || (x.len() == 3 && x[0] != 1) {
            return None;
        }
        let weight = WeightKind::of(&t[1])?;
        if t.get(2).is_some_and(|b| b.dtype != DType::F32) {
            return None;
        }
        let (c_in, len) = (x[x.len() - 2], x[x.len() - 1]);
        let w = t[1].shape.dims();
        let o = out.shape.dims();
        Some(Conv1d {
            c_in,
            len,
            c_out: w[0],
            k: w[2],
            out_len: o[o.len() - 1],
            stride: op.stride,
            padding: op.padding,
            dilation: op.dilation,
            weight,
            bias: t.len() == 3,
        })
    }

    /// # Safety
    /// As [`Bases::slice`] for the operands.
    pub unsafe fn run(
        &self,
        ops: &[Operand],
        bases: &Bases,
        out: &mut [f32],
        scratch: &mut Scratch,
        threads: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        let x = unsafe { input::<f32>(bases, ops[0])? };
        let (red, n) = (self.c_in * self.k, self.out_len);
        let Scratch { weights, columns } = scratch;
        if columns.len() < red * n {
            columns.resize(red * n, 0.0);
        }
        let cols = &mut columns[..red * n];
        cols.par_chunks_mut(n).enumerate().for_each(|(r, row)| {
            let (c, tap) = (r / self.k, r % self.k);
            let src = &x[c * self.len..(c + 1) * self.len];
            for (t, v) in row.iter_mut().enumerate() {
                let at = (t * self.stride + tap * self.dilation).wrapping_sub(self.padding);
                *v = src.get(at).copied().unwrap_or(0.0);
            }
        });
        // SAFETY: the caller's contract.
        let w = unsafe { weight_f32(bases, ops[1], self.weight, weights)? };
        matmul(self.c_out, n, red, View::rows(w, red), View::rows(cols, n), out, threads);
        if self.bias {
            // SAFETY: the caller's contract.
            let b = unsafe { input::<f32>(bases, ops[2])? };
            out.par_chunks_mut(n).zip(b.par_iter()).for_each(|(row, b)| row.iter_mut().for_each(|v| *v += b));
        }
        Ok(())
    }
}
