//! The verifier: checks the invariants every pass must keep.
//!
//! Run after every pass in tests and debug builds (`passes::Pipeline` does it).

use std::collections::HashSet;

use super::graph::{Graph, NodeId};
use crate::error::{Error, Result};
use crate::ops::Op;

/// Checks that `g` is well formed:
/// - inputs refer to earlier nodes (topological order) and every stored type is what the op
///   infers from its inputs;
/// - input, param and state names are unique and non-empty; output names are unique;
/// - runtime scalars used by ops are declared;
/// - a persistent buffer is written in one chain: a `State` (or a KV-cache write) that feeds a
///   write feeds nothing else and is not an output, so no reader sees a half-updated buffer.
pub fn verify(g: &Graph) -> Result<()> {
    let bad = |id: NodeId, msg: String| Error::InvalidGraph(format!("%{} ({}): {msg}", id.0, g.node(id).op.name()));
    let mut names: HashSet<(&str, &str)> = HashSet::new();
    for id in g.ids() {
        let node = g.node(id);
        for &inp in &node.inputs {
            if inp >= id {
                return Err(bad(id, format!("uses %{} which is not defined before it", inp.0)));
            }
        }
        let tys: Vec<_> = node.inputs.iter().map(|&i| g.ty(i)).collect();
        let ty = node.op.infer(&tys).map_err(|e| bad(id, e.to_string()))?;
        if ty != node.ty {
            return Err(bad(id, format!("typed {} but its op infers {ty}", node.ty)));
        }
        if let Some(name) = node.op.leaf_name() {
            if name.is_empty() {
                return Err(bad(id, "has an empty name".into()));
            }
            if !names.insert((node.op.name(), name)) {
                return Err(bad(id, format!("name '{name}' is declared twice")));
            }
        }
        let scalar = match &node.op {
            Op::ScalarRead(s) => Some(s.scalar),
            Op::KvWrite(w) => w.offset,
            _ => None,
        };
        if let Some(s) = scalar {
            if s.index() >= g.scalars().len() {
                return Err(bad(id, format!("reads undeclared runtime scalar #{}", s.0)));
            }
        }
        if matches!(node.op, Op::KvWrite(_)) && g.state_of(node.inputs[0]).is_none() {
            return Err(bad(id, "writes into a value that is not a persistent buffer".into()));
        }
    }
    let consumers = g.consumers();
    for id in g.ids() {
        let writes = consumers[id.index()]
            .iter()
            .filter(|&&c| matches!(g.node(c).op, Op::KvWrite(_)) && g.node(c).inputs[0] == id)
            .count();
        if writes > 0 && (consumers[id.index()].len() > 1 || g.is_output(id)) {
            return Err(bad(
                id,
                "a persistent buffer that is written must be read only through the write's result".into(),
            ));
        }
    }
    let mut outs = HashSet::new();
    for (name, id) in g.outputs() {
        if id.index() >= g.len() {
            return Err(Error::InvalidGraph(format!("output '{name}' refers to unknown node %{}", id.0)));
        }
        if !outs.insert(name.as_str()) {
            return Err(Error::InvalidGraph(format!("output '{name}' is declared twice")));
        }
    }
    Ok(())
}
