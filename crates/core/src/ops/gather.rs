//! Gather rows of a table (embedding lookup): `table [V, D...]`, `ids [N...]` (i32 or u32)
//! -> `[N..., D...]`. An id outside `0..V` is a run-time error in the reference; a GPU kernel
//! cannot raise one, so GPU backends clamp such an id to the nearest row (`0` or `V - 1`).
//!
//! This file also holds `take`, the exact element copy that every data-movement op
//! (gather, permute, slice, concat, KV-cache write) reduces to in its reference.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{DType, Graph, NodeId, Shape, TensorType};
use crate::tensor::{Tensor, TensorData};

#[derive(Clone, Debug, PartialEq)]
pub struct Gather;

/// The type `op` infers from the values it is given. The references check their operands
/// this way, so a call with mistyped tensors is an error rather than an out-of-bounds panic.
pub(crate) fn infer_values(op: &impl OpKind, inputs: &[&Tensor]) -> Result<TensorType> {
    let tys: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    op.infer(&refs)
}

/// Element `i` of the result is element `index[i]` of the concatenation of the flat data of
/// `parts`, copied bit for bit in their common dtype (integers never pass through f32).
/// `op` names the caller in the error raised when the parts' dtypes differ or an index is
/// out of range.
pub(crate) fn take(op: &str, parts: &[&Tensor], index: &[usize]) -> Result<TensorData> {
    fn pick<T: Copy>(parts: &[&[T]], index: &[usize]) -> Option<Vec<T>> {
        let all = parts.concat();
        index.iter().map(|&i| all.get(i).copied()).collect()
    }
    macro_rules! pick_as {
        ($variant:ident) => {{
            let slices: Option<Vec<_>> = parts
                .iter()
                .map(|t| match t.data() {
                    TensorData::$variant(v) => Some(v.as_slice()),
                    _ => None,
                })
                .collect();
            let slices = slices.ok_or_else(|| Error::runtime(op, "inputs have different dtypes"))?;
            pick(&slices, index).map(TensorData::$variant)
        }};
    }
    let first = parts.first().ok_or_else(|| Error::runtime(op, "no input to copy from"))?;
    let data = match first.data() {
        TensorData::F32(_) => pick_as!(F32),
        TensorData::F16(_) => pick_as!(F16),
        TensorData::I32(_) => pick_as!(I32),
        TensorData::U32(_) => pick_as!(U32),
        TensorData::Q8(_) => return Err(Error::runtime(op, "q8 weights are not copied, only read by products")),
    };
    data.ok_or_else(|| Error::runtime(op, "an element index is out of range of the input data"))
}

/// Rows `rows` (each `row_len` elements) of the flat table `data`, copied bit for bit: only
/// the picked rows are touched, however large the table (a 51864-token embedding).
fn take_rows<T: Copy>(data: &[T], rows: &[usize], row_len: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows.len() * row_len);
    for &r in rows {
        out.extend_from_slice(&data[r * row_len..(r + 1) * row_len]);
    }
    out
}

