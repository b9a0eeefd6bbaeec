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
///   write is not an output, and its only other readers are ones the write depends on (which
///   therefore run before it: reordering a beam's cache rows gathers them, then writes them
///   back), so no reader sees a half-updated buffer.
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
        if let Some(s) = scalar
            && s.index() >= g.scalars().len()
        {
            return Err(bad(id, format!("reads undeclared runtime scalar #{}", s.0)));
        }
        if matches!(node.op, Op::KvWrite(_)) && g.state_of(node.inputs[0]).is_none() {
            return Err(bad(id, "writes into a value that is not a persistent buffer".into()));
        }
    }
    let consumers = g.consumers();
    for id in g.ids() {
        let users = &consumers[id.index()];
        let writes: Vec<NodeId> = users
            .iter()
            .copied()
            .filter(|&c| matches!(g.node(c).op, Op::KvWrite(_)) && g.node(c).inputs[0] == id)
            .collect();
        let read_before = |write: NodeId| {
            let before = ancestors(g, g.node(write).inputs[1]);
            users.iter().all(|&u| u == write || before.contains(&u))
        };
        let ok = match writes[..] {
            [] => true,
            [write] => !g.is_output(id) && read_before(write),
            _ => false,
        };
        if !ok {
            return Err(bad(
                id,
                "a persistent buffer that is written must be read only through the write's result, \
                 or before it by what the write depends on"
                    .into(),
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

/// `id` and every node it depends on.
fn ancestors(g: &Graph, id: NodeId) -> HashSet<NodeId> {
    let mut seen = HashSet::from([id]);
    let mut todo = vec![id];
    while let Some(n) = todo.pop() {
        for &i in &g.node(n).inputs {
            if seen.insert(i) {
                todo.push(i);
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};

    fn cache(g: &mut Graph) -> NodeId {
        g.state("cache", TensorType::new(DType::F32, [3, 2])).unwrap()
    }

    fn err(g: &Graph) -> String {
        verify(g).unwrap_err().to_string()
    }

    /// Rows gathered from a buffer and written back over it (a beam's cache reordered): the
    /// gather is what the write copies, so it reads the buffer before the write.
    #[test]
    fn a_buffer_may_be_read_by_what_its_write_depends_on() {
        let mut g = Graph::new("reorder");
        let c = cache(&mut g);
        let rows = g.input("rows", TensorType::new(DType::U32, [3])).unwrap();
        let reordered = g.gather(c, rows).unwrap();
        let doubled = g.add(reordered, reordered).unwrap();
        let w = g.write_state(c, doubled).unwrap();
        g.output("cache", w).unwrap();
        verify(&g).unwrap();
    }

    #[test]
    fn a_buffer_read_beside_its_write_or_written_twice_is_refused() {
        let want = "invalid graph: %0 (state): a persistent buffer that is written must be read only through the write's \
                    result, or before it by what the write depends on";
        // A reader the write does not depend on could run after it.
        let mut g = Graph::new("beside");
        let c = cache(&mut g);
        let x = g.input("x", TensorType::new(DType::F32, [3, 2])).unwrap();
        let w = g.write_state(c, x).unwrap();
        let read = g.add(c, c).unwrap();
        g.output("w", w).unwrap();
        g.output("read", read).unwrap();
        assert_eq!(err(&g), want);
        // Two writes of the same buffer.
        let mut g = Graph::new("twice");
        let c = cache(&mut g);
        let x = g.input("x", TensorType::new(DType::F32, [3, 2])).unwrap();
        let (a, b) = (g.write_state(c, x).unwrap(), g.write_state(c, x).unwrap());
        g.output("a", a).unwrap();
        g.output("b", b).unwrap();
        assert_eq!(err(&g), want);
        // The unwritten buffer as an output beside its write.
        let mut g = Graph::new("output");
        let c = cache(&mut g);
        let x = g.input("x", TensorType::new(DType::F32, [3, 2])).unwrap();
        let w = g.write_state(c, x).unwrap();
        g.output("before", c).unwrap();
        g.output("after", w).unwrap();
        assert_eq!(err(&g), want);
    }
}
