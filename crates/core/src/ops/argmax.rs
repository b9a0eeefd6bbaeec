//! Index of the largest value along an axis (the axis is removed), as u32. Ties pick the
//! first index; NaN is treated as larger than every number.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{DType, Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Argmax {
    pub axis: usize,
}

/// For each `(outer, inner)` position of `v` viewed as `[outer, n, inner]`, the first index
/// `k` whose value no later value is `greater` than.
fn first_max<T: Copy>(v: &[T], (outer, n, inner): (usize, usize, usize), greater: impl Fn(T, T) -> bool) -> Vec<u32> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| v[(o * n + k) * inner + i];
            let mut best = 0;
            for k in 1..n {
                if greater(at(k), at(best)) {
                    best = k;
                }
            }
            out.push(best as u32);
        }
    }
    out
}

impl OpKind for Argmax {
    fn name(&self) -> &'static str {
        "argmax"
    }
    fn attrs(&self) -> String {
        format!("axis={}", self.axis)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("argmax", inputs.len(), 1)?;
        let x = inputs[0];
        if self.axis >= x.shape.rank() || x.shape.dims()[self.axis] == 0 {
            return Err(Error::shape("argmax", format!("axis {} is out of range or empty for {x}", self.axis)));
        }
        let mut dims = x.shape.dims().to_vec();
        dims.remove(self.axis);
        Ok(TensorType::new(DType::U32, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let x = inputs[0];
        let ty = self.infer(&[&x.ty()])?;
        let split = x.shape().split_at_axis(self.axis);
        // Integers compare exactly in i64; for floats NaN beats every number, not another NaN.
        let out = if x.dtype().is_float() {
            first_max(&x.to_f32(), split, |a, b| (a.is_nan() && !b.is_nan()) || a > b)
        } else {
            first_max(&x.to_i64(), split, |a, b| a > b)
        };
        Tensor::u32(ty.shape, out)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// Index (u32) of the largest value of `x` along `axis`, which is removed. Ties give the
    /// first index; NaN counts as larger than any number.
    pub fn argmax(&mut self, x: NodeId, axis: usize) -> Result<NodeId> {
        self.push(Argmax { axis }, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::eval_op;

    fn argmax(x: &Tensor, axis: usize) -> Vec<u32> {
        eval_op(Argmax { axis }, &[x]).unwrap().as_u32().unwrap().to_vec()
    }

    #[test]
    fn both_axes_ties_and_nan() {
        // [[1, 5, 5], [7, NaN, 9]]: row 0 ties at 5 -> first (1); row 1 has NaN -> 1.
        let x = Tensor::f32([2, 3], vec![1.0, 5.0, 5.0, 7.0, f32::NAN, 9.0]).unwrap();
        assert_eq!(argmax(&x, 1), [1, 1]);
        // Columns: [1,7] -> 1, [5,NaN] -> 1, [5,9] -> 1.
        assert_eq!(argmax(&x, 0), [1, 1, 1]);
        // Two NaNs: the first wins; -inf everywhere: index 0.
        let y =
            Tensor::f32([2, 3], vec![0.0, f32::NAN, f32::NAN, f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY])
                .unwrap();
        assert_eq!(argmax(&y, 1), [1, 0]);
    }

    #[test]
    fn middle_axis_and_integers() {
        // x[i,j,k] with shape [2,3,2]; argmax over j.
        let x = Tensor::i32([2, 3, 2], vec![1, 9, 8, 2, 3, 2, -5, -1, -4, -1, -6, -1]).unwrap();
        // i=0: k=0 [1,8,3] -> 1; k=1 [9,2,2] -> 0. i=1: k=0 [-5,-4,-6] -> 1; k=1 [-1,-1,-1] -> 0.
        let y = eval_op(Argmax { axis: 1 }, &[&x]).unwrap();
        assert_eq!(y.ty(), TensorType::new(DType::U32, [2, 2]));
        assert_eq!(y.as_u32(), Some(&[1, 0, 1, 0][..]));
        // u32 values that collide in f32 (2^24 and 2^24 + 1) still compare exactly.
        let u = Tensor::u32([2], vec![1 << 24, (1 << 24) + 1]).unwrap();
        assert_eq!(argmax(&u, 0), [1]);
    }

    #[test]
    fn builder_rejects_bad_axes() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [4, 0])).unwrap();
        assert_eq!(g.argmax(x, 2).unwrap_err().to_string(), "argmax: axis 2 is out of range or empty for f32[4,0]");
        assert_eq!(g.argmax(x, 1).unwrap_err().to_string(), "argmax: axis 1 is out of range or empty for f32[4,0]");
        let y = g.argmax(x, 0).unwrap();
        assert_eq!(g.ty(y), &TensorType::new(DType::U32, [0]));
    }
}
