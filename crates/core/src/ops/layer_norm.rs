//! Layer norm over the last axis: `(x - mean) / sqrt(var + eps) * gamma + beta`, with the
//! biased variance, in f32.

use super::cpu_kernels::par_chunks;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, TensorType};
use crate::tensor::Tensor;

/// Inputs: `x [..., D]`, `gamma [D]`, `beta [D]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    pub eps: f32,
}

/// Checks `x [..., D]`, `gamma [D]`, `beta [D]`; shared with the fused add + layer norm.
pub(crate) fn check_norm_params(op: &str, x: &TensorType, gamma: &TensorType, beta: &TensorType) -> Result<()> {
    let d = x.shape.last();
    if !x.dtype.is_float() || x.shape.rank() == 0 || d == 0 {
        return Err(Error::shape(op, format!("needs a float tensor with a non-empty last axis, got {x}")));
    }
    for (what, p) in [("gamma", gamma), ("beta", beta)] {
        if !p.dtype.is_float() || p.shape.dims() != [d] {
            return Err(Error::shape(op, format!("{what} must be a float [{d}] for input {x}, got {p}")));
        }
    }
    Ok(())
}

/// Normalises each row of `d` values of `x` in place: `(x - mean) / sqrt(var + eps) * gamma
/// + beta` with the biased variance (divided by `d`), all in f32. Shared with add + layer norm.
pub(crate) fn normalize_rows(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let d = gamma.len();
    // Rows are independent: large inputs split them over threads.
    par_chunks(x, d, x.len() * 8, |_, rows| rows.chunks_mut(d).for_each(|row| normalize_row(row, gamma, beta, eps)));
}

/// One row of [`normalize_rows`]. Mean and variance accumulate in f64: the reference must not
/// lose digits on rows with a large offset (a sequential f32 sum does), since every backend
/// is measured against it.
fn normalize_row(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let d = gamma.len();
    let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / d as f64;
    let var = row.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / d as f64;
    let scale = 1.0 / (var + f64::from(eps)).sqrt();
    for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = ((f64::from(*v) - mean) * scale) as f32 * g + b;
    }
}

impl OpKind for LayerNorm {
    fn name(&self) -> &'static str {
        "layer_norm"
    }
    fn attrs(&self) -> String {
        format!("eps={}", self.eps)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("layer_norm", inputs.len(), 3)?;
        check_norm_params("layer_norm", inputs[0], inputs[1], inputs[2])?;
        Ok(inputs[0].clone())
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let (x, gamma, beta) = (inputs[0], inputs[1], inputs[2]);
        check_norm_params("layer_norm", &x.ty(), &gamma.ty(), &beta.ty())?;
        let mut v = x.to_f32();
        normalize_rows(&mut v, &gamma.to_f32_cow(), &beta.to_f32_cow(), self.eps);
        Tensor::from_f32(x.dtype(), x.shape().clone(), v)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// Layer norm of `x [..., D]` over its last axis with weights `gamma [D]`, `beta [D]`;
    /// `eps` is added to the (biased) variance inside the square root.
    pub fn layer_norm(&mut self, x: NodeId, gamma: NodeId, beta: NodeId, eps: f32) -> Result<NodeId> {
        self.push(LayerNorm { eps }, &[x, gamma, beta])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    #[test]
    fn normalises_each_row_with_biased_variance() {
        // Row [1,2,3,4]: mean 2.5, deviations [-1.5,-0.5,0.5,1.5], biased var (2.25+0.25)*2/4
        // = 1.25. With eps = 0.75 the scale is 1/sqrt(2) -> deviations * 0.70710678.
        // Row [5,5,5,5]: var 0 -> all deviations 0 -> output is beta.
        let x = Tensor::f32([2, 4], vec![1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0, 5.0]).unwrap();
        let gamma = Tensor::f32([4], vec![1.0, 1.0, 2.0, -1.0]).unwrap();
        let beta = Tensor::f32([4], vec![0.0, 0.5, 0.0, 1.0]).unwrap();
        let y = eval_op(LayerNorm { eps: 0.75 }, &[&x, &gamma, &beta]).unwrap().to_f32();
        let r = std::f32::consts::FRAC_1_SQRT_2;
        let want = [-1.5 * r, -0.5 * r + 0.5, 2.0 * 0.5 * r, -1.5 * r + 1.0, 0.0, 0.5, 0.0, 1.0];
        for (a, b) in y.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{y:?} != {want:?}");
        }
    }

    #[test]
    fn f16_input_and_weights_compute_in_f32() {
        // [-1, 1]: mean 0, var 1, eps 0 -> [-1, 1]; then * gamma 3 + beta 0.1 -> [-2.9, 3.1],
        // each rounded to f16 once.
        let x = Tensor::from_f32(DType::F16, [1, 2], vec![-1.0, 1.0]).unwrap();
        let gamma = Tensor::from_f32(DType::F16, [2], vec![3.0, 3.0]).unwrap();
        let beta = Tensor::f32([2], vec![0.1, 0.1]).unwrap();
        let y = eval_op(LayerNorm { eps: 0.0 }, &[&x, &gamma, &beta]).unwrap();
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.data(), Tensor::from_f32(DType::F16, [1, 2], vec![-2.9, 3.1]).unwrap().data());
    }

    #[test]
    fn builder_rejects_mismatched_weights() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [3, 4])).unwrap();
        let w4 = g.param("w4", TensorType::new(DType::F32, [4])).unwrap();
        let w3 = g.param("w3", TensorType::new(DType::F32, [3])).unwrap();
        let ids = g.input("ids", TensorType::new(DType::I32, [3, 4])).unwrap();
        assert_eq!(
            g.layer_norm(x, w4, w3, 1e-5).unwrap_err().to_string(),
            "layer_norm: beta must be a float [4] for input f32[3,4], got f32[3]"
        );
        assert_eq!(
            g.layer_norm(ids, w4, w4, 1e-5).unwrap_err().to_string(),
            "layer_norm: needs a float tensor with a non-empty last axis, got i32[3,4]"
        );
    }
}
