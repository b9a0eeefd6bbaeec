//! Reshape to a shape with the same element count. Tensors are contiguous, so this is a view:
//! the planner gives the output the input's storage and backends run nothing.

use super::gather::infer_values;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Reshape {
    pub shape: Shape,
}

impl OpKind for Reshape {
    fn name(&self) -> &'static str {
        "reshape"
    }
    fn attrs(&self) -> String {
        format!("to={}", self.shape)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("reshape", inputs.len(), 1)?;
        let x = inputs[0];
        if x.numel() != self.shape.numel() {
            return Err(Error::shape(
                "reshape",
                format!("cannot reshape {x} ({} elements) to {}", x.numel(), self.shape),
            ));
        }
        Ok(TensorType::new(x.dtype, self.shape.clone()))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        inputs[0].clone().reshaped(out.shape)
    }
    fn memory(&self) -> Memory {
        Memory::Alias
    }
}

impl Graph {
    /// `x` viewed with another shape of the same element count (row-major order kept).
    pub fn reshape(&mut self, x: NodeId, shape: impl Into<Shape>) -> Result<NodeId> {
        self.push(Reshape { shape: shape.into() }, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    #[test]
    fn keeps_data_of_any_dtype() {
        let x = Tensor::i32([2, 3], vec![1, -2, 3, i32::MAX, 5, i32::MIN]).unwrap();
        let y = eval_op(Reshape { shape: Shape::from([3, 1, 2]) }, &[&x]).unwrap();
        assert_eq!(y.shape().dims(), [3, 1, 2]);
        assert_eq!(y.as_i32().unwrap(), [1, -2, 3, i32::MAX, 5, i32::MIN]);

        let x = Tensor::u32([4], vec![u32::MAX, 0, 7, 9]).unwrap();
        let y = eval_op(Reshape { shape: Shape::from([2, 2]) }, &[&x]).unwrap();
        assert_eq!(y.as_u32().unwrap(), [u32::MAX, 0, 7, 9]);

        let x = Tensor::from_f32(DType::F16, [2], vec![0.1, 2.0]).unwrap();
        let y = eval_op(Reshape { shape: Shape::from([1, 2]) }, &[&x]).unwrap();
        assert_eq!(y.data(), x.data());

        let x = Tensor::f32([1], vec![4.5]).unwrap();
        let y = eval_op(Reshape { shape: Shape::scalar() }, &[&x]).unwrap();
        assert_eq!((y.shape().rank(), y.to_f32()), (0, vec![4.5]));
    }

    #[test]
    fn element_count_must_match() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [2, 3])).unwrap();
        let err = g.reshape(x, [4]).unwrap_err();
        assert_eq!(err.to_string(), "reshape: cannot reshape f32[2,3] (6 elements) to [4]");
        let y = g.reshape(x, vec![6]).unwrap();
        assert_eq!(g.ty(y), &TensorType::new(DType::F32, [6]));
    }
}