impl OpKind for Gather {
    fn name(&self) -> &'static str {
        "gather"
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("gather", inputs.len(), 2)?;
        let (table, ids) = (inputs[0], inputs[1]);
        if table.shape.rank() == 0 || !ids.dtype.is_int() {
            return Err(Error::shape(
                "gather",
                format!("needs a table of rank >= 1 and integer ids, got {table} and {ids}"),
            ));
        }
        let mut dims = ids.shape.dims().to_vec();
        dims.extend_from_slice(&table.shape.dims()[1..]);
        // A q8 table's rows come out dequantized.
        let dtype = if table.dtype == DType::Q8 { DType::F32 } else { table.dtype };
        Ok(TensorType::new(dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        let (table, ids) = (inputs[0], inputs[1]);
        let rows = table.shape().dims()[0];
        let row_len = table.shape().dims()[1..].iter().product::<usize>();
        let picked = ids
            .to_i64()
            .into_iter()
            .map(|id| {
                usize::try_from(id).ok().filter(|&r| r < rows).ok_or_else(|| {
                    Error::runtime("gather", format!("id {id} is out of range for a table of {rows} rows"))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let data = match table.data() {
            TensorData::F32(v) => TensorData::F32(take_rows(v, &picked, row_len)),
            TensorData::F16(v) => TensorData::F16(take_rows(v, &picked, row_len)),
            TensorData::I32(v) => TensorData::I32(take_rows(v, &picked, row_len)),
            TensorData::U32(v) => TensorData::U32(take_rows(v, &picked, row_len)),
            TensorData::Q8(q) => {
                let mut values = Vec::with_capacity(picked.len() * row_len);
                for &r in &picked {
                    let row = q.rows(r, r + 1)?;
                    values.extend(row.to_f32());
                }
                TensorData::F32(values)
            }
        };
        Tensor::new(out.shape, data)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// Rows of `table [V, D...]` picked by integer `ids [N...]`, giving `[N..., D...]`:
    /// the token-embedding lookup. An id outside `0..V` fails when the graph runs.
    pub fn gather(&mut self, table: NodeId, ids: NodeId) -> Result<NodeId> {
        self.push(Gather, &[table, ids])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    #[test]
    fn picks_rows_by_id() {
        // Rows: 0 -> [0, 1], 1 -> [10, 11], 2 -> [20, 21]; ids [[2, 0], [1, 1]].
        let table = Tensor::f32([3, 2], vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0]).unwrap();
        let ids = Tensor::i32([2, 2], vec![2, 0, 1, 1]).unwrap();
        let y = eval_op(Gather, &[&table, &ids]).unwrap();
        assert_eq!(y.shape().dims(), [2, 2, 2]);
        assert_eq!(y.to_f32(), vec![20.0, 21.0, 0.0, 1.0, 10.0, 11.0, 10.0, 11.0]);
    }

    #[test]
    fn copies_integer_and_f16_tables_exactly() {
        // Values above 2^24 would not survive a trip through f32.
        let big = (1 << 24) + 1;
        let table = Tensor::i32([3], vec![-7, big, 5]).unwrap();
        let ids = Tensor::u32([4], vec![1, 1, 0, 2]).unwrap();
        let y = eval_op(Gather, &[&table, &ids]).unwrap();
        assert_eq!(y.as_i32().unwrap(), [big, big, -7, 5]);

        let table = Tensor::from_f32(DType::F16, [2, 1], vec![0.1, -3.5]).unwrap();
        let ids = Tensor::u32([], vec![1]).unwrap();
        let y = eval_op(Gather, &[&table, &ids]).unwrap();
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.shape().dims(), [1]);
        assert_eq!(y.to_f32(), vec![-3.5]);
    }

    #[test]
    fn out_of_range_ids_are_run_time_errors() {
        let table = Tensor::f32([3, 2], vec![0.0; 6]).unwrap();
        for (id, msg) in [(3, "id 3 is out of range"), (-1, "id -1 is out of range")] {
            let ids = Tensor::i32([2], vec![0, id]).unwrap();
            let err = eval_op(Gather, &[&table, &ids]).unwrap_err();
            assert_eq!(err.to_string(), format!("gather failed at run time: {msg} for a table of 3 rows"));
        }
    }

    #[test]
    fn rejects_float_ids() {
        let mut g = Graph::new("t");
        let table = g.param("emb", TensorType::new(DType::F32, [3, 2])).unwrap();
        let ids = g.input("ids", TensorType::new(DType::F32, [2])).unwrap();
        let err = g.gather(table, ids).unwrap_err();
        assert_eq!(err.to_string(), "gather: needs a table of rank >= 1 and integer ids, got f32[3,2] and f32[2]");
    }

    #[test]
    fn take_rejects_mixed_dtypes() {
        let a = Tensor::f32([1], vec![1.0]).unwrap();
        let b = Tensor::i32([1], vec![1]).unwrap();
        let err = take("concat", &[&a, &b], &[0, 1]).unwrap_err();
        assert_eq!(err.to_string(), "concat failed at run time: inputs have different dtypes");
    }
}
