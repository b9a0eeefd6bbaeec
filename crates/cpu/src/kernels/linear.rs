//! `x · Wᵀ (+ bias) (+ GELU)` with `W [N, K]` (a linear layer; f32, f16 or q8 weights).
//!
//! A few rows (a decoder step, a short prompt) are dot products that read each weight row
//! once, f16 widened or q8 dequantized on the fly: a decoder step is bound by reading the
//! weights, and f16 halves that, int8 quarters it. More rows are a matrix product
//! ([`super::product`]) on an f32 copy of the weight made into scratch memory: converting
//! `N x K` values is small beside `M x N x K` multiply-adds.

use half::f16;
use rayon::prelude::*;
use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::Op;

use super::super::memory::Operand;
use super::super::memory::{Bases, SendPtr};
use super::super::simd;
use super::product::{View, matmul};
use super::{Scratch, input};

/// At most this many rows run as dot products.
const DOT_ROWS: usize = 8;

/// Output rows per parallel task of the epilogue after a large product.
const EPILOGUE_ROWS: usize = 16;
/// Multiply-adds below which the dot-product path stays on the calling thread.
const SMALL_WORK: usize = 1 << 18;
/// Output columns per parallel task of the dot-product path.
const COLUMN_BLOCK: usize = 64;

#[derive(Debug)]
pub struct Linear {
    rows: usize,
    n: usize,
    k: usize,
    weight: WeightKind,
    bias: bool,
    gelu: bool,
    /// Input 3 (f32, the output's shape) is added last.
    residual: bool,
}

/// How a weight operand is stored: the kernels that read weights (products, convolutions,
/// gathers) take any of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightKind {
    F32,
    F16,
    /// int8 values, then one f32 scale per row of `row_len` values (`DType::Q8`).
    Q8 {
        len: usize,
        row_len: usize,
    },
}

impl WeightKind {
    pub fn of(ty: &TensorType) -> Option<Self> {
        match ty.dtype {
            DType::F32 => Some(WeightKind::F32),
            DType::F16 => Some(WeightKind::F16),
            DType::Q8 => {
                Some(WeightKind::Q8 { len: ty.numel(), row_len: ty.numel().checked_div(ty.q8_rows()).unwrap_or(0) })
            }
            _ => None,
        }
    }
}

/// A q8 operand's values and scales.
///
/// # Safety
/// As [`Bases::slice`] for the operand.
pub unsafe fn q8_parts<'a>(bases: &Bases, op: Operand, len: usize) -> Result<(&'a [i8], &'a [f32])> {
    // SAFETY: the caller's contract; the region holds the values padded to 4 bytes, then the
    // scales, and starts 4-byte aligned like every region.
    let bytes = unsafe { input::<u8>(bases, op)? };
    let at = len.div_ceil(4) * 4;
    Ok((bytemuck::cast_slice(&bytes[..len]), bytemuck::cast_slice(&bytes[at..])))
}

