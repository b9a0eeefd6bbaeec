//! Fused matmul + bias (+ GELU) (+ residual): `act(a x b + bias) + residual` with `bias [N]`
//! added to every row and, when `residual`, a fourth input of the output's shape added last.
//! Emitted by the matmul fusion pass; the linear layers of Whisper are all this op, and those
//! that end a residual block (attention's output projection, the MLP's second layer) take the
//! residual stream's add too: one kernel instead of two.

use super::cpu_kernels::par_chunks;
use super::gather::infer_values;
use super::matmul::{matmul_f32, matmul_type};
use super::{EvalCtx, Memory, OpKind, UnaryKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::TensorType;
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct MatMulBias {
    pub transpose_b: bool,
    /// Apply GELU (erf form) after the bias.
    pub gelu: bool,
    /// Input 3, of the output's shape, is added after the activation.
    pub residual: bool,
}

impl OpKind for MatMulBias {
    fn name(&self) -> &'static str {
        "matmul_bias"
    }
    fn attrs(&self) -> String {
        let mut a = Vec::new();
        if self.transpose_b {
            a.push("transpose_b");
        }
        if self.gelu {
            a.push("gelu");
        }
        if self.residual {
            a.push("residual");
        }
        a.join(" ")
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("matmul_bias", inputs.len(), 3 + usize::from(self.residual))?;
        let out = matmul_type("matmul_bias", inputs[0], inputs[1], self.transpose_b)?;
        if let Some(r) = inputs.get(3)
            && (!r.dtype.is_float() || r.shape != out.shape)
        {
            return Err(Error::shape("matmul_bias", format!("the residual must be a float {}, got {r}", out.shape)));
        }
        let bias = inputs[2];
        if !bias.dtype.is_float() || bias.shape.dims() != [out.shape.last()] {
            return Err(Error::shape(
                "matmul_bias",
                format!("bias must be a float [{}], got {bias}", out.shape.last()),
            ));
        }
        Ok(out)
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        let mut values = matmul_f32(inputs[0], inputs[1], self.transpose_b, &out.shape);
        let bias = inputs[2].to_f32_cow();
        let residual = inputs.get(3).map(|r| r.to_f32_cow());
        // `infer` made the bias as long as a row; `max(1)` only guards empty outputs. GELU
        // (an erf per value) costs enough to be worth the threads.
        let row_len = bias.len().max(1);
        let work = if self.gelu { values.len() * 32 } else { values.len() };
        par_chunks(&mut values, row_len, work, |first, rows| {
            for (i, row) in rows.chunks_mut(row_len).enumerate() {
                let at = (first + i) * row_len;
                for (c, (v, b)) in row.iter_mut().zip(bias.iter()).enumerate() {
                    *v += b;
                    if self.gelu {
                        *v = UnaryKind::Gelu.apply(*v);
                    }
                    if let Some(r) = &residual {
                        *v += r[at + c];
                    }
                }
            }
        });
        Tensor::from_f32(out.dtype, out.shape, values)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Graph};
    use crate::ops::testing::eval_op;
    use crate::ops::{Binary, BinaryKind, MatMul, Unary};

    /// Deterministic values in [-1, 1] that differ from element to element.
    fn wave(shape: &[usize], seed: f32) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::f32(shape, (0..n).map(|i| (i as f32 * 0.73 + seed).sin()).collect()).unwrap()
    }

    /// matmul, then add (the bias broadcast over rows), then gelu, each through its own op:
    /// the unfused path the fusion pass replaces.
    fn unfused(a: &Tensor, b: &Tensor, bias: &Tensor, transpose_b: bool, gelu: bool) -> Tensor {
        let prod = eval_op(MatMul { transpose_b }, &[a, b]).unwrap();
        let sum = eval_op(Binary { kind: BinaryKind::Add }, &[&prod, bias]).unwrap();
        if gelu { eval_op(Unary { kind: UnaryKind::Gelu }, &[&sum]).unwrap() } else { sum }
    }

    #[test]
    fn by_hand() {
        // [1,-1] x I + [0, 0.5] = [1, -0.5]; gelu(1) = 0.8413447461, gelu(-0.5) = -0.1542687694.
        let a = Tensor::f32([1, 2], vec![1.0, -1.0]).unwrap();
        let eye = Tensor::f32([2, 2], vec![1.0, 0.0, 0.0, 1.0]).unwrap();
        let bias = Tensor::f32([2], vec![0.0, 0.5]).unwrap();
        let y = eval_op(MatMulBias { transpose_b: false, gelu: false, residual: false }, &[&a, &eye, &bias]).unwrap();
        assert_eq!(y.to_f32(), vec![1.0, -0.5]);
        let y = eval_op(MatMulBias { transpose_b: true, gelu: true, residual: false }, &[&a, &eye, &bias])
            .unwrap()
            .to_f32();
        assert!((y[0] - 0.841_344_7).abs() < 1e-6 && (y[1] + 0.154_268_77).abs() < 1e-6, "{y:?}");
    }

    #[test]
    fn equals_matmul_then_bias_then_gelu() {
        let a = wave(&[2, 3, 5], 0.1);
        let bias = wave(&[4], 2.0);
        for transpose_b in [false, true] {
            let b = wave(if transpose_b { &[4, 5] } else { &[5, 4] }, 1.0);
            for gelu in [false, true] {
                let fused = eval_op(MatMulBias { transpose_b, gelu, residual: false }, &[&a, &b, &bias]).unwrap();
                let want = unfused(&a, &b, &bias, transpose_b, gelu);
                assert_eq!(fused.shape().dims(), [2, 3, 4]);
                assert_eq!(fused.to_f32(), want.to_f32(), "transpose_b={transpose_b} gelu={gelu}");
            }
        }
        // f16 activations with f16 weights and bias round once, at the end, like the unfused path's
        // last op; the unfused path also rounds in between, so compare within an f16 step.
        let to16 = |t: &Tensor| Tensor::from_f32(DType::F16, t.shape().clone(), t.to_f32()).unwrap();
        let (a16, b16, bias16) = (to16(&a), to16(&wave(&[4, 5], 1.0)), to16(&bias));
        let fused =
            eval_op(MatMulBias { transpose_b: true, gelu: true, residual: false }, &[&a16, &b16, &bias16]).unwrap();
        assert_eq!(fused.dtype(), DType::F16);
        let want = unfused(&a16, &b16, &bias16, true, true).to_f32();
        for (x, y) in fused.to_f32().iter().zip(&want) {
            assert!((x - y).abs() <= 2e-3 * y.abs().max(1.0), "{x} vs {y}");
        }
    }

    #[test]
    fn bias_must_match_the_output_columns() {
        let mut g = Graph::new("t");
        let a = g.input("a", TensorType::new(DType::F32, [3, 4])).unwrap();
        let w = g.param("w", TensorType::new(DType::F32, [2, 4])).unwrap();
        let b3 = g.param("b3", TensorType::new(DType::F32, [3])).unwrap();
        let b2 = g.param("b2", TensorType::new(DType::F32, [2])).unwrap();
        let op = |transpose_b| MatMulBias { transpose_b, gelu: true, residual: false };
        let err = g.push(op(true), &[a, w, b3]).unwrap_err();
        assert_eq!(err.to_string(), "matmul_bias: bias must be a float [2], got f32[3]");
        let err = g.push(op(false), &[a, w, b2]).unwrap_err();
        assert_eq!(err.to_string(), "matmul_bias: inner dimensions differ: f32[3,4] x f32[2,4] (4 vs 2)");
        let y = g.push(op(true), &[a, w, b2]).unwrap();
        assert_eq!(g.ty(y), &TensorType::new(DType::F32, [3, 2]));
    }

    #[test]
    fn the_residual_is_added_after_the_activation() {
        let a = wave(&[3, 5], 0.3);
        let b = wave(&[4, 5], 1.0);
        let bias = wave(&[4], 2.0);
        let r = wave(&[3, 4], 4.0);
        let add = |x: &Tensor, y: &Tensor| eval_op(Binary { kind: BinaryKind::Add }, &[x, y]).unwrap();
        for gelu in [false, true] {
            let fused = eval_op(MatMulBias { transpose_b: true, gelu, residual: true }, &[&a, &b, &bias, &r]).unwrap();
            // The residual stream's add as Whisper writes it: x + layer(x).
            let want = add(&r, &unfused(&a, &b, &bias, true, gelu));
            assert_eq!(fused.to_f32(), want.to_f32(), "gelu={gelu}");
        }
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [3, 5])).unwrap();
        let w = g.param("w", TensorType::new(DType::F32, [4, 5])).unwrap();
        let bias = g.param("b", TensorType::new(DType::F32, [4])).unwrap();
        let short = g.input("r", TensorType::new(DType::F32, [3, 3])).unwrap();
        let op = MatMulBias { transpose_b: true, gelu: false, residual: true };
        let err = g.push(op.clone(), &[x, w, bias, short]).unwrap_err();
        assert_eq!(err.to_string(), "matmul_bias: the residual must be a float [3,4], got f32[3,3]");
        let err = g.push(op, &[x, w, bias]).unwrap_err();
        assert_eq!(err.to_string(), "matmul_bias: takes 4 inputs, got 3");
    }
}
