//! Fused scaled dot-product attention: `softmax(q k^T * scale + mask) v`, emitted by the
//! attention fusion pass. Inputs `q [..., Sq, D]`, `k [..., Sk, D]`, `v [..., Sk, Dv]` with
//! the same leading dims, and for [`MaskKind::Additive`] a float mask that broadcasts to
//! `[..., Sq, Sk]`. Output `[..., Sq, Dv]` with `q`'s dtype. Softmax in f32.

use super::{EvalCtx, Memory, OpKind};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
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
        if let Some(m) = inputs.get(3) {
            if !m.dtype.is_float() || !m.shape.broadcasts_to(&Shape(scores.clone())) {
                return Err(Error::shape(
                    "attention",
                    format!("mask {m} does not broadcast to the scores {}", Shape(scores)),
                ));
            }
        }
        let mut dims = q.shape.dims()[..r - 1].to_vec();
        dims.push(v.shape.dims()[r - 1]);
        Ok(TensorType::new(q.dtype, Shape(dims)))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("attention", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
