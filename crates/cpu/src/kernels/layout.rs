//! Moving data without arithmetic: permutes (head split and merge), KV-cache writes and
//! embedding lookups.

use half::f16;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::{KvWrite as KvWriteOp, Permute as PermuteOp};
use susurrus_core::{Error, Result};

use super::super::memory::Operand;
use super::super::memory::{Bases, Region};
use super::super::simd;
use super::input;
use super::linear::{WeightKind, q8_parts};

/// A permute of 4-byte or 2-byte elements, copied in runs of the innermost axis when the
/// permutation keeps it last.
#[derive(Debug)]
pub struct Permute {
    /// Output dims.
    dims: Vec<usize>,
    /// For each output axis, the input stride (in elements) it walks.
    strides: Vec<usize>,
    wide: bool,
}

impl Permute {
    pub fn choose(op: &PermuteOp, t: &[TensorType], _out: &TensorType) -> Option<Self> {
        let dims_in = t[0].shape.dims();
        let mut stride_in = vec![1usize; dims_in.len()];
        for a in (0..dims_in.len().saturating_sub(1)).rev() {
            stride_in[a] = stride_in[a + 1] * dims_in[a + 1];
        }
        Some(Permute {
            dims: op.perm.iter().map(|&p| dims_in[p]).collect(),
            strides: op.perm.iter().map(|&p| stride_in[p]).collect(),
            wide: t[0].dtype.size() == 4,
        })
    }

    /// # Safety
    /// As [`Bases::slice`] for the operands.
    pub unsafe fn run(&self, x: Operand, bases: &Bases, out: Region) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            if self.wide {
                self.copy(input::<u32>(bases, x)?, bases.slice_mut::<u32>(out));
            } else {
                self.copy(input::<u16>(bases, x)?, bases.slice_mut::<u16>(out));
            }
        }
        Ok(())
    }

    fn copy<T: Copy>(&self, x: &[T], out: &mut [T]) {
        let r = self.dims.len();
        if r == 0 || out.is_empty() {
            out.copy_from_slice(&x[..out.len()]);
            return;
        }
        let inner = self.dims[r - 1];
        let contiguous = self.strides[r - 1] == 1;
        let mut index = vec![0usize; r - 1];
        for run in out.chunks_mut(inner) {
            let base: usize = index.iter().zip(&self.strides).map(|(i, s)| i * s).sum();
            if contiguous {
                run.copy_from_slice(&x[base..base + inner]);
            } else {
                let s = self.strides[r - 1];
                run.iter_mut().enumerate().for_each(|(j, v)| *v = x[base + j * s]);
            }
            for a in (0..r - 1).rev() {
                index[a] += 1;
                if index[a] < self.dims[a] {
                    break;
                }
                index[a] = 0;
            }
        }
    }
}

/// Rows `offset..offset + len` of a persistent buffer `[outer, cap, inner]` replaced by a
/// value `[outer, len, inner]`.
#[derive(Debug)]
pub struct KvWrite {
    outer: usize,
    cap: usize,
    len: usize,
    inner: usize,
    axis: usize,
    offset: Option<usize>,
}

impl KvWrite {
    pub fn choose(op: &KvWriteOp, t: &[TensorType], _out: &TensorType) -> Option<Self> {
        if t[0].dtype.size() != 4 || t[1].dtype != t[0].dtype {
            return None;
        }
        let dims = t[0].shape.dims();
        Some(KvWrite {
            outer: dims[..op.axis].iter().product(),
            cap: dims[op.axis],
            len: t[1].shape.dims()[op.axis],
            inner: dims[op.axis + 1..].iter().product(),
            axis: op.axis,
            offset: op.offset.map(|s| s.index()),
        })
    }

    pub fn run(&self, value: &[u32], buf: &mut [u32], scalars: &[u32]) -> Result<()> {
        let offset = match self.offset {
            Some(i) => *scalars
                .get(i)
                .ok_or_else(|| Error::runtime("kv_write", format!("runtime scalar #{i} has no value")))?
                as usize,
            None => 0,
        };
        let (cap, len, inner) = (self.cap, self.len, self.inner);
        if offset > cap - len {
            return Err(Error::runtime(
                "kv_write",
                format!("offset {offset} + length {len} exceeds capacity {cap} along axis {}", self.axis),
            ));
        }
        for o in 0..self.outer {
            let dst = (o * cap + offset) * inner;
            buf[dst..dst + len * inner].copy_from_slice(&value[o * len * inner..(o + 1) * len * inner]);
        }
        Ok(())
    }
}

/// Rows of a table `[V, D...]` picked by ids (embeddings, a beam cache's rows): f32 or f16
/// copied (the output's dtype), q8 dequantized to f32.
#[derive(Debug)]
pub struct Gather {
    rows: usize,
    d: usize,
    table: WeightKind,
}

impl Gather {
    pub fn choose(t: &[TensorType], out: &TensorType) -> Option<Self> {
        let (&rows, rest) = t[0].shape.dims().split_first()?;
        let d = rest.iter().product();
        let table = WeightKind::of(&t[0])?;
        let out_dtype = if table == WeightKind::F16 { DType::F16 } else { DType::F32 };
        (matches!(t[1].dtype, DType::U32 | DType::I32) && out.dtype == out_dtype).then_some(Gather { rows, d, table })
    }

    /// # Safety
    /// As [`Bases::slice`] for the operands.
    pub unsafe fn run(&self, ops: &[Operand], bases: &Bases, out: Region) -> Result<()> {
        // SAFETY: the caller's contract. Ids are read as i32 words: an i32 id that is
        // negative, or a u32 id past i32::MAX, is out of range either way.
        let ids = unsafe { input::<i32>(bases, ops[1])? };
        let row = |id: i32| {
            usize::try_from(id).ok().filter(|&r| r < self.rows).ok_or_else(|| {
                Error::runtime("gather", format!("id {} is out of range for a table of {} rows", id as u32, self.rows))
            })
        };
        let d = self.d;
        // SAFETY: the caller's contract.
        unsafe {
            match self.table {
                WeightKind::F16 => {
                    let (table, dst) = (input::<f16>(bases, ops[0])?, bases.slice_mut::<f16>(out));
                    for (i, &id) in ids.iter().enumerate() {
                        let r = row(id)?;
                        dst[i * d..(i + 1) * d].copy_from_slice(&table[r * d..(r + 1) * d]);
                    }
                }
                WeightKind::F32 => {
                    let (table, dst) = (input::<f32>(bases, ops[0])?, bases.slice_mut::<f32>(out));
                    for (i, &id) in ids.iter().enumerate() {
                        let r = row(id)?;
                        dst[i * d..(i + 1) * d].copy_from_slice(&table[r * d..(r + 1) * d]);
                    }
                }
                WeightKind::Q8 { len, .. } => {
                    let ((table, scales), dst) = (q8_parts(bases, ops[0], len)?, bases.slice_mut::<f32>(out));
                    for (i, &id) in ids.iter().enumerate() {
                        let r = row(id)?;
                        simd::dequantize_row(&table[r * d..(r + 1) * d], scales[r], &mut dst[i * d..(i + 1) * d]);
                    }
                }
            }
        }
        Ok(())
    }
}
