//! Reductions and argmax over the last axis of f32 values (token selection: max, sum and
//! argmax over the vocabulary), and slices.

use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::{Argmax, Reduce as ReduceOp, ReduceKind, Slice as SliceOp};

/// A reduction or argmax over the last axis.
#[derive(Debug)]
pub struct Reduce {
    /// `None`: argmax.
    kind: Option<ReduceKind>,
    n: usize,
}

impl Reduce {
    pub fn choose_reduce(op: &ReduceOp, t: &[TensorType], out: &TensorType) -> Option<Self> {
        let r = t[0].shape.rank();
        (t[0].dtype == DType::F32 && out.dtype == DType::F32 && r > 0 && op.axis == r - 1)
            .then(|| Reduce { kind: Some(op.kind), n: t[0].shape.dims()[r - 1] })
    }

    pub fn choose_argmax(op: &Argmax, t: &[TensorType]) -> Option<Self> {
        let r = t[0].shape.rank();
        (t[0].dtype == DType::F32 && r > 0 && op.axis == r - 1)
            .then(|| Reduce { kind: None, n: t[0].shape.dims()[r - 1] })
    }

    pub fn run(&self, x: &[f32], out: &mut [u32]) -> Result<()> {
        for (row, o) in x.chunks(self.n.max(1)).zip(out.iter_mut()) {
            *o = match self.kind {
                Some(ReduceKind::Sum) => row.iter().sum::<f32>().to_bits(),
                Some(ReduceKind::Mean) => (row.iter().sum::<f32>() / self.n as f32).to_bits(),
                Some(ReduceKind::Max) => {
                    row.iter().fold(f32::NEG_INFINITY, |m, &v| if v > m || v.is_nan() { v } else { m }).to_bits()
                }
                // The first index of the largest value; NaN counts as largest, as in the reference.
                None => {
                    let mut best = 0;
                    for (k, &v) in row.iter().enumerate() {
                        let b = row[best];
                        if (v.is_nan() && !b.is_nan()) || v > b {
                            best = k;
                        }
                    }
                    best as u32
                }
            };
        }
        Ok(())
    }
}

/// `x[.., start..end, ..]` on 4-byte elements: `outer` blocks of `take` contiguous values.
#[derive(Debug)]
pub struct Slice {
    outer: usize,
    block: usize,
    first: usize,
    take: usize,
}

impl Slice {
    pub fn choose(op: &SliceOp, t: &[TensorType]) -> Option<Self> {
        let dims = t[0].shape.dims();
        let inner: usize = dims[op.axis + 1..].iter().product();
        (t[0].dtype.size() == 4).then(|| Slice {
            outer: dims[..op.axis].iter().product(),
            block: dims[op.axis] * inner,
            first: op.start * inner,
            take: (op.end - op.start) * inner,
        })
    }

    pub fn run(&self, x: &[u32], out: &mut [u32]) -> Result<()> {
        for o in 0..self.outer {
            let from = o * self.block + self.first;
            out[o * self.take..(o + 1) * self.take].copy_from_slice(&x[from..from + self.take]);
        }
        Ok(())
    }
}
