//! Slice `start..end` (step 1) along one axis.

use super::gather::{infer_values, take};
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    pub axis: usize,
    pub start: usize,
    pub end: usize,
}

impl OpKind for Slice {
    fn name(&self) -> &'static str {
        "slice"
    }
    fn attrs(&self) -> String {
        format!("axis={} {}..{}", self.axis, self.start, self.end)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("slice", inputs.len(), 1)?;
        let x = inputs[0];
        if self.axis >= x.shape.rank() || self.start > self.end || self.end > x.shape.dims()[self.axis] {
            return Err(Error::shape(
                "slice",
                format!("{}..{} on axis {} is out of range for {x}", self.start, self.end, self.axis),
            ));
        }
        let mut dims = x.shape.dims().to_vec();
        dims[self.axis] = self.end - self.start;
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        // View the input as [outer, dim, inner] around the sliced axis.
        let dims = inputs[0].shape().dims();
        let (outer, dim) = (dims[..self.axis].iter().product::<usize>(), dims[self.axis]);
        let inner = dims[self.axis + 1..].iter().product::<usize>();
        let mut index = Vec::with_capacity(out.numel());
        for o in 0..outer {
            for j in self.start..self.end {
                let row = (o * dim + j) * inner;
                index.extend(row..row + inner);
            }
        }
        Tensor::new(out.shape, take("slice", inputs, &index)?)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// Elements `start..end` of `x` along `axis` (other axes whole).
    pub fn slice(&mut self, x: NodeId, axis: usize, start: usize, end: usize) -> Result<NodeId> {
        self.push(Slice { axis, start, end }, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn slice(x: &Tensor, axis: usize, start: usize, end: usize) -> Tensor {
        eval_op(Slice { axis, start, end }, &[x]).unwrap()
    }

    #[test]
    fn slices_each_axis() {
        // x = [[0,1,2,3],[4,5,6,7]].
        let x = Tensor::i32([2, 4], (0..8).collect()).unwrap();
        let y = slice(&x, 1, 1, 3);
        assert_eq!(y.shape().dims(), [2, 2]);
        assert_eq!(y.as_i32().unwrap(), [1, 2, 5, 6]);
        assert_eq!(slice(&x, 0, 1, 2).as_i32().unwrap(), [4, 5, 6, 7]);
        assert_eq!(slice(&x, 0, 0, 2), x);
        let empty = slice(&x, 1, 2, 2);
        assert_eq!((empty.shape().dims(), empty.numel()), (&[2, 0][..], 0));

        // Middle axis of [2,3,2] = 0..12: rows 1..3 of each block -> [2..6] and [8..12].
        let x = Tensor::u32([2, 3, 2], (0..12).map(|v| u32::MAX - v).collect()).unwrap();
        let y = slice(&x, 1, 1, 3);
        let want: Vec<u32> = [2, 3, 4, 5, 8, 9, 10, 11].iter().map(|v| u32::MAX - v).collect();
        assert_eq!(y.as_u32().unwrap(), want);
    }

    #[test]
    fn f16_values_are_copied_exactly() {
        let x = Tensor::from_f32(DType::F16, [3], vec![0.1, 0.2, 0.3]).unwrap();
        let y = slice(&x, 0, 1, 3);
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.to_f32(), x.to_f32()[1..].to_vec());
    }

    #[test]
    fn out_of_range_is_an_error() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [2, 4])).unwrap();
        let err = |r: Result<NodeId>| r.unwrap_err().to_string();
        assert_eq!(err(g.slice(x, 1, 2, 5)), "slice: 2..5 on axis 1 is out of range for f32[2,4]");
        assert_eq!(err(g.slice(x, 1, 3, 2)), "slice: 3..2 on axis 1 is out of range for f32[2,4]");
        assert_eq!(err(g.slice(x, 2, 0, 1)), "slice: 0..1 on axis 2 is out of range for f32[2,4]");
    }
}
