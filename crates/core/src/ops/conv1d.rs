//! 1-D convolution (cross-correlation, as in PyTorch) with stride, zero padding, dilation
//! and an optional bias. Inputs: `x [C_in, L]` or `[N, C_in, L]`, `w [C_out, C_in, K]`,
//! optionally `bias [C_out]`. Accumulates in f32; the output has `x`'s dtype.

use super::cpu_kernels::{Mat, gemm_par};
use super::gather::infer_values;
use super::{EvalCtx, Memory, OpKind};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Conv1d {
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
}

impl Conv1d {
    /// Fills `windows` (`C_in*K` rows of `out_len`) for one batch item `x [C_in, len]`: row
    /// `ci*K + j` holds, for each output position `t`, the input tap `j` of channel `ci` reads
    /// there, zero where it falls in the padding.
    fn windows(&self, x: &[f32], len: usize, k: usize, out_len: usize, windows: &mut [f32]) {
        for (row, taps) in windows.chunks_mut(out_len.max(1)).enumerate() {
            let (ci, j) = (row / k, row % k);
            let channel = &x[ci * len..(ci + 1) * len];
            for (t, v) in taps.iter_mut().enumerate() {
                // Position in the unpadded input; the padding reads as zero.
                let pos = (t * self.stride + j * self.dilation).checked_sub(self.padding);
                *v = pos.and_then(|p| channel.get(p)).copied().unwrap_or(0.0);
            }
        }
    }
}

