//! KV-cache write: copies `value` into a persistent buffer at a runtime-scalar offset along
//! one axis and yields the updated buffer (no new storage: it *is* the buffer).
//!
//! Inputs: the buffer (a `State` or an earlier write to it) and `value`, whose shape equals
//! the buffer's except along `axis`. Writing past the end is a run-time error. Without an
//! offset scalar the value goes to the start of the buffer: how one graph fills a buffer
//! that another graph of the same program reads (e.g. cross-attention keys per window).

use super::gather::{infer_values, take};
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, ScalarId, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct KvWrite {
    pub axis: usize,
    /// The runtime scalar holding the offset along `axis`; `None` writes at offset 0.
    pub offset: Option<ScalarId>,
}

impl OpKind for KvWrite {
    fn name(&self) -> &'static str {
        "kv_write"
    }
    fn attrs(&self) -> String {
        match self.offset {
            Some(s) => format!("axis={} offset=#{}", self.axis, s.0),
            None => format!("axis={}", self.axis),
        }
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
    fn eval(&self, inputs: &[&Tensor], ctx: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        let (buf, value) = (inputs[0], inputs[1]);
        let offset = match self.offset {
            Some(s) => {
                let missing = || Error::runtime("kv_write", format!("runtime scalar #{} has no value", s.0));
                ctx.scalars.get(s.index()).copied().ok_or_else(missing)? as usize
            }
            None => 0,
        };
        let dims = buf.shape().dims();
        let (cap, len) = (dims[self.axis], value.shape().dims()[self.axis]);
        // `infer` made len <= cap, so this cannot overflow (usize is 32 bits on wasm).
        if offset > cap - len {
            return Err(Error::runtime(
                "kv_write",
                format!("offset {offset} + length {len} exceeds capacity {cap} along axis {}", self.axis),
            ));
        }
        // Both tensors are [outer, size, inner] around the axis. `take` indexes the buffer's
        // data followed by the value's, so rows offset..offset+len come from the value.
        let outer = dims[..self.axis].iter().product::<usize>();
        let inner = dims[self.axis + 1..].iter().product::<usize>();
        let mut index = Vec::with_capacity(out.numel());
        for o in 0..outer {
            for j in 0..cap {
                let row = if (offset..offset + len).contains(&j) {
                    buf.numel() + (o * len + j - offset) * inner
                } else {
                    (o * cap + j) * inner
                };
                index.extend(row..row + inner);
            }
        }
        Tensor::new(out.shape, take("kv_write", inputs, &index)?)
    }
    fn memory(&self) -> Memory {
        Memory::Alias
    }
}

impl Graph {
    /// Writes `value` into the persistent buffer `buf` (a `State` or an earlier write to it)
    /// at the runtime scalar `offset` along `axis`, and returns the updated buffer: how a
    /// decoder step appends its keys and values to the KV cache without recompiling.
    pub fn kv_write(&mut self, buf: NodeId, value: NodeId, axis: usize, offset: ScalarId) -> Result<NodeId> {
        self.push(KvWrite { axis, offset: Some(offset) }, &[buf, value])
    }