impl Linear {
    pub fn choose(op: &Op, t: &[TensorType], out: &TensorType) -> Option<Self> {
        let (bias, gelu, residual) = match op {
            Op::MatMul(m) if m.transpose_b => (false, false, false),
            Op::MatMulBias(m) if m.transpose_b => (true, m.gelu, m.residual),
            _ => return None,
        };
        let (a, w) = (&t[0], &t[1]);
        let [n, k] = *w.shape.dims() else { return None };
        let weight = WeightKind::of(w)?;
        let ok = a.dtype == DType::F32
            && out.dtype == DType::F32
            && a.shape.dims().last() == Some(&k)
            && k > 0
            && (!bias || (t[2].dtype == DType::F32 && t[2].shape.dims() == [n]))
            && (!residual || (t[3].dtype == DType::F32 && t[3].shape == out.shape));
        ok.then(|| Linear { rows: a.numel() / k, n, k, weight, bias, gelu, residual })
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
        let (a, bias, residual) = unsafe {
            (
                input::<f32>(bases, ops[0])?,
                if self.bias { Some(input::<f32>(bases, ops[2])?) } else { None },
                if self.residual { Some(input::<f32>(bases, ops[3])?) } else { None },
            )
        };
        let epilogue = Epilogue { bias, gelu: self.gelu, residual };
        if self.rows <= DOT_ROWS {
            match self.weight {
                WeightKind::F16 => {
                    // SAFETY: the caller's contract.
                    let w = unsafe { input::<f16>(bases, ops[1])? };
                    self.dots(a, w, &epilogue, out, |x, m, _, o| simd::dot_rows_f16(x, m, self.k, o));
                }
                WeightKind::F32 => {
                    // SAFETY: the caller's contract.
                    let w = unsafe { input::<f32>(bases, ops[1])? };
                    self.dots(a, w, &epilogue, out, |x, m, _, o| simd::dot_rows(x, m, self.k, o));
                }
                WeightKind::Q8 { len, .. } => {
                    // SAFETY: the caller's contract.
                    let (w, scales) = unsafe { q8_parts(bases, ops[1], len)? };
                    self.dots(a, w, &epilogue, out, |x, m, cols, o| simd::dot_rows_q8(x, m, &scales[cols], self.k, o));
                }
            }
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let w = unsafe { weight_f32(bases, ops[1], self.weight, &mut scratch.weights)? };
        let (m, n, k) = (self.rows, self.n, self.k);
        matmul(m, n, k, View::rows(a, k), View::transposed(w, k), out, threads);
        if self.bias || self.gelu || self.residual {
            out.par_chunks_mut(n * EPILOGUE_ROWS).enumerate().for_each(|(chunk, rows)| {
                for (r, row) in rows.chunks_mut(n).enumerate() {
                    epilogue.apply(row, chunk * EPILOGUE_ROWS + r, 0..n, n);
                }
            });
        }
        Ok(())
    }

    /// The dot-product path: column blocks split across threads, each weight row read once
    /// for all rows of `a` (it stays in L1 between them).
    fn dots<W: Sync>(
        &self,
        a: &[f32],
        w: &[W],
        epilogue: &Epilogue,
        out: &mut [f32],
        rows_dot: impl Fn(&[f32], &[W], std::ops::Range<usize>, &mut [f32]) + Sync,
    ) {
        let (rows, n, k) = (self.rows, self.n, self.k);
        let dst = SendPtr(out.as_mut_ptr());
        let job = |block: usize| {
            let cols = block * COLUMN_BLOCK..((block + 1) * COLUMN_BLOCK).min(n);
            let mut tmp = [0.0f32; COLUMN_BLOCK];
            let tmp = &mut tmp[..cols.len()];
            for r in 0..rows {
                rows_dot(&a[r * k..(r + 1) * k], &w[cols.start * k..cols.end * k], cols.clone(), tmp);
                epilogue.apply(tmp, r, cols.clone(), n);
                // SAFETY: row r < rows, columns cols within n: inside `out` (rows x n);
                // column blocks are disjoint, so no two tasks write one element.
                unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst.get().add(r * n + cols.start), tmp.len()) };
            }
        };
        let blocks = n.div_ceil(COLUMN_BLOCK);
        // A small product (a 384 x 384 projection) takes less time than waking the pool.
        if rows * n * k < SMALL_WORK {
            (0..blocks).for_each(job);
        } else {
            (0..blocks).into_par_iter().for_each(job);
        }
    }
}

/// What follows the product, per output value: the bias, GELU, the residual.
struct Epilogue<'a> {
    bias: Option<&'a [f32]>,
    gelu: bool,
    residual: Option<&'a [f32]>,
}

impl Epilogue<'_> {
    /// Applies the epilogue to `values`, columns `cols` of output row `row` (rows of `n`).
    fn apply(&self, values: &mut [f32], row: usize, cols: std::ops::Range<usize>, n: usize) {
        if let Some(b) = self.bias {
            values.iter_mut().zip(&b[cols.clone()]).for_each(|(v, b)| *v += b);
        }
        if self.gelu {
            simd::gelu_in_place(values);
        }
        if let Some(r) = self.residual {
            values.iter_mut().zip(&r[row * n + cols.start..row * n + cols.end]).for_each(|(v, r)| *v += r);
        }
    }
}

/// A weight operand as f32: read in place when it is f32, else widened (f16) or dequantized
/// (q8) into `dst`.
///
/// # Safety
/// As [`Bases::slice`] for the operand.
pub unsafe fn weight_f32<'a>(bases: &Bases, op: Operand, kind: WeightKind, dst: &'a mut Vec<f32>) -> Result<&'a [f32]> {
    match kind {
        // SAFETY: the caller's contract.
        WeightKind::F32 => unsafe { input::<f32>(bases, op) },
        WeightKind::F16 => {
            // SAFETY: the caller's contract.
            let w16 = unsafe { input::<f16>(bases, op)? };
            widen_into(w16, dst);
            Ok(&dst[..w16.len()])
        }
        WeightKind::Q8 { len, row_len } => {
            // SAFETY: the caller's contract.
            let (q, scales) = unsafe { q8_parts(bases, op, len)? };
            if dst.len() < len {
                dst.resize(len, 0.0);
            }
            let row_len = row_len.max(1);
            dst[..len]
                .par_chunks_mut(row_len)
                .zip(q.par_chunks(row_len))
                .zip(scales.par_iter())
                .for_each(|((d, q), &s)| simd::dequantize_row(q, s, d));
            Ok(&dst[..len])
        }
    }
}

/// Widens `w` into `dst` (grown as needed), in parallel.
pub fn widen_into(w: &[f16], dst: &mut Vec<f32>) {
    if dst.len() < w.len() {
        dst.resize(w.len(), 0.0);
    }
    dst[..w.len()].par_chunks_mut(1 << 16).zip(w.par_chunks(1 << 16)).for_each(|(d, s)| simd::widen(s, d));
}