impl OpKind for Conv1d {
    fn name(&self) -> &'static str {
        "conv1d"
    }
    fn attrs(&self) -> String {
        format!("stride={} padding={} dilation={}", self.stride, self.padding, self.dilation)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        if !(2..=3).contains(&inputs.len()) {
            return Err(Error::shape("conv1d", format!("takes 2 or 3 inputs, got {}", inputs.len())));
        }
        let (x, w) = (inputs[0], inputs[1]);
        if !x.dtype.is_float()
            || !w.dtype.is_weight_float()
            || !(2..=3).contains(&x.shape.rank())
            || w.shape.rank() != 3
        {
            return Err(Error::shape(
                "conv1d",
                format!("needs float x [C_in, L] or [N, C_in, L] and w [C_out, C_in, K], got {x} and {w}"),
            ));
        }
        if self.stride == 0 || self.dilation == 0 {
            return Err(Error::shape("conv1d", "stride and dilation must be at least 1"));
        }
        let r = x.shape.rank();
        let (c_in, len) = (x.shape.dims()[r - 2], x.shape.dims()[r - 1]);
        let (c_out, wc_in, k) = (w.shape.dims()[0], w.shape.dims()[1], w.shape.dims()[2]);
        if c_in != wc_in {
            return Err(Error::shape("conv1d", format!("x has {c_in} channels but w expects {wc_in}: {x} and {w}")));
        }
        if let Some(b) = inputs.get(2)
            && (!b.dtype.is_float() || b.shape.dims() != [c_out])
        {
            return Err(Error::shape("conv1d", format!("bias must be a float [{c_out}], got {b}")));
        }
        let span = self.dilation * (k.max(1) - 1) + 1;
        let padded = len + 2 * self.padding;
        if k == 0 || padded < span {
            return Err(Error::shape(
                "conv1d",
                format!("kernel of span {span} does not fit input length {len} with padding {}", self.padding),
            ));
        }
        let out_len = (padded - span) / self.stride + 1;
        let mut dims = x.shape.dims()[..r - 2].to_vec();
        dims.extend([c_out, out_len]);
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        let (xs, ws) = (inputs[0].shape().dims(), inputs[1].shape().dims());
        let (c_in, len) = (xs[xs.len() - 2], xs[xs.len() - 1]);
        let (c_out, k) = (ws[0], ws[2]);
        let out_len = out.shape.last();
        let (x, w) = (inputs[0].to_f32_cow(), inputs[1].to_f32_cow());
        // The convolution as one matrix product per batch item: `w` is the `C_out x C_in*K`
        // matrix it is stored as, times the `C_in*K x out_len` matrix of input windows.
        let red = c_in * k;
        let w = Mat::row_major(&w, c_out, red);
        let mut windows = vec![0.0f32; red * out_len];
        let mut values = vec![0.0f32; out.numel()];
        for (n, y) in values.chunks_mut((c_out * out_len).max(1)).enumerate() {
            self.windows(&x[n * c_in * len..(n + 1) * c_in * len], len, k, out_len, &mut windows);
            gemm_par(w, Mat::row_major(&windows, red, out_len), y);
        }
        if let Some(bias) = inputs.get(2) {
            let bias = bias.to_f32_cow();
            for (y, b) in values.chunks_mut(out_len.max(1)).zip(bias.iter().cycle()) {
                y.iter_mut().for_each(|v| *v += b);
            }
        }
        Tensor::from_f32(out.dtype, out.shape, values)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// PyTorch's `conv1d`: `x [C_in, L]` or `[N, C_in, L]` with `w [C_out, C_in, K]` and an
    /// optional `bias [C_out]`, giving `[.., C_out, (L + 2 padding - dilation (K - 1) - 1) / stride + 1]`.
    /// Whisper's audio stem is two of these.
    pub fn conv1d(
        &mut self,
        x: NodeId,
        w: NodeId,
        bias: Option<NodeId>,
        stride: usize,
        padding: usize,
        dilation: usize,
    ) -> Result<NodeId> {
        let mut inputs = vec![x, w];
        inputs.extend(bias);
        self.push(Conv1d { stride, padding, dilation }, &inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn conv(stride: usize, padding: usize, dilation: usize, inputs: &[&Tensor]) -> Tensor {
        eval_op(Conv1d { stride, padding, dilation }, inputs).unwrap()
    }

    /// The plain loop over output channel, position, input channel and tap, in f64.
    fn direct(c: &Conv1d, x: &Tensor, w: &Tensor, bias: &Tensor, out_len: usize) -> Vec<f32> {
        let (xd, wd) = (x.shape().dims(), w.shape().dims());
        let (n, c_in, len, c_out, k) = (xd[0], xd[1], xd[2], wd[0], wd[2]);
        let (xv, wv, bv) = (x.to_f32(), w.to_f32(), bias.to_f32());
        let mut values = Vec::new();
        for b in 0..n {
            for co in 0..c_out {
                for t in 0..out_len {
                    let mut acc = f64::from(bv[co]);
                    for ci in 0..c_in {
                        for j in 0..k {
                            let p = (t * c.stride + j * c.dilation) as i64 - c.padding as i64;
                            if (0..len as i64).contains(&p) {
                                acc += f64::from(xv[(b * c_in + ci) * len + p as usize])
                                    * f64::from(wv[(co * c_in + ci) * k + j]);
                            }
                        }
                    }
                    values.push(acc as f32);
                }
            }
        }
        values
    }

    #[test]
    fn matrix_product_form_matches_the_direct_loop() {
        let wave = |dims: &[usize], seed: f32| {
            let n = dims.iter().product::<usize>();
            Tensor::f32(dims, (0..n).map(|i| (i as f32 * 0.53 + seed).sin()).collect()).unwrap()
        };
        // Whisper's stride-2 second conv, dilation with padding, and odd channel counts.
        for (c, (n, c_in, len, c_out, k)) in [
            (Conv1d { stride: 2, padding: 1, dilation: 1 }, (2, 13, 31, 17, 3)),
            (Conv1d { stride: 1, padding: 3, dilation: 2 }, (1, 5, 20, 70, 4)),
            (Conv1d { stride: 3, padding: 0, dilation: 1 }, (3, 1, 11, 2, 5)),
        ] {
            let (x, w, bias) = (wave(&[n, c_in, len], 0.1), wave(&[c_out, c_in, k], 0.9), wave(&[c_out], 2.0));
            let y = eval_op(c.clone(), &[&x, &w, &bias]).unwrap();
            let want = direct(&c, &x, &w, &bias, y.shape().last());
            for (i, (g, w)) in y.to_f32().iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-6 * (c_in * k) as f32 + 1e-6, "{c:?}: element {i}: {g} vs {w}");
            }
        }
    }

    #[test]
    fn stride_padding_and_dilation_by_hand() {
        // x = [1,2,3,4,5] padded by 1: [0,1,2,3,4,5,0]. w = [1,0,-1] dilated by 2 spans 5 taps
        // at 0,2,4; stride 2 gives (7 - 5) / 2 + 1 = 2 outputs:
        // t=0 reads padded[0,2,4] = [0,2,4] -> 0 - 4 = -4; t=1 reads padded[2,4,6] = [2,4,0] -> 2.
        let x = Tensor::f32([1, 5], vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let w = Tensor::f32([1, 1, 3], vec![1.0, 0.0, -1.0]).unwrap();
        let y = conv(2, 1, 2, &[&x, &w]);
        assert_eq!(y.shape().dims(), [1, 2]);
        assert_eq!(y.to_f32(), vec![-4.0, 2.0]);

        let bias = Tensor::f32([1], vec![0.5]).unwrap();
        assert_eq!(conv(2, 1, 2, &[&x, &w, &bias]).to_f32(), vec![-3.5, 2.5]);

        // Plain stride 1, padding 1, dilation 1 with w = [1,1,1]: running sums of three over
        // [0,1,2,3,4,5,0] = [3, 6, 9, 12, 9].
        let ones = Tensor::f32([1, 1, 3], vec![1.0; 3]).unwrap();
        assert_eq!(conv(1, 1, 1, &[&x, &ones]).to_f32(), vec![3.0, 6.0, 9.0, 12.0, 9.0]);
    }

    #[test]
    fn batched_multi_channel_by_hand() {
        // Batch 0: ch0 = [1,2,3], ch1 = [0,1,0]. Batch 1: ch0 = [1,1,1], ch1 = [2,2,2].
        // Filter 0 sums ch0 pairs ([1,1] on ch0, [0,0] on ch1); filter 1 is ch1[t] - ch1[t+1].
        // Batch 0: filter 0 -> [3, 5], filter 1 -> [-1, 1]. Batch 1: [2, 2] and [0, 0].
        let x = Tensor::f32([2, 2, 3], vec![1.0, 2.0, 3.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0]).unwrap();
        let w = Tensor::f32([2, 2, 2], vec![1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0]).unwrap();
        let y = conv(1, 0, 1, &[&x, &w]);
        assert_eq!(y.shape().dims(), [2, 2, 2]);
        assert_eq!(y.to_f32(), vec![3.0, 5.0, -1.0, 1.0, 2.0, 2.0, 0.0, 0.0]);

        // With a bias per output channel and f16 weights; the output keeps x's dtype.
        let w16 = Tensor::from_f32(DType::F16, [2, 2, 2], w.to_f32()).unwrap();
        let bias = Tensor::f32([2], vec![10.0, -10.0]).unwrap();
        let y = conv(1, 0, 1, &[&x, &w16, &bias]);
        assert_eq!(y.dtype(), DType::F32);
        assert_eq!(y.to_f32(), vec![13.0, 15.0, -11.0, -9.0, 12.0, 12.0, -10.0, -10.0]);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let mut g = Graph::new("t");
        let mut input = |name: &str, dims: &[usize]| g.input(name, TensorType::new(DType::F32, dims)).unwrap();
        let (x, w, short, wide, b) = (
            input("x", &[3, 10]),
            input("w", &[4, 2, 3]),
            input("s", &[1, 2]),
            input("k", &[1, 1, 5]),
            input("b", &[3]),
        );
        let err = |r: Result<NodeId>| r.unwrap_err().to_string();
        assert_eq!(
            err(g.conv1d(x, w, None, 1, 0, 1)),
            "conv1d: x has 3 channels but w expects 2: f32[3,10] and f32[4,2,3]"
        );
        assert_eq!(
            err(g.conv1d(short, wide, None, 1, 0, 1)),
            "conv1d: kernel of span 5 does not fit input length 2 with padding 0"
        );
        assert_eq!(err(g.conv1d(short, wide, Some(b), 1, 2, 1)), "conv1d: bias must be a float [1], got f32[3]");
        assert_eq!(err(g.conv1d(short, wide, None, 0, 2, 1)), "conv1d: stride and dilation must be at least 1");
        // With padding 2 the span fits: (2 + 4 - 5) / 1 + 1 = 2 outputs.
        let y = g.conv1d(short, wide, None, 1, 2, 1).unwrap();
        assert_eq!(g.ty(y).shape.dims(), [1, 2]);
    }
}
