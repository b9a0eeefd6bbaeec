//! Convert to another dtype: floats round to nearest for f16; float to integer truncates
//! toward zero and saturates (NaN becomes 0), as Rust's `as` does; integer to integer keeps
//! the bits (i32 -1 is u32 4294967295), also as `as` does; integer to float rounds to nearest.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::Result;
use crate::ir::{DType, Graph, NodeId, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Cast {
    pub to: DType,
}

impl OpKind for Cast {
    fn name(&self) -> &'static str {
        "cast"
    }
    fn attrs(&self) -> String {
        format!("to={}", self.to)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("cast", inputs.len(), 1)?;
        Ok(TensorType::new(self.to, inputs[0].shape.clone()))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let x = inputs[0];
        // Integers go through i64 so values above 2^24 stay exact between i32 and u32; an
        // integer reaching f16 through f32 rounds once, since every i32/u32 that f16 can
        // hold without overflowing to infinity is exact in f32.
        if x.dtype().is_weight_float() {
            Tensor::from_f32(self.to, x.shape().clone(), x.to_f32())
        } else {
            Tensor::from_i64(self.to, x.shape().clone(), x.to_i64())
        }
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}

impl Graph {
    /// `x` converted to `to` (see the module doc for the rounding and saturation rules).
    pub fn cast(&mut self, x: NodeId, to: DType) -> Result<NodeId> {
        self.push(Cast { to }, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::eval_op;

    fn cast(x: &Tensor, to: DType) -> Tensor {
        eval_op(Cast { to }, &[x]).unwrap()
    }

    #[test]
    fn float_to_int_truncates_and_saturates() {
        let x = Tensor::f32([7], vec![2.9, -2.9, 3e9, -3e9, f32::NAN, f32::INFINITY, -0.5]).unwrap();
        assert_eq!(cast(&x, DType::I32).as_i32(), Some(&[2, -2, i32::MAX, i32::MIN, 0, i32::MAX, 0][..]));
        assert_eq!(cast(&x, DType::U32).as_u32(), Some(&[2, 0, 3_000_000_000, 0, 0, u32::MAX, 0][..]));
        let h = Tensor::from_f32(DType::F16, [2], vec![65504.0, -7.75]).unwrap();
        assert_eq!(cast(&h, DType::I32).as_i32(), Some(&[65504, -7][..]));
    }

    #[test]
    fn between_floats_rounds_to_nearest() {
        // 1 + 2^-11 is halfway between f16 neighbours 1 and 1 + 2^-10: ties go to even (1).
        // 70000 is beyond f16's largest finite value 65504 and becomes infinity.
        let x = Tensor::f32([3], vec![1.0 + 2f32.powi(-11), 70000.0, 0.1]).unwrap();
        let h = cast(&x, DType::F16);
        assert_eq!(h.to_f32(), vec![1.0, f32::INFINITY, half::f16::from_f32(0.1).to_f32()]);
        // Back to f32 is exact.
        assert_eq!(cast(&h, DType::F32).as_f32(), Some(&h.to_f32()[..]));
    }

    #[test]
    fn between_integers_keeps_bits_and_to_float_rounds() {
        let i = Tensor::i32([3], vec![-1, i32::MIN, 16_777_217]).unwrap();
        assert_eq!(cast(&i, DType::U32).as_u32(), Some(&[u32::MAX, 1 << 31, 16_777_217][..]));
        // 2^24 + 1 is not an f32: it rounds to even, 2^24.
        assert_eq!(cast(&i, DType::F32).as_f32(), Some(&[-1.0, -2147483648.0, 16_777_216.0][..]));
        let u = Tensor::u32([3], vec![u32::MAX, 2049, 7]).unwrap();
        assert_eq!(cast(&u, DType::I32).as_i32(), Some(&[-1, 2049, 7][..]));
        // 2049 is between f16 neighbours 2048 and 2050 (spacing 2): ties to even, 2048.
        assert_eq!(cast(&u, DType::F16).to_f32(), vec![f32::INFINITY, 2048.0, 7.0]);
    }

    #[test]
    fn builder_types_the_result() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F16, [2, 3])).unwrap();
        let y = g.cast(x, DType::U32).unwrap();
        assert_eq!(g.ty(y), &TensorType::new(DType::U32, [2, 3]));
        assert_eq!(g.node(y).op.attrs(), "to=u32");
    }
}
