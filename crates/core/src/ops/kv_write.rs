//! KV-cache write: copies `value` into a persistent buffer at a runtime-scalar offset along
//! one axis and yields the updated buffer (no new storage: it *is* the buffer).
//!
//! Inputs: the buffer (a `State` or an earlier write to it) and `value`, whose shape equals
//! the buffer's except along `axis`. Writing past the end is a run-time error.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{ScalarId, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct KvWrite {
    pub axis: usize,
    /// The runtime scalar holding the offset along `axis`.
    pub offset: ScalarId,
}

impl OpKind for KvWrite {
    fn name(&self) -> &'static str {
        "kv_write"
    }
    fn attrs(&self) -> String {
        format!("axis={} offset=#{}", self.axis, self.offset.0)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("kv_write", inputs.len(), 2)?;
        let (buf, value) = (inputs[0], inputs[1]);
        let fits = buf.dtype == value.dtype
            && self.axis < buf.shape.rank()
            && value.shape.rank() == buf.shape.rank()
            && value
                .shape
                .dims()
                .iter()
                .zip(buf.shape.dims())
                .enumerate()
                .all(|(i, (v, b))| if i == self.axis { v <= b } else { v == b });
        if !fits {
            return Err(Error::shape("kv_write", format!("cannot write {value} into {buf} along axis {}", self.axis)));
        }
        Ok(buf.clone())
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("kv_write", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Alias
    }
}
