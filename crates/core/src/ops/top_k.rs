//! Indices of the `k` largest values along the last axis, largest first, as u32: what beam
//! search reads back instead of a vocabulary of scores (`x [..., n]` -> `[..., k]`).
//!
//! The order is total, so every backend picks the same indices: larger values first, equal
//! values by lower index, NaN above every number (as [`super::Argmax`], whose result is the
//! first index of `top_k` with `k = 1`).

use std::cmp::Ordering;

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{DType, Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct TopK {
    pub k: usize,
}

/// `a` before `b` in the order `top_k` lists values: greater first, NaN above numbers, equal
/// values (and NaNs) by index.
fn before<T: PartialOrd + Copy>((a, i): (T, usize), (b, j): (T, usize), is_nan: impl Fn(T) -> bool) -> bool {
    match (is_nan(a), is_nan(b)) {
        (true, false) => true,
        (false, true) => false,
        (true, true) => i < j,
        (false, false) => match a.partial_cmp(&b) {
            Some(Ordering::Greater) => true,
            Some(Ordering::Less) => false,
            _ => i < j,
        },
    }
}

/// The first `k` indices of each row of `n` values of `v` in the order of [`before`].
fn top_rows<T: PartialOrd + Copy>(v: &[T], n: usize, k: usize, is_nan: impl Fn(T) -> bool + Copy) -> Vec<u32> {
    let mut out = Vec::with_capacity(v.len() / n.max(1) * k);
    for row in v.chunks(n) {
        let mut idx: Vec<usize> = (0..n).collect();
        let order = |&i: &usize, &j: &usize| {
            if before((row[i], i), (row[j], j), is_nan) { Ordering::Less } else { Ordering::Greater }
        };
        // Only the first k need sorting: select them, then order those.
        if k < n {
            idx.select_nth_unstable_by(k, order);
            idx.truncate(k);
        }
        idx.sort_unstable_by(order);
        out.extend(idx.into_iter().map(|i| i as u32));
    }
    out
}

impl OpKind for TopK {
    fn name(&self) -> &'static str {
        "top_k"
    }
    fn attrs(&self) -> String {
        format!("k={}", self.k)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("top_k", inputs.len(), 1)?;
        let x = inputs[0];
        let n = x.shape.dims().last().copied().unwrap_or(0);
        if self.k == 0 || self.k > n {
            return Err(Error::shape(
                "top_k",
                format!("k={} needs 1 to {n} values along the last axis of {x}", self.k),
            ));
        }
        let mut dims = x.shape.dims().to_vec();
        if let Some(last) = dims.last_mut() {
            *last = self.k;
        }
        Ok(TensorType::new(DType::U32, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let x = inputs[0];
        let ty = self.infer(&[&x.ty()])?;
        let n = x.shape().dims().last().copied().unwrap_or(0);
        let out = if x.dtype().is_float() {
            top_rows(&x.to_f32(), n, self.k, f32::is_nan)
        } else {
            top_rows(&x.to_i64(), n, self.k, |_| false)
        };
        Tensor::u32(ty.shape, out)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// Indices (u32) of the `k` largest values of `x` along its last axis, largest first;
    /// equal values by lower index, NaN above every number.
    pub fn top_k(&mut self, x: NodeId, k: usize) -> Result<NodeId> {
        self.push(TopK { k }, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::eval_op;

    fn top_k(x: &Tensor, k: usize) -> Vec<u32> {
        eval_op(TopK { k }, &[x]).unwrap().as_u32().unwrap().to_vec()
    }

    #[test]
    fn largest_first_ties_by_index_nan_on_top() {
        // Row 0: 5 at 1 and 2 tie (1 first), then 3, then 1. Row 1: NaN first, then 9, 7, -inf.
        let x = Tensor::f32([2, 4], vec![1.0, 5.0, 5.0, 3.0, 7.0, f32::NAN, 9.0, f32::NEG_INFINITY]).unwrap();
        assert_eq!(top_k(&x, 4), [1, 2, 3, 0, 1, 2, 0, 3]);
        assert_eq!(top_k(&x, 2), [1, 2, 1, 2]);
        // k = 1 is argmax's choice.
        assert_eq!(top_k(&x, 1), [1, 1]);
        // All equal: the indices in order.
        let flat = Tensor::f32([1, 5], vec![f32::NEG_INFINITY; 5]).unwrap();
        assert_eq!(top_k(&flat, 3), [0, 1, 2]);
    }

    #[test]
    fn integers_compare_exactly_and_leading_axes_are_rows() {
        // 2^24 and 2^24 + 1 collide in f32.
        let u = Tensor::u32([2, 1, 3], vec![1 << 24, (1 << 24) + 1, 0, 4, 4, 9]).unwrap();
        let y = eval_op(TopK { k: 2 }, &[&u]).unwrap();
        assert_eq!(y.ty(), TensorType::new(DType::U32, [2, 1, 2]));
        assert_eq!(y.as_u32(), Some(&[1, 0, 2, 0][..]));
    }

    #[test]
    fn builder_rejects_k_out_of_range() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [2, 3])).unwrap();
        assert_eq!(
            g.top_k(x, 4).unwrap_err().to_string(),
            "top_k: k=4 needs 1 to 3 values along the last axis of f32[2,3]"
        );
        assert_eq!(
            g.top_k(x, 0).unwrap_err().to_string(),
            "top_k: k=0 needs 1 to 3 values along the last axis of f32[2,3]"
        );
        let y = g.top_k(x, 3).unwrap();
        assert_eq!(g.ty(y), &TensorType::new(DType::U32, [2, 3]));
    }
}
