//! Concatenate one or more tensors of one dtype along an axis.

use super::gather::{infer_values, take};
use super::{EvalCtx, Memory, OpKind};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Concat {
    pub axis: usize,
}

impl OpKind for Concat {
    fn name(&self) -> &'static str {
        "concat"
    }
    fn attrs(&self) -> String {
        format!("axis={}", self.axis)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        let first = inputs.first().ok_or_else(|| Error::shape("concat", "needs at least one input"))?;
        if self.axis >= first.shape.rank() {
            return Err(Error::shape("concat", format!("axis {} is out of range for {first}", self.axis)));
        }
        let mut dims = first.shape.dims().to_vec();
        dims[self.axis] = 0;
        for t in inputs {
            let same_other_dims = t.shape.rank() == dims.len()
                && t.shape
                    .dims()
                    .iter()
                    .zip(first.shape.dims())
                    .enumerate()
                    .all(|(i, (a, b))| i == self.axis || a == b);
            if t.dtype != first.dtype || !same_other_dims {
                return Err(Error::shape("concat", format!("{t} does not match {first} outside axis {}", self.axis)));
            }
            dims[self.axis] += t.shape.dims()[self.axis];
        }
        Ok(TensorType::new(first.dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        // Every input is [outer, d_i, inner]; the output interleaves their blocks of d_i * inner
        // elements for each outer index. `take` indexes the inputs' data laid end to end.
        let outer = out.shape.dims()[..self.axis].iter().product::<usize>();
        let inner = out.shape.dims()[self.axis + 1..].iter().product::<usize>();
        let mut starts = Vec::with_capacity(inputs.len());
        let mut total = 0;
        for t in inputs {
            starts.push(total);
            total += t.numel();
        }
        let mut index = Vec::with_capacity(out.numel());
        for o in 0..outer {
            for (t, start) in inputs.iter().zip(&starts) {
                let block = t.shape().dims()[self.axis] * inner;
                index.extend(start + o * block..start + (o + 1) * block);
            }
        }
        Tensor::new(out.shape, take("concat", inputs, &index)?)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// `parts` joined along `axis`; they must share the dtype and every other dimension.
    pub fn concat(&mut self, parts: &[NodeId], axis: usize) -> Result<NodeId> {
        self.push(Concat { axis }, parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    #[test]
    fn joins_along_each_axis() {
        // a = [[1],[2]], b = [[3,4],[5,6]]: along axis 1 -> [[1,3,4],[2,5,6]].
        let a = Tensor::f32([2, 1], vec![1.0, 2.0]).unwrap();
        let b = Tensor::f32([2, 2], vec![3.0, 4.0, 5.0, 6.0]).unwrap();
        let y = eval_op(Concat { axis: 1 }, &[&a, &b]).unwrap();
        assert_eq!(y.shape().dims(), [2, 3]);
        assert_eq!(y.to_f32(), vec![1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);

        // Along axis 0, three u32 parts stack their rows in order.
        let p = |v: Vec<u32>| Tensor::u32([v.len() / 2, 2], v).unwrap();
        let (x, y, z) = (p(vec![1, 2]), p(vec![3, 4, 5, 6]), p(vec![u32::MAX, 0]));
        let out = eval_op(Concat { axis: 0 }, &[&x, &y, &z]).unwrap();
        assert_eq!(out.shape().dims(), [4, 2]);
        assert_eq!(out.as_u32().unwrap(), [1, 2, 3, 4, 5, 6, u32::MAX, 0]);
    }

    #[test]
    fn middle_axis_and_integers() {
        // a [2,1,2] = [[[1,2]],[[3,4]]], b [2,2,2] = [[[5,6],[7,8]],[[9,10],[11,12]]] along axis 1:
        // block 0 = [1,2,5,6,7,8], block 1 = [3,4,9,10,11,12].
        let a = Tensor::i32([2, 1, 2], vec![1, 2, 3, 4]).unwrap();
        let b = Tensor::i32([2, 2, 2], (5..13).collect()).unwrap();
        let y = eval_op(Concat { axis: 1 }, &[&a, &b]).unwrap();
        assert_eq!(y.shape().dims(), [2, 3, 2]);
        assert_eq!(y.as_i32().unwrap(), [1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12]);
        // A single part is a copy.
        assert_eq!(eval_op(Concat { axis: 2 }, &[&b]).unwrap(), b);
    }

    #[test]
    fn mismatched_parts_are_errors() {
        let mut g = Graph::new("t");
        let a = g.input("a", TensorType::new(DType::F32, [2, 3])).unwrap();
        let b = g.input("b", TensorType::new(DType::F32, [2, 4])).unwrap();
        let c = g.input("c", TensorType::new(DType::F16, [2, 3])).unwrap();
        let err = |r: Result<NodeId>| r.unwrap_err().to_string();
        assert_eq!(err(g.concat(&[a, b], 0)), "concat: f32[2,4] does not match f32[2,3] outside axis 0");
        assert_eq!(err(g.concat(&[a, c], 0)), "concat: f16[2,3] does not match f32[2,3] outside axis 0");
        assert_eq!(err(g.concat(&[a, b], 2)), "concat: axis 2 is out of range for f32[2,3]");
        assert_eq!(err(g.concat(&[], 0)), "concat: needs at least one input");
        let y = g.concat(&[a, b], 1).unwrap();
        assert_eq!(g.ty(y), &TensorType::new(DType::F32, [2, 7]));
    }
}
