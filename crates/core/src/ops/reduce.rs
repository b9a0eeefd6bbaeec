//! Reductions over one axis: sum, mean, max. Floats accumulate in f32, in index order.
//!
//! `max` propagates NaN (a NaN anywhere in the reduced run gives NaN), like PyTorch and
//! consistent with argmax treating NaN as the largest value.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
}

impl ReduceKind {
    pub const ALL: [ReduceKind; 3] = [ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max];

    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Mean => "reduce_mean",
            ReduceKind::Max => "reduce_max",
        }
    }
}

/// Reduces `axis`; with `keep_dim` the axis stays with size 1, else it is removed.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub axis: usize,
    pub keep_dim: bool,
}

impl OpKind for Reduce {
    fn name(&self) -> &'static str {
        self.kind.name()
    }
    fn attrs(&self) -> String {
        format!("axis={} keep_dim={}", self.axis, self.keep_dim)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity(self.name(), inputs.len(), 1)?;
        let x = inputs[0];
        if !x.dtype.is_float() {
            return Err(Error::shape(self.name(), format!("needs a float tensor, got {x}")));
        }
        if self.axis >= x.shape.rank() || x.shape.dims()[self.axis] == 0 {
            return Err(Error::shape(self.name(), format!("axis {} is out of range or empty for {x}", self.axis)));
        }
        let mut dims = x.shape.dims().to_vec();
        if self.keep_dim {
            dims[self.axis] = 1;
        } else {
            dims.remove(self.axis);
        }
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let x = inputs[0];
        let ty = self.infer(&[&x.ty()])?;
        let (outer, n, inner) = x.shape().split_at_axis(self.axis);
        let v = x.to_f32();
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let run = (0..n).map(|k| v[(o * n + k) * inner + i]);
                out.push(match self.kind {
                    ReduceKind::Sum => run.sum(),
                    ReduceKind::Mean => run.sum::<f32>() / n as f32,
                    ReduceKind::Max => run.fold(f32::NEG_INFINITY, |m, e| if e.is_nan() || e > m { e } else { m }),
                });
            }
        }
        Tensor::from_f32(ty.dtype, ty.shape, out)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// Reduces `x` (a float tensor) over `axis`; with `keep_dim` the axis stays with size 1.
    pub fn reduce(&mut self, kind: ReduceKind, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.push(Reduce { kind, axis, keep_dim }, &[x])
    }
    /// Sum over `axis`.
    pub fn reduce_sum(&mut self, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.reduce(ReduceKind::Sum, x, axis, keep_dim)
    }
    /// Arithmetic mean over `axis`.
    pub fn reduce_mean(&mut self, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.reduce(ReduceKind::Mean, x, axis, keep_dim)
    }
    /// Maximum over `axis` (NaN if any reduced value is NaN).
    pub fn reduce_max(&mut self, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.reduce(ReduceKind::Max, x, axis, keep_dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn reduce(kind: ReduceKind, x: &Tensor, axis: usize, keep_dim: bool) -> Tensor {
        eval_op(Reduce { kind, axis, keep_dim }, &[x]).unwrap()
    }

    #[test]
    fn every_axis_of_a_rank3_tensor() {
        // x[i,j,k] = 12i + 4j + k + 1 for shape [2,3,4] (values 1..=24).
        let x = Tensor::f32([2, 3, 4], (1..=24).map(|v| v as f32).collect()).unwrap();
        // axis 0: x[0,j,k] + x[1,j,k] = 2 * (4j + k + 1) + 12.
        let y = reduce(ReduceKind::Sum, &x, 0, false);
        assert_eq!(y.shape(), &Shape::from([3, 4]));
        assert_eq!(y.to_f32(), (0..12).map(|m| 2.0 * (m + 1) as f32 + 12.0).collect::<Vec<_>>());
        // axis 1 mean: the middle row j = 1, i.e. 12i + k + 5.
        let y = reduce(ReduceKind::Mean, &x, 1, true);
        assert_eq!(y.shape(), &Shape::from([2, 1, 4]));
        assert_eq!(y.to_f32(), vec![5.0, 6.0, 7.0, 8.0, 17.0, 18.0, 19.0, 20.0]);
        // axis 2 max: the last column k = 3, i.e. 12i + 4j + 4.
        let y = reduce(ReduceKind::Max, &x, 2, false);
        assert_eq!(y.to_f32(), vec![4.0, 8.0, 12.0, 16.0, 20.0, 24.0]);
    }

    #[test]
    fn max_propagates_nan_and_handles_negative_infinity() {
        let x = Tensor::f32([2, 3], vec![1.0, f32::NAN, 3.0, f32::NEG_INFINITY, -5.0, -2.0]).unwrap();
        let y = reduce(ReduceKind::Max, &x, 1, false).to_f32();
        assert!(y[0].is_nan());
        assert_eq!(y[1], -2.0);
        let all_neg_inf = Tensor::f32([2], vec![f32::NEG_INFINITY; 2]).unwrap();
        assert_eq!(reduce(ReduceKind::Max, &all_neg_inf, 0, false).to_f32(), vec![f32::NEG_INFINITY]);
    }

    #[test]
    fn f16_accumulates_in_f32() {
        // 2048 + 1 + 1 + 1 + 1: in f16 each +1 would round back to 2048 (spacing 2 there);
        // in f32 the sum is 2052, which f16 represents exactly.
        let x = Tensor::from_f32(DType::F16, [5], vec![2048.0, 1.0, 1.0, 1.0, 1.0]).unwrap();
        let y = reduce(ReduceKind::Sum, &x, 0, false);
        assert_eq!(y.ty(), TensorType::new(DType::F16, []));
        assert_eq!(y.to_f32(), vec![2052.0]);
        // Mean 2052 / 5 = 410.4, rounded to the f16 grid (spacing 0.25 in [256, 512)): 410.5.
        assert_eq!(reduce(ReduceKind::Mean, &x, 0, false).to_f32(), vec![410.5]);
    }

    #[test]
    fn builder_rejects_bad_axes_and_integers() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [2, 0])).unwrap();
        let i = g.input("i", TensorType::new(DType::I32, [2])).unwrap();
        assert_eq!(
            g.reduce_sum(x, 2, false).unwrap_err().to_string(),
            "reduce_sum: axis 2 is out of range or empty for f32[2,0]"
        );
        assert_eq!(
            g.reduce_max(x, 1, true).unwrap_err().to_string(),
            "reduce_max: axis 1 is out of range or empty for f32[2,0]"
        );
        assert_eq!(
            g.reduce_mean(i, 0, false).unwrap_err().to_string(),
            "reduce_mean: needs a float tensor, got i32[2]"
        );
    }
}
