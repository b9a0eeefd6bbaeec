//! `where(cond, a, b)`: elementwise choice with broadcasting; `cond` is any integer tensor
//! (non-zero picks `a`).

use super::binary::{broadcast_indices, broadcast_same_dtype, gather_f32, gather_i64};
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

/// Inputs: `cond` (i32 or u32), `a`, `b` (one dtype); all three broadcast together.
#[derive(Clone, Debug, PartialEq)]
pub struct Select;

impl OpKind for Select {
    fn name(&self) -> &'static str {
        "where"
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("where", inputs.len(), 3)?;
        let cond = inputs[0];
        if !cond.dtype.is_int() {
            return Err(Error::shape("where", format!("condition must be an integer mask, got {cond}")));
        }
        let ab = broadcast_same_dtype("where", inputs[1], inputs[2])?;
        let shape = Shape::broadcast(&cond.shape, &ab)
            .ok_or_else(|| Error::shape("where", format!("condition {} does not broadcast with {ab}", cond.shape)))?;
        Ok(TensorType::new(inputs[1].dtype, shape))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let (cond, a, b) = (inputs[0], inputs[1], inputs[2]);
        let ty = self.infer(&[&cond.ty(), &a.ty(), &b.ty()])?;
        let pick = gather_i64(cond, &broadcast_indices(cond.shape(), &ty.shape));
        let (ia, ib) = (broadcast_indices(a.shape(), &ty.shape), broadcast_indices(b.shape(), &ty.shape));
        // Both paths copy values exactly: f16 -> f32 -> f16 round-trips, as does i32/u32 via i64.
        if ty.dtype.is_float() {
            let (va, vb) = (gather_f32(a, &ia), gather_f32(b, &ib));
            let out = pick.iter().zip(va.iter().zip(&vb)).map(|(&c, (&x, &y))| if c != 0 { x } else { y }).collect();
            Tensor::from_f32(ty.dtype, ty.shape, out)
        } else {
            let (va, vb) = (gather_i64(a, &ia), gather_i64(b, &ib));
            let out = pick.iter().zip(va.iter().zip(&vb)).map(|(&c, (&x, &y))| if c != 0 { x } else { y }).collect();
            Tensor::from_i64(ty.dtype, ty.shape, out)
        }
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}

impl Graph {
    /// `where(cond, a, b)`: `a` where `cond` is non-zero, else `b`, broadcasting all three.
    /// `cond` is an integer mask (as [`Graph::compare`] makes); `a` and `b` share a dtype.
    pub fn select(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Select, &[cond, a, b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    #[test]
    fn picks_with_broadcast_condition() {
        // cond [2,1] picks whole rows: row 0 from a, row 1 from the scalar b.
        let cond = Tensor::i32([2, 1], vec![-3, 0]).unwrap();
        let a = Tensor::f32([2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = Tensor::scalar_f32(f32::NEG_INFINITY);
        let y = eval_op(Select, &[&cond, &a, &b]).unwrap();
        assert_eq!(y.shape(), &Shape::from([2, 3]));
        let inf = f32::NEG_INFINITY;
        assert_eq!(y.to_f32(), vec![1.0, 2.0, 3.0, inf, inf, inf]);
    }

    #[test]
    fn integers_and_f16_are_copied_exactly() {
        let cond = Tensor::u32([3], vec![1, 0, 7]).unwrap();
        let a = Tensor::u32([3], vec![u32::MAX, 1, (1 << 24) + 1]).unwrap();
        let b = Tensor::u32([3], vec![0, u32::MAX - 1, 0]).unwrap();
        let y = eval_op(Select, &[&cond, &a, &b]).unwrap();
        assert_eq!(y.as_u32(), Some(&[u32::MAX, u32::MAX - 1, (1 << 24) + 1][..]));
        let h = Tensor::from_f32(DType::F16, [3], vec![0.1, 0.2, 0.3]).unwrap();
        let z = Tensor::from_f32(DType::F16, [3], vec![0.0; 3]).unwrap();
        let y = eval_op(Select, &[&cond, &h, &z]).unwrap();
        assert_eq!(y.data(), Tensor::from_f32(DType::F16, [3], vec![0.1, 0.0, 0.3]).unwrap().data());
    }

    #[test]
    fn builder_rejects_float_conditions_and_bad_shapes() {
        let mut g = Graph::new("t");
        let f = g.input("f", TensorType::new(DType::F32, [2, 3])).unwrap();
        let m = g.input("m", TensorType::new(DType::U32, [4, 1])).unwrap();
        let i = g.input("i", TensorType::new(DType::I32, [2, 3])).unwrap();
        assert_eq!(
            g.select(f, f, f).unwrap_err().to_string(),
            "where: condition must be an integer mask, got f32[2,3]"
        );
        assert_eq!(g.select(m, f, f).unwrap_err().to_string(), "where: condition [4,1] does not broadcast with [2,3]");
        assert_eq!(
            g.select(i, f, i).unwrap_err().to_string(),
            "where: operands have different dtypes: f32[2,3] and i32[2,3]"
        );
    }
}
