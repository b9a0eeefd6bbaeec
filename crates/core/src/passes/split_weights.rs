//! Weights too large for one buffer, split into blocks of rows.
//!
//! A backend can bind at most so many bytes as one buffer (WebGPU: `maxStorageBufferBindingSize`,
//! 128 MiB by default in browsers, and `maxBufferSize`, 256 MiB). Whisper's token embedding is
//! 51866 x 1280 in large-v3: 133 MB as f16, 266 MB as f32. [`split_weights`] rewrites a graph
//! so that no weight it reads is larger than the limit: each such weight becomes weights of
//! its own holding consecutive rows ([`WeightRows`], which the link layer cuts from the
//! supplied tensor), and each use becomes one use per block:
//!
//! - `gather(table, ids)`: every block gathers with ids clamped into its rows, and a select
//!   keeps, for each id, the block that holds it (ids outside the table pick a row of the
//!   first or last block, as GPU gathers clamp);
//! - `matmul(x, w, transpose_b)` (a linear layer on a `[out, in]` weight): one product per
//!   block of output columns, concatenated.
//!
//! Any other use of an oversized weight is an error naming the op. The numbers are those of
//! the unsplit graph (the same products and rows, in another arrangement). This is not one
//! of the default passes: the link layer applies it with the backend's limit.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::ir::{DType, Graph, NodeId, TensorType};
use crate::ops::{CmpKind, MatMul, Op, Param};
use crate::tensor::{Tensor, TensorData};

/// Rows `rows` of the weight `of`, a weight of its own named `name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightRows {
    pub name: String,
    pub of: String,
    pub rows: Range<usize>,
}

impl WeightRows {
    /// Those rows of `tensor` (the weight `of`), copied.
    pub fn cut(&self, tensor: &Tensor) -> Result<Tensor> {
        let dims = tensor.shape().dims();
        if dims.first().is_none_or(|&n| self.rows.end > n || self.rows.start >= self.rows.end) {
            return Err(Error::BadArgument(format!(
                "weight '{}' has no rows {}..{} for '{}'",
                self.of, self.rows.start, self.rows.end, self.name
            )));
        }
        let mut shape = dims.to_vec();
        shape[0] = self.rows.len();
        if let TensorData::Q8(q) = tensor.data() {
            return Tensor::new(shape, TensorData::Q8(q.rows(self.rows.start, self.rows.end)?));
        }
        let row_bytes = tensor.as_bytes().len() / dims[0];
        let bytes = &tensor.as_bytes()[self.rows.start * row_bytes..self.rows.end * row_bytes];
        Tensor::from_bytes(&TensorType::new(tensor.dtype(), shape), bytes)
    }
}

/// How a backend stores values and how many bytes one buffer may hold.
pub struct BufferLimit<'a> {
    /// The backend, for errors.
    pub backend: &'a str,
    /// Most bytes of one buffer.
    pub bytes: usize,
    /// Bytes a value of a type takes as the backend stores it.
    pub stored: &'a dyn Fn(&TensorType) -> usize,
}

/// The row blocks the weight `name` of type `ty` splits into so that each fits `limit`: as few
/// blocks as that allows, of equal rows but the last. `None` when it fits whole; an error when
/// one row does not.
pub fn row_blocks(name: &str, ty: &TensorType, limit: &BufferLimit) -> Result<Option<Vec<Range<usize>>>> {
    let stored = limit.stored;
    let (backend, limit) = (limit.backend, limit.bytes);
    if stored(ty) <= limit {
        return Ok(None);
    }
    let dims = ty.shape.dims();
    let rows = dims.first().copied().unwrap_or(1);
    let with_rows = |n: usize| {
        let mut d = dims.to_vec();
        d[0] = n;
        TensorType::new(ty.dtype, d)
    };
    if dims.is_empty() || stored(&with_rows(1)) > limit {
        return Err(Error::Unsupported {
            op: format!("weight '{name}' ({ty}), one row of which is more than a buffer's {limit} bytes,"),
            backend: backend.to_string(),
        });
    }
    let mut blocks = stored(ty).div_ceil(limit).max(2);
    while stored(&with_rows(rows.div_ceil(blocks))) > limit {
        blocks += 1;
    }
    let per = rows.div_ceil(blocks);
    Ok(Some((0..rows).step_by(per).map(|lo| lo..(lo + per).min(rows)).collect()))
}

