//! Batched matrix multiply: `a [..., M, K] x b [..., K, N] -> [..., M, N]`, or with
//! `transpose_b`, `b [..., N, K]` (weights stored `[out, in]`). Batch dimensions broadcast
//! numpy-style, so a 2-D weight serves every batch. Accumulates in f32; the output has `a`'s
//! dtype, so f16 (or q8) weights can multiply f32 activations.

use super::cpu_kernels::{Mat, gemm, gemm_par, par_chunks};
use super::gather::infer_values;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType, broadcast_offset};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct MatMul {
    pub transpose_b: bool,
}

/// The output type of `a x b` (shared with the fused matmul + bias).
pub(crate) fn matmul_type(op: &str, a: &TensorType, b: &TensorType, transpose_b: bool) -> Result<TensorType> {
    if !a.dtype.is_float() || !b.dtype.is_weight_float() || a.shape.rank() < 2 || b.shape.rank() < 2 {
        return Err(Error::shape(op, format!("needs float operands of rank >= 2, got {a} and {b}")));
    }
    let (ra, rb) = (a.shape.rank(), b.shape.rank());
    let (m, k) = (a.shape.dims()[ra - 2], a.shape.dims()[ra - 1]);
    let (kb, n) = if transpose_b {
        (b.shape.dims()[rb - 1], b.shape.dims()[rb - 2])
    } else {
        (b.shape.dims()[rb - 2], b.shape.dims()[rb - 1])
    };
    if k != kb {
        return Err(Error::shape(
            op,
            format!("inner dimensions differ: {a} x {b}{} ({k} vs {kb})", if transpose_b { "^T" } else { "" }),
        ));
    }
    let batch = Shape::broadcast(&Shape::from(&a.shape.dims()[..ra - 2]), &Shape::from(&b.shape.dims()[..rb - 2]))
        .ok_or_else(|| Error::shape(op, format!("batch dimensions of {a} and {b} do not broadcast")))?;
    let mut dims = batch.0;
    dims.extend([m, n]);
    Ok(TensorType::new(a.dtype, Shape(dims)))
}

/// `a x b` (or `a x b^T`) in f32, row-major with shape `out`, which [`matmul_type`] derived
/// from these operands. Shared with the fused matmul + bias.
///
/// When `b` has a single batch (a weight), `a`'s batches are consecutive rows of one taller
/// matrix and the whole product is one matrix product; otherwise each batch is its own,
/// with batches spread over threads.
pub(crate) fn matmul_f32(a: &Tensor, b: &Tensor, transpose_b: bool, out: &Shape) -> Vec<f32> {
    let r = out.rank();
    let (m, n, k) = (out.dims()[r - 2], out.dims()[r - 1], a.shape().last());
    let batch = Shape::from(&out.dims()[..r - 2]);
    let batch_strides = |t: &Tensor| Shape::from(&t.shape().dims()[..t.shape().rank() - 2]).broadcast_strides(&batch);
    let (a_strides, b_strides) = (batch_strides(a), batch_strides(b));
    let (av, bv) = (a.to_f32_cow(), b.to_f32_cow());
    let b_mat = |b0: usize| {
        let data = &bv[b0..];
        if transpose_b { Mat::transposed(data, k, n) } else { Mat::row_major(data, k, n) }
    };
    let mut values = vec![0.0f32; out.numel()];
    if b.shape().numel() == k * n {
        // `b` broadcasts to every batch, so the output's batches are exactly `a`'s, in order.
        gemm_par(Mat::row_major(&av, batch.numel() * m, k), b_mat(0), &mut values);
    } else {
        par_chunks(&mut values, m * n, out.numel() * k, |first, chunk| {
            for (i, c) in chunk.chunks_mut(m * n).enumerate() {
                let bi = first + i;
                let a0 = broadcast_offset(bi, batch.dims(), &a_strides) * m * k;
                let b0 = broadcast_offset(bi, batch.dims(), &b_strides) * k * n;
                gemm(Mat::row_major(&av[a0..], m, k), b_mat(b0), c);
            }
        });
    }
    values
}

impl OpKind for MatMul {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn attrs(&self) -> String {
        if self.transpose_b { "transpose_b".into() } else { String::new() }
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("matmul", inputs.len(), 2)?;
        matmul_type("matmul", inputs[0], inputs[1], self.transpose_b)
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        let values = matmul_f32(inputs[0], inputs[1], self.transpose_b, &out.shape);
        Tensor::from_f32(out.dtype, out.shape, values)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// `a [..., M, K] x b [..., K, N] -> [..., M, N]`, batch dims broadcast numpy-style.
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(MatMul { transpose_b: false }, &[a, b])
    }

