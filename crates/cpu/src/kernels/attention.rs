//! `softmax(q kᵀ · scale + mask) v` per head, scores materialised one block of queries at a
//! time (64 x Sk floats: in cache, and two matrix products per block do the work). A decoder
//! step's single query is dot products and a weighted sum instead.

use rayon::prelude::*;
use susurrus_core::Result;
use susurrus_core::ir::{DType, TensorType};
use susurrus_core::ops::MaskKind;

use super::super::memory::SendPtr;
use super::super::simd;
use super::product::{View, matmul};

thread_local! {
    /// Each pool thread's score block, kept between tasks: a fresh 384 KB allocation per
    /// block would be a fresh mapping, page faults and all.
    static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Queries per block.
const BLOCK: usize = 128;
/// At most this many queries take the dot-product path.
const DOT_QUERIES: usize = 4;

/// How scores are masked.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mask {
    None,
    /// One `[Sk]` row added to every query's scores.
    Row,
    /// A `[Sq, Sk]` matrix, the same for every head.
    Full,
    /// A `[Sq, Sk]` matrix per head (the leading dims of the queries': rows of several
    /// sequences, each with its own keys, as a group step's beams).
    PerHead,
    /// Query `i` sees keys `j <= i + Sk - Sq`.
    Causal,
}

#[derive(Debug)]
pub struct Attention {
    heads: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dv: usize,
    scale: f32,
    mask: Mask,
}

impl Attention {
    pub fn choose(op: &susurrus_core::ops::Attention, t: &[TensorType], out: &TensorType) -> Option<Self> {
        if t.iter().chain([out]).any(|t| t.dtype != DType::F32) {
            return None;
        }
        let (q, k, v) = (t[0].shape.dims(), t[1].shape.dims(), t[2].shape.dims());
        let r = q.len();
        let (sq, d, sk, dv) = (q[r - 2], q[r - 1], k[r - 2], v[r - 1]);
        let heads = q[..r - 2].iter().product();
        let mask = match op.mask {
            MaskKind::None => Mask::None,
            MaskKind::Causal => Mask::Causal,
            MaskKind::Additive => {
                let m = t[3].shape.dims();
                let leading_ones = m.len() >= 2 && m[..m.len() - 2].iter().all(|&x| x == 1);
                let per_head = m.len() == r && m[..r - 2] == q[..r - 2];
                match (leading_ones, per_head, m.get(m.len().wrapping_sub(2)), m.last()) {
                    (true, _, Some(&1), Some(&last)) if last == sk => Mask::Row,
                    (true, _, Some(&rows), Some(&last)) if rows == sq && last == sk => Mask::Full,
                    (_, true, Some(&rows), Some(&last)) if rows == sq && last == sk => Mask::PerHead,
                    _ => return None,
                }
            }
        };
        Some(Attention { heads, sq, sk, d, dv, scale: op.scale, mask })
    }

    /// # Safety
    /// None beyond the slices' validity; `out` overlaps no input.
    pub fn run(&self, q: &[f32], k: &[f32], v: &[f32], mask: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
        let (sq, sk, d, dv) = (self.sq, self.sk, self.d, self.dv);
        let blocks = if sq <= DOT_QUERIES { sq } else { sq.div_ceil(BLOCK) };
        let rows_per = if sq <= DOT_QUERIES { 1 } else { BLOCK };
        let dst = SendPtr(out.as_mut_ptr());
        (0..self.heads * blocks).into_par_iter().for_each(|task| {
            let (h, b) = (task / blocks, task % blocks);
            let first = b * rows_per;
            let rows = rows_per.min(sq - first);
            let qh = &q[(h * sq + first) * d..(h * sq + first + rows) * d];
            let kh = &k[h * sk * d..(h + 1) * sk * d];
            let vh = &v[h * sk * dv..(h + 1) * sk * dv];
            // SAFETY: rows first..first+rows of head h: a block of `out` ([heads, sq, dv])
            // that no other task writes.
            let o = unsafe { std::slice::from_raw_parts_mut(dst.get().add((h * sq + first) * dv), rows * dv) };
            SCORES.with_borrow_mut(|scores| {
                scores.resize(rows * sk, 0.0);
                let scores = &mut scores[..rows * sk];
                if rows_per == 1 {
                    simd::dot_rows(qh, kh, d, scores);
                } else {
                    matmul(rows, sk, d, View::rows(qh, d), View::transposed(kh, d), scores, 1);
                }
                for (i, row) in scores.chunks_mut(sk).enumerate() {
                    self.mask_row(row, h, first + i, mask);
                    simd::softmax_scaled(row, 1.0);
                }
                if rows_per == 1 {
                    simd::weighted_rows(scores, vh, dv, o);
                } else {
                    matmul(rows, dv, sk, View::rows(scores, sk), View::rows(vh, dv), o, 1);
                }
            });
        });
        Ok(())
    }

    /// Scales the scores of head `h`'s query `i` and applies the mask.
    fn mask_row(&self, row: &mut [f32], h: usize, i: usize, mask: Option<&[f32]>) {
        let sk = self.sk;
        row.iter_mut().for_each(|s| *s *= self.scale);
        match (self.mask, mask) {
            (Mask::Row, Some(m)) => row.iter_mut().zip(m).for_each(|(s, m)| *s += m),
            (Mask::Full, Some(m)) => row.iter_mut().zip(&m[i * sk..(i + 1) * sk]).for_each(|(s, m)| *s += m),
            (Mask::PerHead, Some(m)) => {
                let at = (h * self.sq + i) * sk;
                row.iter_mut().zip(&m[at..at + sk]).for_each(|(s, m)| *s += m);
            }
            (Mask::Causal, _) => {
                let last = i + sk - self.sq;
                row.iter_mut().skip(last + 1).for_each(|s| *s = f32::NEG_INFINITY);
            }
            _ => {}
        }
    }
}