/// `g` with every weight larger than `limit` allows split into row blocks, and those blocks;
/// `None` when every weight fits.
pub fn split_weights(g: &Graph, limit: &BufferLimit) -> Result<Option<(Graph, Vec<WeightRows>)>> {
    let mut blocks_of: Vec<Option<Vec<Range<usize>>>> = vec![None; g.len()];
    let mut any = false;
    for id in g.ids() {
        if let Op::Param(p) = &g.node(id).op {
            blocks_of[id.index()] = row_blocks(&p.name, &p.ty, limit)?;
            any |= blocks_of[id.index()].is_some();
        }
    }
    if !any {
        return Ok(None);
    }

    let mut out = Graph::new(g.name());
    for name in g.scalars() {
        out.scalar(name);
    }
    let mut map: Vec<NodeId> = Vec::with_capacity(g.len());
    // The block weights of each split param, by old node id.
    let mut split: Vec<Vec<NodeId>> = vec![Vec::new(); g.len()];
    let mut rows = Vec::new();
    for id in g.ids() {
        let node = g.node(id);
        if let (Op::Param(p), Some(blocks)) = (&node.op, &blocks_of[id.index()]) {
            for r in blocks {
                let name = format!("{}[{}..{}]", p.name, r.start, r.end);
                let mut dims = p.ty.shape.dims().to_vec();
                dims[0] = r.len();
                let block = out.push(Param { name: name.clone(), ty: TensorType::new(p.ty.dtype, dims) }, &[])?;
                split[id.index()].push(block);
                rows.push(WeightRows { name, of: p.name.clone(), rows: r.clone() });
            }
            // Never read: every consumer is rewritten or refused below.
            map.push(NodeId(u32::MAX));
            continue;
        }
        let inputs: Vec<NodeId> = node.inputs.iter().map(|i| map[i.index()]).collect();
        // The first oversized input decides: a product of two oversized weights is refused
        // for its first operand.
        let oversized = node.inputs.iter().position(|i| !split[i.index()].is_empty());
        let new = match (oversized, &node.op) {
            (None, op) => out.push(op.clone(), &inputs)?,
            (Some(0), Op::Gather(_)) => {
                let ranges = blocks_of[node.inputs[0].index()].as_deref().unwrap_or_default();
                split_gather(&mut out, &split[node.inputs[0].index()], ranges, inputs[1])?
            }
            (Some(1), Op::MatMul(MatMul { transpose_b: true })) => {
                let parts: Vec<NodeId> =
                    split[node.inputs[1].index()].iter().map(|&w| out.matmul_t(inputs[0], w)).collect::<Result<_>>()?;
                let axis = node.ty.shape.rank() - 1;
                out.concat(&parts, axis)?
            }
            (Some(i), _) => return Err(refused(g, id, node.inputs[i], limit)),
        };
        map.push(new);
    }
    for (name, id) in g.outputs() {
        out.output(name, map[id.index()])?;
    }
    Ok(Some((out, rows)))
}

fn refused(g: &Graph, user: NodeId, weight: NodeId, limit: &BufferLimit) -> Error {
    let name = g.node(weight).op.leaf_name().unwrap_or("?");
    Error::Unsupported {
        op: format!(
            "{} reading weight '{name}' ({}, more than a buffer's {} bytes; such a weight is split for \
             gathers of its rows and linear layers only)",
            g.node(user).op.name(),
            g.ty(weight),
            limit.bytes
        ),
        backend: limit.backend.to_string(),
    }
}