    /// `a [..., M, K] x b^T` with `b [..., N, K]`: a linear layer on weights stored
    /// `[out, in]`, as checkpoints keep them, with no transposed copy.
    pub fn matmul_t(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(MatMul { transpose_b: true }, &[a, b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::f32(shape, v.to_vec()).unwrap()
    }

    #[test]
    fn multiplies_by_hand() {
        // [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]]:
        // row 0: 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64; row 1: 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154.
        let a = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = f32s(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
        let y = eval_op(MatMul { transpose_b: false }, &[&a, &b]).unwrap();
        assert_eq!(y.shape().dims(), [2, 2]);
        assert_eq!(y.to_f32(), vec![58.0, 64.0, 139.0, 154.0]);

        // The same product with b stored transposed, [N, K] = [[7,9,11],[8,10,12]].
        let bt = f32s(&[2, 3], &[7.0, 9.0, 11.0, 8.0, 10.0, 12.0]);
        let y = eval_op(MatMul { transpose_b: true }, &[&a, &bt]).unwrap();
        assert_eq!(y.to_f32(), vec![58.0, 64.0, 139.0, 154.0]);
    }

    #[test]
    fn batch_dims_broadcast_both_ways() {
        // a [2,1,1,2]: a0 = [1,2], a1 = [3,4]. b [3,2,1]: columns b0 = [1,1], b1 = [1,0], b2 = [0,2].
        // Output [2,3,1,1]: a_i . b_j = [3, 1, 4] for a0 and [7, 3, 8] for a1.
        let a = f32s(&[2, 1, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
        let b = f32s(&[3, 2, 1], &[1.0, 1.0, 1.0, 0.0, 0.0, 2.0]);
        let y = eval_op(MatMul { transpose_b: false }, &[&a, &b]).unwrap();
        assert_eq!(y.shape().dims(), [2, 3, 1, 1]);
        assert_eq!(y.to_f32(), vec![3.0, 1.0, 4.0, 7.0, 3.0, 8.0]);

        // One 2-D weight [N=2, K=2] = [[1,0],[1,1]] (transposed) serves a batch of 2:
        // [1,2] -> [1, 3], [3,4] -> [3, 7].
        let a = f32s(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
        let w = f32s(&[2, 2], &[1.0, 0.0, 1.0, 1.0]);
        let y = eval_op(MatMul { transpose_b: true }, &[&a, &w]).unwrap();
        assert_eq!(y.shape().dims(), [2, 1, 2]);
        assert_eq!(y.to_f32(), vec![1.0, 3.0, 3.0, 7.0]);
    }

    #[test]
    fn f16_weights_give_the_activation_dtype() {
        // 0.1 is not exact in f16 (0.0999755859375); the product keeps that value in f32.
        let a = f32s(&[1, 2], &[2.0, 1.0]);
        let w = Tensor::from_f32(DType::F16, [2, 1], vec![0.1, 1.0]).unwrap();
        let y = eval_op(MatMul { transpose_b: false }, &[&a, &w]).unwrap();
        assert_eq!(y.dtype(), DType::F32);
        assert_eq!(y.to_f32(), vec![2.0 * 0.099_975_586 + 1.0]);

        let a16 = Tensor::from_f32(DType::F16, [1, 2], vec![2.0, 1.0]).unwrap();
        let y = eval_op(MatMul { transpose_b: false }, &[&a16, &w]).unwrap();
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.to_f32(), vec![half::f16::from_f32(2.0 * 0.099_975_586 + 1.0).to_f32()]);
    }

    /// Deterministic values in [-1, 1] that differ from element to element.
    fn wave(shape: &[usize], seed: f32) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::f32(shape, (0..n).map(|i| (i as f32 * 0.61 + seed).sin()).collect()).unwrap()
    }

    /// The plain triple loop over every batch, in f64, batch dims broadcast by hand.
    fn triple_loop(a: &Tensor, b: &Tensor, transpose_b: bool) -> Vec<f32> {
        let (ad, bd) = (a.shape().dims(), b.shape().dims());
        let (ra, rb) = (ad.len(), bd.len());
        let (m, k) = (ad[ra - 2], ad[ra - 1]);
        let n = if transpose_b { bd[rb - 2] } else { bd[rb - 1] };
        let out = matmul_type("matmul", &a.ty(), &b.ty(), transpose_b).unwrap().shape;
        let batch = &out.dims()[..out.rank() - 2];
        // Row-major index of batch `bi` in an operand's own batch dims (size-1 dims broadcast).
        let index = |dims: &[usize], mut bi: usize| {
            let (mut idx, mut stride) = (0, 1);
            for (o, &d) in batch.iter().rev().zip(dims.iter().rev().chain(std::iter::repeat(&1))) {
                if d != 1 {
                    idx += (bi % o) * stride;
                }
                stride *= d;
                bi /= o;
            }
            idx
        };
        let (av, bv) = (a.to_f32(), b.to_f32());
        let mut values = Vec::new();
        for bi in 0..batch.iter().product::<usize>() {
            let (a0, b0) = (index(&ad[..ra - 2], bi) * m * k, index(&bd[..rb - 2], bi) * k * n);
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0f64;
                    for p in 0..k {
                        let bij = if transpose_b { bv[b0 + j * k + p] } else { bv[b0 + p * n + j] };
                        acc += f64::from(av[a0 + i * k + p]) * f64::from(bij);
                    }
                    values.push(acc as f32);
                }
            }
        }
        values
    }

    #[test]
    fn fast_products_match_the_triple_loop() {
        // Odd sizes, none a multiple of a kernel block, single rows (decoder GEMVs), a shared
        // 2-D weight, batches broadcast both ways and an f16 weight.
        let cases: [(&[usize], &[usize], bool); 7] = [
            (&[1, 131], &[257, 131], true),
            (&[1, 131], &[131, 257], false),
            (&[3, 67, 45], &[29, 45], true),
            (&[71, 33], &[33, 90], false),
            (&[2, 1, 9, 19], &[3, 19, 13], false),
            (&[2, 1, 1, 19], &[3, 13, 19], true),
            (&[4, 130, 65], &[4, 65, 70], false),
        ];
        for (a_dims, b_dims, transpose_b) in cases {
            let (a, b) = (wave(a_dims, 0.2), wave(b_dims, 1.3));
            let k = a_dims[a_dims.len() - 1];
            let got = eval_op(MatMul { transpose_b }, &[&a, &b]).unwrap().to_f32();
            let want = triple_loop(&a, &b, transpose_b);
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-6 * k as f32, "{a_dims:?} x {b_dims:?}: element {i}: {g} vs {w}");
            }
        }
        let (a, w) =
            (wave(&[5, 40], 0.4), Tensor::from_f32(DType::F16, [23, 40], wave(&[23, 40], 2.0).to_f32()).unwrap());
        let got = eval_op(MatMul { transpose_b: true }, &[&a, &w]).unwrap().to_f32();
        for (g, want) in got.iter().zip(triple_loop(&a, &w, true)) {
            assert!((g - want).abs() <= 4e-5, "{g} vs {want}");
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let mut g = Graph::new("t");
        let mut input = |name: &str, dims: &[usize]| g.input(name, TensorType::new(DType::F32, dims)).unwrap();
        let (a, b, c, d, v) = (
            input("a", &[2, 3]),
            input("b", &[4, 2]),
            input("c", &[2, 2, 3]),
            input("d", &[3, 3, 2]),
            input("v", &[3]),
        );
        let err = |r: Result<NodeId>| r.unwrap_err().to_string();
        assert_eq!(err(g.matmul(a, b)), "matmul: inner dimensions differ: f32[2,3] x f32[4,2] (3 vs 4)");
        assert_eq!(err(g.matmul_t(a, b)), "matmul: inner dimensions differ: f32[2,3] x f32[4,2]^T (3 vs 2)");
        assert_eq!(err(g.matmul(c, d)), "matmul: batch dimensions of f32[2,2,3] and f32[3,3,2] do not broadcast");
        assert_eq!(err(g.matmul(v, d)), "matmul: needs float operands of rank >= 2, got f32[3] and f32[3,3,2]");
        let ids = g.input("ids", TensorType::new(DType::I32, [3, 2])).unwrap();
        assert_eq!(err(g.matmul(a, ids)), "matmul: needs float operands of rank >= 2, got f32[2,3] and i32[3,2]");
    }
}
