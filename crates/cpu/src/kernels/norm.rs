//! Layer norm over the last axis, and the fused residual add + layer norm. Rows in parallel.

use rayon::prelude::*;
use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::Op;

use super::super::memory::Bases;
use super::super::memory::Operand;
use super::super::simd;
use super::input;

#[derive(Debug)]
pub struct Norm {
    d: usize,
    eps: f32,
    /// `add_layer_norm`: inputs a, b, gamma, beta (else x, gamma, beta).
    add: bool,
}

impl Norm {
    pub fn choose(op: &Op, t: &[TensorType], out: &TensorType) -> Option<Self> {
        let (eps, add) = match op {
            Op::LayerNorm(n) => (n.eps, false),
            Op::AddLayerNorm(n) => (n.eps, true),
            _ => return None,
        };
        let d = *out.shape.dims().last()?;
        (d > 0 && t.iter().chain([out]).all(|t| t.dtype == DType::F32)).then_some(Norm { d, eps, add })
    }

    /// # Safety
    /// As [`Bases::slice`] for the operands.
    pub unsafe fn run(&self, ops: &[Operand], bases: &Bases, out: &mut [f32]) -> Result<()> {
        let p = if self.add { 2 } else { 1 };
        // SAFETY: the caller's contract.
        let (x, b, gamma, beta) = unsafe {
            (
                input::<f32>(bases, ops[0])?,
                if self.add { Some(input::<f32>(bases, ops[1])?) } else { None },
                input::<f32>(bases, ops[p])?,
                input::<f32>(bases, ops[p + 1])?,
            )
        };
        let d = self.d;
        out.par_chunks_mut(d * 8).enumerate().for_each(|(c, rows)| {
            for (i, row) in rows.chunks_mut(d).enumerate() {
                let at = (c * 8 + i) * d;
                row.copy_from_slice(&x[at..at + d]);
                if let Some(b) = b {
                    row.iter_mut().zip(&b[at..at + d]).for_each(|(v, b)| *v += b);
                }
                simd::layer_norm_row(row, gamma, beta, self.eps);
            }
        });
        Ok(())
    }
}
