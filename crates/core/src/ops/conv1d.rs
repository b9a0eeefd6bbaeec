//! 1-D convolution (cross-correlation, as in PyTorch) with stride, zero padding, dilation
//! and an optional bias. Inputs: `x [C_in, L]` or `[N, C_in, L]`, `w [C_out, C_in, K]`,
//! optionally `bias [C_out]`. Accumulates in f32; the output has `x`'s dtype.

use super::{EvalCtx, Memory, OpKind};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Conv1d {
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
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
        if !x.dtype.is_float() || !w.dtype.is_float() || !(2..=3).contains(&x.shape.rank()) || w.shape.rank() != 3 {
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
        if let Some(b) = inputs.get(2) {
            if !b.dtype.is_float() || b.shape.dims() != [c_out] {
                return Err(Error::shape("conv1d", format!("bias must be a float [{c_out}], got {b}")));
            }
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
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("conv1d", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
