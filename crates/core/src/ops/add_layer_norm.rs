//! Fused residual add + layer norm: `layer_norm(a + b, gamma, beta)` for same-shaped `a`, `b`.
//! Emitted by the fusion pass when the sum feeds only the norm.

use super::layer_norm::{check_norm_params, normalize_rows};
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::TensorType;
use crate::tensor::Tensor;

/// Inputs: `a [..., D]`, `b` (the same type), `gamma [D]`, `beta [D]`. The sum is kept in f32
/// between the add and the norm, so for f16 tensors this is slightly more precise than the
/// unfused pair (which rounds the sum to f16).
#[derive(Clone, Debug, PartialEq)]
pub struct AddLayerNorm {
    pub eps: f32,
}

impl OpKind for AddLayerNorm {
    fn name(&self) -> &'static str {
        "add_layer_norm"
    }
    fn attrs(&self) -> String {
        format!("eps={}", self.eps)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("add_layer_norm", inputs.len(), 4)?;
        if inputs[0] != inputs[1] {
            return Err(Error::shape(
                "add_layer_norm",
                format!("operands must have one type, got {} and {}", inputs[0], inputs[1]),
            ));
        }
        check_norm_params("add_layer_norm", inputs[0], inputs[2], inputs[3])?;
        Ok(inputs[0].clone())
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let ty = self.infer(&[&inputs[0].ty(), &inputs[1].ty(), &inputs[2].ty(), &inputs[3].ty()])?;
        // The sum stays in f32 (not rounded to an f16 input dtype) before normalising.
        let mut sum = inputs[0].to_f32();
        sum.iter_mut().zip(inputs[1].to_f32_cow().iter()).for_each(|(a, b)| *a += b);
        normalize_rows(&mut sum, &inputs[2].to_f32_cow(), &inputs[3].to_f32_cow(), self.eps);
        Tensor::from_f32(ty.dtype, ty.shape, sum)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;
    use crate::ops::{Binary, BinaryKind, LayerNorm};

    #[test]
    fn hand_computed_row() {
        // a + b = [1, 2, 3, 4]: mean 2.5, biased var 1.25, eps 0 -> (x - 2.5) / sqrt(1.25)
        // = [-1.3416408, -0.4472136, 0.4472136, 1.3416408]; * gamma 2 + beta 1.
        let a = Tensor::f32([1, 4], vec![0.5, 3.0, 1.0, 4.0]).unwrap();
        let b = Tensor::f32([1, 4], vec![0.5, -1.0, 2.0, 0.0]).unwrap();
        let gamma = Tensor::f32([4], vec![2.0; 4]).unwrap();
        let beta = Tensor::f32([4], vec![1.0; 4]).unwrap();
        let y = eval_op(AddLayerNorm { eps: 0.0 }, &[&a, &b, &gamma, &beta]).unwrap().to_f32();
        let want = [-1.6832816, 0.1055728, 1.8944272, 3.6832816];
        for (g, w) in y.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{y:?}");
        }
    }

    #[test]
    fn equals_add_then_layer_norm() {
        let a = Tensor::f32([3, 5], (0..15).map(|i| (i as f32 * 0.7).cos() * 2.0).collect()).unwrap();
        let b = Tensor::f32([3, 5], (0..15).map(|i| (i as f32 * 1.3).sin()).collect()).unwrap();
        let gamma = Tensor::f32([5], vec![1.0, 0.5, -2.0, 1.5, 0.25]).unwrap();
        let beta = Tensor::f32([5], vec![0.0, 0.1, -0.2, 0.3, 1.0]).unwrap();
        let fused = eval_op(AddLayerNorm { eps: 1e-5 }, &[&a, &b, &gamma, &beta]).unwrap();
        let sum = eval_op(Binary { kind: BinaryKind::Add }, &[&a, &b]).unwrap();
        let unfused = eval_op(LayerNorm { eps: 1e-5 }, &[&sum, &gamma, &beta]).unwrap();
        assert_eq!(fused, unfused);
    }

    #[test]
    fn f16_sum_is_not_rounded_before_the_norm() {
        // a + b = [2049, 2048] in f32: mean 2048.5, var 0.25 -> [1, -1]. Rounded to f16 the
        // sum would be [2048, 2048] (2049 is a tie between 2048 and 2050; even wins), a row
        // with no variance at all.
        let a = Tensor::from_f32(DType::F16, [1, 2], vec![2048.0, 2048.0]).unwrap();
        let b = Tensor::from_f32(DType::F16, [1, 2], vec![1.0, 0.0]).unwrap();
        let gamma = Tensor::from_f32(DType::F16, [2], vec![1.0, 1.0]).unwrap();
        let beta = Tensor::from_f32(DType::F16, [2], vec![0.0, 0.0]).unwrap();
        let y = eval_op(AddLayerNorm { eps: 0.0 }, &[&a, &b, &gamma, &beta]).unwrap();
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.to_f32(), vec![1.0, -1.0]);
    }

    #[test]
    fn infer_rejects_mismatched_operands() {
        let x = TensorType::new(DType::F32, [2, 4]);
        let h = TensorType::new(DType::F16, [2, 4]);
        let w = TensorType::new(DType::F32, [4]);
        let op = AddLayerNorm { eps: 1e-5 };
        assert_eq!(
            op.infer(&[&x, &h, &w, &w]).unwrap_err().to_string(),
            "add_layer_norm: operands must have one type, got f32[2,4] and f16[2,4]"
        );
        assert_eq!(
            op.infer(&[&x, &x, &w, &x]).unwrap_err().to_string(),
            "add_layer_norm: beta must be a float [4] for input f32[2,4], got f32[2,4]"
        );
        assert_eq!(op.infer(&[&x, &x, &w]).unwrap_err().to_string(), "add_layer_norm: takes 4 inputs, got 3");
    }
}
