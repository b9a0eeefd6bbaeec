//! Softmax over the last axis, computed stably (subtracting the row maximum) in f32.
//!
//! A row that is entirely `-inf` (a fully masked attention row) gives NaN, as PyTorch does:
//! `-inf - max` is NaN there. Callers must not mask out every key of a query.

use super::cpu_kernels::par_chunks;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Softmax;

impl OpKind for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("softmax", inputs.len(), 1)?;
        let x = inputs[0];
        if !x.dtype.is_float() || x.shape.rank() == 0 || x.shape.last() == 0 {
            return Err(Error::shape("softmax", format!("needs a float tensor with a non-empty last axis, got {x}")));
        }
        Ok(x.clone())
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let x = inputs[0];
        self.infer(&[&x.ty()])?;
        let mut v = x.to_f32();
        let d = x.shape().last();
        // Rows are independent: large inputs split them over threads (an exp per value).
        par_chunks(&mut v, d, x.numel() * 16, |_, rows| {
            for row in rows.chunks_mut(d.max(1)) {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0f32;
                for e in row.iter_mut() {
                    *e = (*e - max).exp();
                    sum += *e;
                }
                for e in row.iter_mut() {
                    *e /= sum;
                }
            }
        });
        Tensor::from_f32(x.dtype(), x.shape().clone(), v)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// Softmax of a float tensor over its last axis.
    pub fn softmax(&mut self, x: NodeId) -> Result<NodeId> {
        self.push(Softmax, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    #[test]
    fn rows_match_hand_computed_values() {
        // Row [0, ln 2, ln 5]: exp gives [1, 2, 5], sum 8 -> [0.125, 0.25, 0.625].
        // Row [1000, 1000, -inf]: stable even where exp(1000) overflows -> [0.5, 0.5, 0].
        let x = Tensor::f32([2, 3], vec![0.0, 2f32.ln(), 5f32.ln(), 1000.0, 1000.0, f32::NEG_INFINITY]).unwrap();
        let y = eval_op(Softmax, &[&x]).unwrap().to_f32();
        let want = [0.125, 0.25, 0.625, 0.5, 0.5, 0.0];
        for (a, b) in y.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{y:?}");
        }
    }

    #[test]
    fn all_masked_row_is_nan_and_f16_rounds() {
        let x = Tensor::f32([2, 2], vec![f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0, 0.0]).unwrap();
        let y = eval_op(Softmax, &[&x]).unwrap().to_f32();
        assert!(y[0].is_nan() && y[1].is_nan());
        assert_eq!(&y[2..], [0.5, 0.5]);
        // [0, ln 2]: exp gives [1, 2] -> [1/3, 2/3], each rounded to f16.
        let x = Tensor::from_f32(DType::F16, [2], vec![0.0, 2f32.ln()]).unwrap();
        let y = eval_op(Softmax, &[&x]).unwrap();
        let third = half::f16::from_f32(1.0 / 3.0).to_f32();
        let two_thirds = half::f16::from_f32(2.0 / 3.0).to_f32();
        assert_eq!(y.dtype(), DType::F16);
        // ln 2 itself rounds to f16 (moving the result by ~5e-5), so allow one f16 step:
        // 2^-12 in [0.25, 0.5), 2^-11 in [0.5, 1).
        let got = y.to_f32();
        assert!((got[0] - third).abs() <= 2f32.powi(-12) && (got[1] - two_thirds).abs() <= 2f32.powi(-11), "{got:?}");
    }

    #[test]
    fn builder_rejects_scalars_and_integers() {
        let mut g = Graph::new("t");
        let s = g.input("s", TensorType::new(DType::F32, [])).unwrap();
        let i = g.input("i", TensorType::new(DType::U32, [4])).unwrap();
        assert_eq!(
            g.softmax(s).unwrap_err().to_string(),
            "softmax: needs a float tensor with a non-empty last axis, got f32[]"
        );
        assert_eq!(
            g.softmax(i).unwrap_err().to_string(),
            "softmax: needs a float tensor with a non-empty last axis, got u32[4]"
        );
    }
}
