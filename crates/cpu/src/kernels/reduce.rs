//! Reductions and argmax over the last axis of f32 values (token selection: max, sum and
//! argmax over the vocabulary), top_k over the last axis (beam search's candidates), and
//! slices.

use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::{Argmax, Reduce as ReduceOp, ReduceKind, Slice as SliceOp, TopK as TopKOp};

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

/// top_k over the last axis of 32-bit values (f32, i32 or u32 words), in one pass over each
/// row: the first k so far, sorted, take a value only if it beats the k-th, so a row of beam
/// scores costs about one comparison per value (the reference sorts an index per value).
#[derive(Debug)]
pub struct TopK {
    n: usize,
    k: usize,
    /// A value's word as a u32 whose order is the values' (see [`f32_key`]).
    key: fn(u32) -> u32,
}

/// The order-preserving key of an f32's bits: negative values' bits reversed below the
/// positive ones, -0 as +0, every NaN above everything (the reference's order).
fn f32_key(bits: u32) -> u32 {
    let v = f32::from_bits(bits);
    if v.is_nan() {
        return u32::MAX;
    }
    let b = if v == 0.0 { 0 } else { bits };
    if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 }
}

impl TopK {
    pub fn choose(op: &TopKOp, t: &[TensorType]) -> Option<Self> {
        let key: fn(u32) -> u32 = match t[0].dtype {
            DType::F32 => f32_key,
            DType::I32 => |w| w ^ 0x8000_0000,
            DType::U32 => |w| w,
            _ => return None,
        };
        Some(TopK { n: t[0].shape.last(), k: op.k, key })
    }

    pub fn run(&self, x: &[u32], out: &mut [u32]) -> Result<()> {
        // (key, index), larger keys first, equal keys by index.
        let mut best: Vec<(u32, u32)> = Vec::with_capacity(self.k + 1);
        for (row, o) in x.chunks(self.n).zip(out.chunks_mut(self.k)) {
            best.clear();
            for (i, &w) in row.iter().enumerate() {
                let key = (self.key)(w);
                // A later index loses a tie, so an equal key does not beat the k-th either.
                if best.len() == self.k && best[self.k - 1].0 >= key {
                    continue;
                }
                let at = best.partition_point(|&(b, _)| b >= key);
                best.insert(at, (key, i as u32));
                best.truncate(self.k);
            }
            for (o, &(_, i)) in o.iter_mut().zip(&best) {
                *o = i;
            }
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
