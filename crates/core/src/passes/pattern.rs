//! Small helpers shared by the fusion passes.

use crate::error::Result;
use crate::ir::{Graph, NodeId};
use crate::ops::Op;

use super::dce::remove_dead;

/// Use counts of a graph, taken before a rewrite.
pub(crate) struct Uses {
    consumers: Vec<Vec<NodeId>>,
    outputs: Vec<bool>,
}

impl Uses {
    pub fn of(g: &Graph) -> Self {
        let mut outputs = vec![false; g.len()];
        for (_, id) in g.outputs() {
            outputs[id.index()] = true;
        }
        Uses { consumers: g.consumers(), outputs }
    }

    /// True when `id` is used exactly once and is not a graph output, so a fused op may
    /// swallow it.
    pub fn single(&self, id: NodeId) -> bool {
        self.consumers[id.index()].len() == 1 && !self.outputs[id.index()]
    }
}

/// Replaces `id` with `op(inputs)` when the op accepts these inputs and yields the node's
/// type; returns whether it did. Patterns that match structurally but not in type are skipped.
pub(crate) fn try_replace(g: &mut Graph, id: NodeId, op: impl Into<Op>, inputs: &[NodeId]) -> Result<bool> {
    let op = op.into();
    let tys: Vec<_> = inputs.iter().map(|&i| g.ty(i)).collect();
    match op.infer(&tys) {
        Ok(ty) if &ty == g.ty(id) => {
            g.replace(id, op, inputs)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Applies `rewrite` to one match at a time until none is left, removing the swallowed nodes
/// after each rewrite so that use counts stay exact. `rewrite` returns whether it changed `g`.
pub(crate) fn rewrite_to_fixpoint(g: &mut Graph, mut rewrite: impl FnMut(&mut Graph) -> Result<bool>) -> Result<bool> {
    let mut changed = false;
    while rewrite(g)? {
        remove_dead(g)?;
        changed = true;
    }
    Ok(changed)
}

/// The value of a one-element constant node.
pub(crate) fn const_scalar(g: &Graph, id: NodeId) -> Option<f32> {
    match &g.node(id).op {
        Op::Const(c) => c.scalar_value(),
        _ => None,
    }
}
