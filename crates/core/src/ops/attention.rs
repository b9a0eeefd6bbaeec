//! Fused scaled dot-product attention: `softmax(q k^T * scale + mask) v`, emitted by the
//! attention fusion pass. Inputs `q [..., Sq, D]`, `k [..., Sk, D]`, `v [..., Sk, Dv]` with
//! the same leading dims, and for [`MaskKind::Additive`] a float mask that broadcasts to
//! `[..., Sq, Sk]`. Output `[..., Sq, Dv]` with `q`'s dtype. Softmax in f32.

use super::cpu_kernels::{Mat, gemm, par_chunks};
use super::gather::infer_values;
use super::{EvalCtx, Memory, OpKind};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType, broadcast_offset};
use crate::tensor::Tensor;

/// How scores are masked before the softmax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskKind {
    None,
    /// A fourth input added to the scores.
    Additive,
    /// Query `i` sees keys `j <= i + (Sk - Sq)` (aligned to the end, as when decoding
    /// behind a cache); no mask input.
    Causal,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub scale: f32,
    pub mask: MaskKind,
}

impl OpKind for Attention {
    fn name(&self) -> &'static str {
        "attention"
    }
    fn attrs(&self) -> String {
        let mask = match self.mask {
            MaskKind::None => "",
            MaskKind::Additive => " mask=additive",
            MaskKind::Causal => " mask=causal",
        };
        format!("scale={}{mask}", self.scale)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        let want = if self.mask == MaskKind::Additive { 4 } else { 3 };
        super::expect_arity("attention", inputs.len(), want)?;
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        let r = q.shape.rank();
        let ok = r >= 2
            && [q, k, v].iter().all(|t| t.dtype.is_float() && t.shape.rank() == r)
            && q.shape.dims()[..r - 2] == k.shape.dims()[..r - 2]
            && k.shape.dims()[..r - 2] == v.shape.dims()[..r - 2]
            && q.shape.dims()[r - 1] == k.shape.dims()[r - 1]
            && k.shape.dims()[r - 2] == v.shape.dims()[r - 2]
            && k.shape.dims()[r - 2] > 0;
        if !ok {
            return Err(Error::shape(
                "attention",
                format!("needs q [..,Sq,D], k [..,Sk,D], v [..,Sk,Dv], got {q}, {k}, {v}"),
            ));
        }
        let (sq, sk) = (q.shape.dims()[r - 2], k.shape.dims()[r - 2]);
        if self.mask == MaskKind::Causal && sq > sk {
            return Err(Error::shape("attention", format!("a causal mask needs Sq <= Sk, got {sq} > {sk}")));
        }
        let mut scores = q.shape.dims()[..r - 2].to_vec();
        scores.extend([sq, sk]);
        if let Some(m) = inputs.get(3)
            && (!m.dtype.is_float() || !m.shape.broadcasts_to(&Shape(scores.clone())))
        {
            return Err(Error::shape(
                "attention",
                format!("mask {m} does not broadcast to the scores {}", Shape(scores)),
            ));
        }
        let mut dims = q.shape.dims()[..r - 1].to_vec();
        dims.push(v.shape.dims()[r - 1]);
        Ok(TensorType::new(q.dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        let r = q.shape().rank();
        let (sq, d) = (q.shape().dims()[r - 2], q.shape().dims()[r - 1]);
        let (sk, dv) = (k.shape().dims()[r - 2], v.shape().dims()[r - 1]);
        let mut scores = q.shape().dims()[..r - 2].to_vec();
        scores.extend([sq, sk]);
        let scores = Shape(scores);
        let batch = q.shape().dims()[..r - 2].iter().product::<usize>();
        let mask = inputs.get(3).map(|m| (m.to_f32_cow(), m.shape().broadcast_strides(&scores)));
        let (qv, kv, vv) = (q.to_f32_cow(), k.to_f32_cow(), v.to_f32_cow());
        let mut values = vec![0.0f32; out.numel()];
        // Blocks of up to QUERY_BLOCK query rows of one batch item, spread over threads: scores
        // = q k^T as a matrix product, each row softmaxed, then scores x v.
        let rows = batch * sq;
        par_chunks(&mut values, dv, rows * sk * (d + dv), |first, out_rows| {
            let mut block = vec![0.0f32; QUERY_BLOCK.min(sq) * sk];
            let mut done = 0;
            while done < out_rows.len() / dv.max(1) {
                let (b, i) = ((first + done) / sq, (first + done) % sq);
                let n = QUERY_BLOCK.min(sq - i).min(out_rows.len() / dv - done);
                let s = &mut block[..n * sk];
                let keys = Mat::transposed(&kv[b * sk * d..], d, sk);
                gemm(Mat::row_major(&qv[(b * sq + i) * d..], n, d), keys, s);
                for (qi, row) in s.chunks_mut(sk).enumerate() {
                    let i = i + qi;
                    row.iter_mut().for_each(|score| *score *= self.scale);
                    if let Some((m, strides)) = &mask {
                        // The mask's offset of this row's first score, and its stride along keys.
                        let start = broadcast_offset((b * sq + i) * sk, scores.dims(), strides);
                        row.iter_mut().enumerate().for_each(|(j, score)| *score += m[start + j * strides[r - 1]]);
                    }
                    // Query `i` sees keys up to `i + (Sk - Sq)`; `infer` guarantees Sq <= Sk.
                    if self.mask == MaskKind::Causal {
                        row[i + (sk - sq) + 1..].fill(f32::NEG_INFINITY);
                    }
                    // Stable softmax: exponents of (score - row max) are at most 1. A row whose
                    // scores are all -inf has no max to subtract and gives NaN, as in PyTorch.
                    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0.0f32;
                    for score in row.iter_mut() {
                        *score = (*score - max).exp();
                        sum += *score;
                    }
                    row.iter_mut().for_each(|w| *w /= sum);
                }
                let weights = Mat::row_major(s, n, sk);
                gemm(weights, Mat::row_major(&vv[b * sk * dv..], sk, dv), &mut out_rows[done * dv..(done + n) * dv]);
                done += n;
            }
        });
        Tensor::from_f32(out.dtype, out.shape, values)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

/// Query rows whose scores the CPU reference holds at once (per thread): enough rows for an
/// efficient matrix product, few enough that the scores stay in cache.
const QUERY_BLOCK: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Graph, NodeId};
    use crate::ops::testing::eval_op;

    /// Deterministic values in [-1, 1] that differ from element to element.
    fn wave(shape: &[usize], seed: f32) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::f32(shape, (0..n).map(|i| (i as f32 * 0.61 + seed).sin()).collect()).unwrap()
    }

    /// The unfused computation on `batch` flattened heads, step by step with plain loops:
    /// scores = q k^T, times `scale`, plus `mask(b, i, j)`, softmax per row, then times v.
    fn unfused(
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        scale: f32,
        mask: impl Fn(usize, usize, usize) -> f32,
        batch: usize,
        (sq, sk, d, dv): (usize, usize, usize, usize),
    ) -> Vec<f32> {
        let (q, k, v) = (q.to_f32(), k.to_f32(), v.to_f32());
        let mut out = vec![0.0f32; batch * sq * dv];
        for b in 0..batch {
            let mut scores = vec![vec![0.0f32; sk]; sq];
            for (i, row) in scores.iter_mut().enumerate() {
                for (j, s) in row.iter_mut().enumerate() {
                    let dot: f32 = (0..d).map(|p| q[(b * sq + i) * d + p] * k[(b * sk + j) * d + p]).sum();
                    *s = dot * scale + mask(b, i, j);
                }
            }
            for row in &mut scores {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let total: f32 = row.iter().map(|s| (s - max).exp()).sum();
                for s in row.iter_mut() {
                    *s = (*s - max).exp() / total;
                }
            }
            for i in 0..sq {
                for c in 0..dv {
                    out[(b * sq + i) * dv + c] = (0..sk).map(|j| scores[i][j] * v[(b * sk + j) * dv + c]).sum();
                }
            }
        }
        out
    }

    fn close(got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len());
        for (i, (x, y)) in got.iter().zip(want).enumerate() {
            assert!((x - y).abs() <= tol * y.abs().max(1.0), "element {i}: {x} vs {y}");
        }
    }

    #[test]
    fn by_hand() {
        // One query (1) over keys [0, ln 3]: softmax([0, ln 3]) = [1/4, 3/4], so with v = [1, 5]
        // the output is 1/4 + 15/4 = 4.
        let q = Tensor::f32([1, 1], vec![1.0]).unwrap();
        let k = Tensor::f32([2, 1], vec![0.0, 3f32.ln()]).unwrap();
        let v = Tensor::f32([2, 1], vec![1.0, 5.0]).unwrap();
        let y = eval_op(Attention { scale: 1.0, mask: MaskKind::None }, &[&q, &k, &v]).unwrap();
        close(&y.to_f32(), &[4.0], 1e-6);

        // Causal with Sq = Sk = 2 and both queries 1: query 0 sees only key 0 (output 1),
        // query 1 sees both (output 4).
        let q = Tensor::f32([2, 1], vec![1.0, 1.0]).unwrap();
        let y = eval_op(Attention { scale: 1.0, mask: MaskKind::Causal }, &[&q, &k, &v]).unwrap();
        close(&y.to_f32(), &[1.0, 4.0], 1e-6);

        // An additive mask of [0, -inf] hides key 1 entirely.
        let m = Tensor::f32([1, 2], vec![0.0, f32::NEG_INFINITY]).unwrap();
        let y = eval_op(Attention { scale: 1.0, mask: MaskKind::Additive }, &[&q, &k, &v, &m]).unwrap();
        close(&y.to_f32(), &[1.0, 1.0], 1e-6);
    }

    #[test]
    fn no_mask_matches_the_unfused_steps() {
        // Batch dims [2,3], Sq = 3, Sk = 5, D = 4, Dv = 2.
        let (q, k, v) = (wave(&[2, 3, 3, 4], 0.0), wave(&[2, 3, 5, 4], 1.0), wave(&[2, 3, 5, 2], 2.0));
        let y = eval_op(Attention { scale: 0.5, mask: MaskKind::None }, &[&q, &k, &v]).unwrap();
        assert_eq!(y.shape().dims(), [2, 3, 3, 2]);
        close(&y.to_f32(), &unfused(&q, &k, &v, 0.5, |_, _, _| 0.0, 6, (3, 5, 4, 2)), 1e-6);
    }

    #[test]
    fn additive_masks_broadcast() {
        // q [2 batch, 2 heads, Sq=3, D=4]; keys Sk = 5.
        let (q, k, v) = (wave(&[2, 2, 3, 4], 0.3), wave(&[2, 2, 5, 4], 1.3), wave(&[2, 2, 5, 3], 2.3));
        let op = Attention { scale: 0.7, mask: MaskKind::Additive };
        let dims = (3, 5, 4, 3);

        // A [Sq, Sk] mask shared by every batch and head.
        let m = wave(&[3, 5], 4.0);
        let mv = m.to_f32();
        let y = eval_op(op.clone(), &[&q, &k, &v, &m]).unwrap();
        close(&y.to_f32(), &unfused(&q, &k, &v, 0.7, |_, i, j| mv[i * 5 + j], 4, dims), 1e-6);

        // A key-padding mask [batch, 1, 1, Sk]: batch 0 hides its last two keys, batch 1 none.
        let mut pad = vec![0.0; 10];
        pad[3] = -1e9;
        pad[4] = -1e9;
        let m = Tensor::f32([2, 1, 1, 5], pad.clone()).unwrap();
        let y = eval_op(op, &[&q, &k, &v, &m]).unwrap();
        // Flattened head b belongs to batch b / 2.
        close(&y.to_f32(), &unfused(&q, &k, &v, 0.7, |b, _, j| pad[(b / 2) * 5 + j], 4, dims), 1e-6);
    }

    #[test]
    fn query_blocks_and_thread_splits_match_the_unfused_steps() {
        // Sq past two blocks of QUERY_BLOCK and no multiple of it, odd head sizes, and enough
        // work to be split across threads mid-batch.
        let (b, sq, sk, d, dv) = (3, 2 * QUERY_BLOCK + 21, 2 * QUERY_BLOCK + 22, 17, 9);
        let (q, k, v) = (wave(&[b, sq, d], 0.1), wave(&[b, sk, d], 1.1), wave(&[b, sk, dv], 2.1));
        let y = eval_op(Attention { scale: 0.3, mask: MaskKind::Causal }, &[&q, &k, &v]).unwrap();
        let hide = |_, i: usize, j: usize| if j > i + (sk - sq) { f32::NEG_INFINITY } else { 0.0 };
        close(&y.to_f32(), &unfused(&q, &k, &v, 0.3, hide, b, (sq, sk, d, dv)), 1e-5);
        let m = wave(&[sq, sk], 3.0);
        let mv = m.to_f32();
        let y = eval_op(Attention { scale: 0.3, mask: MaskKind::Additive }, &[&q, &k, &v, &m]).unwrap();
        close(&y.to_f32(), &unfused(&q, &k, &v, 0.3, |_, i, j| mv[i * sk + j], b, (sq, sk, d, dv)), 1e-5);
    }

    #[test]
    fn causal_with_fewer_queries_than_keys() {
        // Sq = 2 queries at the end of Sk = 5 keys: query i sees keys j <= i + 3.
        let (q, k, v) = (wave(&[3, 2, 4], 0.5), wave(&[3, 5, 4], 1.5), wave(&[3, 5, 2], 2.5));
        let y = eval_op(Attention { scale: 0.5, mask: MaskKind::Causal }, &[&q, &k, &v]).unwrap();
        let hide = |_, i: usize, j: usize| if j > i + 3 { f32::NEG_INFINITY } else { 0.0 };
        close(&y.to_f32(), &unfused(&q, &k, &v, 0.5, hide, 3, (2, 5, 4, 2)), 1e-6);
        // The last query sees every key, so it matches an unmasked run.
        let open = eval_op(Attention { scale: 0.5, mask: MaskKind::None }, &[&q, &k, &v]).unwrap().to_f32();
        let got = y.to_f32();
        for b in 0..3 {
            assert_eq!(got[(b * 2 + 1) * 2..(b * 2 + 2) * 2], open[(b * 2 + 1) * 2..(b * 2 + 2) * 2]);
            assert_ne!(got[b * 4..b * 4 + 2], open[b * 4..b * 4 + 2]);
        }
    }

    #[test]
    fn f16_inputs_compute_in_f32_and_round_once() {
        let to16 = |t: Tensor| Tensor::from_f32(DType::F16, t.shape().clone(), t.to_f32()).unwrap();
        let (q, k, v) = (to16(wave(&[2, 3, 4], 0.0)), to16(wave(&[2, 4, 4], 1.0)), to16(wave(&[2, 4, 2], 2.0)));
        let y = eval_op(Attention { scale: 0.5, mask: MaskKind::Causal }, &[&q, &k, &v]).unwrap();
        assert_eq!(y.dtype(), DType::F16);
        let hide = |_, i: usize, j: usize| if j > i + 1 { f32::NEG_INFINITY } else { 0.0 };
        let want: Vec<f32> = unfused(&q, &k, &v, 0.5, hide, 2, (3, 4, 4, 2))
            .into_iter()
            .map(|x| half::f16::from_f32(x).to_f32())
            .collect();
        // Identical up to f32 summation order, which can flip a rounding by one f16 step.
        close(&y.to_f32(), &want, 1e-3);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let mut g = Graph::new("t");
        let mut input = |name: &str, dims: &[usize]| g.input(name, TensorType::new(DType::F32, dims)).unwrap();
        let (q, k, v, m, long_q) = (
            input("q", &[2, 3, 4]),
            input("k", &[2, 5, 4]),
            input("v", &[2, 5, 2]),
            input("m", &[4, 5]),
            input("lq", &[2, 6, 4]),
        );
        let err = |g: &mut Graph, op: Attention, inputs: &[NodeId]| g.push(op, inputs).unwrap_err().to_string();
        let causal = Attention { scale: 1.0, mask: MaskKind::Causal };
        let additive = Attention { scale: 1.0, mask: MaskKind::Additive };
        assert_eq!(err(&mut g, causal, &[long_q, k, v]), "attention: a causal mask needs Sq <= Sk, got 6 > 5");
        assert_eq!(
            err(&mut g, additive.clone(), &[q, k, v, m]),
            "attention: mask f32[4,5] does not broadcast to the scores [2,3,5]"
        );
        assert_eq!(err(&mut g, additive, &[q, k, v]), "attention: takes 4 inputs, got 3");
        assert_eq!(
            err(&mut g, Attention { scale: 1.0, mask: MaskKind::None }, &[q, v, k]),
            "attention: needs q [..,Sq,D], k [..,Sk,D], v [..,Sk,Dv], got f32[2,3,4], f32[2,5,2], f32[2,5,4]"
        );
    }
}