/// `gather(table, ids)` over the row blocks `parts` of the table (rows `ranges`).
fn split_gather(g: &mut Graph, parts: &[NodeId], ranges: &[Range<usize>], ids: NodeId) -> Result<NodeId> {
    let ids_ty = g.ty(ids).clone();
    let constant = |g: &mut Graph, v: usize| -> Result<NodeId> {
        Ok(g.constant(match ids_ty.dtype {
            DType::I32 => Tensor::i32([1], vec![v as i32])?,
            _ => Tensor::u32([1], vec![v as u32])?,
        }))
    };
    // A condition per id, shaped to broadcast over the gathered rows.
    let table_rank = g.ty(parts[0]).shape.rank();
    let mut cond_dims = ids_ty.shape.dims().to_vec();
    cond_dims.extend(std::iter::repeat_n(1, table_rank - 1));

    let mut gathered = Vec::with_capacity(parts.len());
    for (&part, r) in parts.iter().zip(ranges) {
        let (lo, last) = (constant(g, r.start)?, constant(g, r.end - 1)?);
        let clamped = g.maximum(ids, lo)?;
        let clamped = g.minimum(clamped, last)?;
        let local = g.sub(clamped, lo)?;
        gathered.push(g.gather(part, local)?);
    }
    // From the last block backwards: the block holding the id, else what the later ones chose.
    let mut result = *gathered.last().ok_or_else(|| Error::InvalidGraph("a weight split into no blocks".into()))?;
    for (k, r) in ranges.iter().enumerate().rev().skip(1) {
        let end = constant(g, r.end)?;
        let inside = g.compare(CmpKind::Lt, ids, end)?;
        let inside = g.reshape(inside, cond_dims.clone())?;
        result = g.select(inside, gathered[k], result)?;
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::ir::evaluate;

    fn f32_bytes(ty: &TensorType) -> usize {
        ty.byte_size()
    }

    fn limit(bytes: usize) -> BufferLimit<'static> {
        BufferLimit { backend: "test", bytes, stored: &f32_bytes }
    }

    /// A 10 x 4 embedding read by a gather and by a linear layer (as Whisper's decoder does).
    fn embedding_graph() -> Graph {
        embedding_graph_of(DType::F32)
    }

    fn embedding_graph_of(dtype: DType) -> Graph {
        let mut g = Graph::new("embed");
        let ids = g.input("ids", TensorType::new(DType::U32, [5])).unwrap();
        let x = g.input("x", TensorType::new(DType::F32, [2, 4])).unwrap();
        let table = g.param("table", TensorType::new(dtype, [10, 4])).unwrap();
        let rows = g.gather(table, ids).unwrap();
        let logits = g.matmul_t(x, table).unwrap();
        g.output("rows", rows).unwrap();
        g.output("logits", logits).unwrap();
        g
    }

    #[test]
    fn blocks_are_as_few_as_the_limit_allows() {
        let ty = TensorType::new(DType::F32, [10, 4]);
        assert_eq!(row_blocks("t", &ty, &limit(160)).unwrap(), None);
        assert_eq!(row_blocks("t", &ty, &limit(159)).unwrap(), Some(vec![0..5, 5..10]));
        // 16 bytes a row, 48 a block: 3 rows each.
        assert_eq!(row_blocks("t", &ty, &limit(48)).unwrap(), Some(vec![0..3, 3..6, 6..9, 9..10]));
        let err = row_blocks("t", &ty, &limit(15)).unwrap_err().to_string();
        assert_eq!(
            err,
            "weight 't' (f32[10,4]), one row of which is more than a buffer's 15 bytes, is not supported by the test backend"
        );
    }

    /// Splits the embedding graph's `table` (of its dtype) under `limit` bytes, checks that the
    /// split graph gives the whole table's rows and logits and that block `table[3..6]` holds
    /// those rows, and returns the blocks.
    fn split_matches_whole(table: &Tensor, limit_bytes: usize) -> (Graph, Vec<WeightRows>) {
        let g = embedding_graph_of(table.dtype());
        let weights = HashMap::from([("table".to_string(), table.clone())]);
        let inputs = HashMap::from([
            ("ids".to_string(), Tensor::u32([5], vec![9, 0, 3, 6, 5]).unwrap()),
            ("x".to_string(), Tensor::f32([2, 4], vec![0.5, -1.0, 2.0, 0.25, 1.5, 0.0, -0.5, 1.0]).unwrap()),
        ]);
        let none = HashMap::new();
        let want = evaluate(&g, &inputs, &weights, &none, &HashMap::new()).unwrap().outputs;
        let (split, rows) = split_weights(&g, &limit(limit_bytes)).unwrap().expect("the table is split");
        crate::ir::verify(&split).unwrap();
        let mut block_weights = HashMap::new();
        for r in &rows {
            block_weights.insert(r.name.clone(), r.cut(table).unwrap());
        }
        assert_eq!(block_weights["table[3..6]"].to_f32(), table.to_f32()[12..24]);
        let got = evaluate(&split, &inputs, &block_weights, &none, &HashMap::new()).unwrap().outputs;
        assert_eq!(got["rows"], want["rows"]);
        assert_eq!(got["logits"], want["logits"]);
        (split, rows)
    }

    #[test]
    fn split_graph_computes_what_the_whole_weight_does() {
        let table = Tensor::f32([10, 4], (0..40).map(|i| (i as f32 * 0.37).sin()).collect()).unwrap();
        let (split, rows) = split_matches_whole(&table, 48);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["table[0..3]", "table[3..6]", "table[6..9]", "table[9..10]"]);
        assert!(split.nodes().iter().all(|n| n.op.leaf_name() != Some("table")), "the whole table is gone");
    }

    #[test]
    fn a_q8_table_splits_with_its_scales() {
        let floats = Tensor::f32([10, 4], (0..40).map(|i| (i as f32 * 0.37).sin() * (1 + i / 4) as f32).collect());
        let table = floats.unwrap().quantized_q8().unwrap();
        // A q8 row of 4 values is 8 bytes with its scale; 24-byte blocks hold 3 rows (12 + 12).
        let (_, rows) = split_matches_whole(&table, 24);
        assert_eq!(rows.len(), 4);
    }

    #[test]
    fn nothing_to_split_is_none() {
        assert!(split_weights(&embedding_graph(), &limit(1 << 20)).unwrap().is_none());
    }

    #[test]
    fn other_uses_of_a_split_weight_are_refused() {
        let mut g = Graph::new("other");
        let x = g.input("x", TensorType::new(DType::F32, [10, 4])).unwrap();
        let w = g.param("w", TensorType::new(DType::F32, [10, 4])).unwrap();
        let y = g.add(x, w).unwrap();
        g.output("y", y).unwrap();
        let err = split_weights(&g, &limit(48)).unwrap_err().to_string();
        assert_eq!(
            err,
            "add reading weight 'w' (f32[10,4], more than a buffer's 48 bytes; such a weight is split for gathers \
             of its rows and linear layers only) is not supported by the test backend"
        );
    }
}