    /// Overwrites the persistent buffer `buf` with `value` of the same type, and returns the
    /// updated buffer: one graph of a program fills what later runs of another graph read.
    pub fn write_state(&mut self, buf: NodeId, value: NodeId) -> Result<NodeId> {
        if self.ty(buf) != self.ty(value) {
            return Err(Error::shape("write_state", format!("cannot write {} into {}", self.ty(value), self.ty(buf))));
        }
        self.push(KvWrite { axis: 0, offset: None }, &[buf, value])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::ir::{DType, evaluate};
    use crate::ops::testing::eval_op_with_scalars;

    fn write(axis: usize, buf: &Tensor, value: &Tensor, offset: u32) -> Result<Tensor> {
        eval_op_with_scalars(KvWrite { axis, offset: Some(ScalarId(0)) }, &[buf, value], &[offset])
    }

    #[test]
    fn writes_at_the_offset_along_the_axis() {
        // Buffer [2,4] of zeros; value [[1,2],[3,4]] at columns 1..3 -> [[0,1,2,0],[0,3,4,0]].
        let buf = Tensor::i32([2, 4], vec![0; 8]).unwrap();
        let value = Tensor::i32([2, 2], vec![1, 2, 3, 4]).unwrap();
        assert_eq!(write(1, &buf, &value, 1).unwrap().as_i32().unwrap(), [0, 1, 2, 0, 0, 3, 4, 0]);
        // At the very end: columns 2..4.
        assert_eq!(write(1, &buf, &value, 2).unwrap().as_i32().unwrap(), [0, 0, 1, 2, 0, 0, 3, 4]);

        // Along axis 0 of [3,2] holding 10..16: row 2 replaced by [u32::MAX, 7], the rest kept.
        let buf = Tensor::u32([3, 2], (10..16).collect()).unwrap();
        let value = Tensor::u32([1, 2], vec![u32::MAX, 7]).unwrap();
        assert_eq!(write(0, &buf, &value, 2).unwrap().as_u32().unwrap(), [10, 11, 12, 13, u32::MAX, 7]);

        // The middle axis of [2,3,2] holding 0..12 (a [heads, positions, dim] cache): position 1
        // of head 0 becomes [-1,-2] and of head 1 [-3,-4].
        let buf = Tensor::i32([2, 3, 2], (0..12).collect()).unwrap();
        let value = Tensor::i32([2, 1, 2], vec![-1, -2, -3, -4]).unwrap();
        let y = write(1, &buf, &value, 1).unwrap();
        assert_eq!(y.as_i32().unwrap(), [0, 1, -1, -2, 4, 5, 6, 7, -3, -4, 10, 11]);
    }

    #[test]
    fn writing_past_the_end_is_a_run_time_error() {
        let buf = Tensor::f32([2, 4], vec![0.0; 8]).unwrap();
        let value = Tensor::f32([2, 2], vec![1.0; 4]).unwrap();
        let err = write(1, &buf, &value, 3).unwrap_err();
        assert_eq!(err.to_string(), "kv_write failed at run time: offset 3 + length 2 exceeds capacity 4 along axis 1");
        let err =
            eval_op_with_scalars(KvWrite { axis: 1, offset: Some(ScalarId(0)) }, &[&buf, &value], &[]).unwrap_err();
        assert_eq!(err.to_string(), "kv_write failed at run time: runtime scalar #0 has no value");
    }

    #[test]
    fn mismatched_value_is_a_shape_error() {
        let mut g = Graph::new("t");
        let cache = g.state("k", TensorType::new(DType::F32, [2, 4])).unwrap();
        let wide = g.input("wide", TensorType::new(DType::F32, [2, 5])).unwrap();
        let half = g.input("half", TensorType::new(DType::F16, [2, 1])).unwrap();
        let pos = g.scalar("pos");
        let err = |r: Result<NodeId>| r.unwrap_err().to_string();
        assert_eq!(err(g.kv_write(cache, wide, 1, pos)), "kv_write: cannot write f32[2,5] into f32[2,4] along axis 1");
        assert_eq!(err(g.kv_write(cache, half, 1, pos)), "kv_write: cannot write f16[2,1] into f32[2,4] along axis 1");
        assert_eq!(err(g.kv_write(cache, wide, 2, pos)), "kv_write: cannot write f32[2,5] into f32[2,4] along axis 2");
    }

    #[test]
    fn decode_steps_fill_a_state_in_a_graph() {
        // One step graph appends a [1,2] row at runtime position `pos` of a [3,2] cache.
        let mut g = Graph::new("step");
        let cache = g.state("cache", TensorType::new(DType::F32, [3, 2])).unwrap();
        let x = g.input("x", TensorType::new(DType::F32, [1, 2])).unwrap();
        let pos = g.scalar("pos");
        let w = g.kv_write(cache, x, 0, pos).unwrap();
        g.output("cache", w).unwrap();

        let mut states = HashMap::new();
        for (step, row) in [[1.0, 2.0], [3.0, 4.0]].into_iter().enumerate() {
            let inputs = HashMap::from([("x".to_string(), Tensor::f32([1, 2], row.to_vec()).unwrap())]);
            let scalars = HashMap::from([("pos".to_string(), step as u32)]);
            states = evaluate(&g, &inputs, &HashMap::new(), &states, &scalars).unwrap().states;
        }
        assert_eq!(states["cache"].to_f32(), vec![1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);
    }
}
