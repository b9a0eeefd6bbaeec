//! The graph: nodes in topological order, named leaves, outputs and runtime scalars.
//!
//! Nodes are appended by the builder methods (one per op, defined beside each op in
//! `ops/<op>.rs`), so a node's inputs always have smaller ids. Passes edit the graph with
//! [`Graph::replace`], which keeps that order and the node's type, and [`Graph::compact`],
//! which drops dead nodes and renumbers.

use crate::error::{Error, Result};
use crate::ops::{Const, Input, Op, Param, ScalarRead, State};
use crate::tensor::Tensor;

use crate::tensor::{DType, TensorType};

/// Index of a node in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Index of a runtime scalar in [`Graph::scalars`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScalarId(pub u32);

impl ScalarId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One operation and the value it produces.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub inputs: Vec<NodeId>,
    pub ty: TensorType,
}

/// A computation graph with static shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    name: String,
    nodes: Vec<Node>,
    outputs: Vec<(String, NodeId)>,
    scalars: Vec<String>,
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Self {
        Graph { name: name.into(), nodes: Vec::new(), outputs: Vec::new(), scalars: Vec::new() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// All node ids in topological (insertion) order.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + use<> {
        (0..self.nodes.len() as u32).map(NodeId)
    }

    /// The node `id`. Ids come from this graph; a foreign id is a programming error.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The type of node `id`.
    pub fn ty(&self, id: NodeId) -> &TensorType {
        &self.nodes[id.index()].ty
    }

    pub fn outputs(&self) -> &[(String, NodeId)] {
        &self.outputs
    }

    /// Names of the runtime scalars, indexed by [`ScalarId`].
    pub fn scalars(&self) -> &[String] {
        &self.scalars
    }

    /// Appends `op` applied to `inputs`, inferring its type. Shape and dtype mismatches are
    /// errors that name the op and the offending shapes.
    pub fn push(&mut self, op: impl Into<Op>, inputs: &[NodeId]) -> Result<NodeId> {
        let op = op.into();
        let ty = self.infer(&op, inputs, self.nodes.len())?;
        self.nodes.push(Node { op, inputs: inputs.to_vec(), ty });
        Ok(NodeId(self.nodes.len() as u32 - 1))
    }

    fn infer(&self, op: &Op, inputs: &[NodeId], before: usize) -> Result<TensorType> {
        let mut tys = Vec::with_capacity(inputs.len());
        for &i in inputs {
            if i.index() >= before {
                return Err(Error::InvalidGraph(format!("{} uses %{} which is not defined before it", op.name(), i.0)));
            }
            tys.push(&self.nodes[i.index()].ty);
        }
        let ty = op.infer(&tys)?;
        check_q8(op, &tys, &ty)?;
        if ty.checked_byte_size().is_none_or(|b| b > isize::MAX as usize) {
            return Err(Error::shape(op.name(), format!("result shape {} is too large to address", ty.shape)));
        }
        Ok(ty)
    }

    /// A named run-time input.
    pub fn input(&mut self, name: &str, ty: TensorType) -> Result<NodeId> {
        self.check_unique_leaf(name, |op| matches!(op, Op::Input(_)), "input")?;
        self.push(Input { name: name.to_string(), ty }, &[])
    }

    /// A named weight, supplied once when the plan is compiled.
    pub fn param(&mut self, name: &str, ty: TensorType) -> Result<NodeId> {
        self.check_unique_leaf(name, |op| matches!(op, Op::Param(_)), "param")?;
        self.push(Param { name: name.to_string(), ty }, &[])
    }

    /// A named persistent buffer (e.g. a KV cache) that survives across runs.
    pub fn state(&mut self, name: &str, ty: TensorType) -> Result<NodeId> {
        self.check_unique_leaf(name, |op| matches!(op, Op::State(_)), "state")?;
        self.push(State { name: name.to_string(), ty }, &[])
    }

    /// A constant tensor embedded in the graph.
    pub fn constant(&mut self, value: Tensor) -> NodeId {
        let ty = value.ty();
        self.nodes.push(Node { op: Op::Const(Const::new(value)), inputs: Vec::new(), ty });
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// Declares (or finds) the runtime scalar `name`.
    pub fn scalar(&mut self, name: &str) -> ScalarId {
        if let Some(i) = self.scalars.iter().position(|s| s == name) {
            return ScalarId(i as u32);
        }
        self.scalars.push(name.to_string());
        ScalarId(self.scalars.len() as u32 - 1)
    }

    /// A u32 scalar tensor holding the runtime scalar `s` of the current run.
    pub fn read_scalar(&mut self, s: ScalarId) -> Result<NodeId> {
        if s.index() >= self.scalars.len() {
            return Err(Error::InvalidGraph(format!("runtime scalar #{} is not declared", s.0)));
        }
        self.push(ScalarRead { scalar: s }, &[])
    }

    /// Marks `id` as the graph output `name`.
    pub fn output(&mut self, name: &str, id: NodeId) -> Result<()> {
        if id.index() >= self.nodes.len() {
            return Err(Error::InvalidGraph(format!("output '{name}' refers to unknown node %{}", id.0)));
        }
        if self.outputs.iter().any(|(n, _)| n == name) {
            return Err(Error::InvalidGraph(format!("output '{name}' is declared twice")));
        }
        self.outputs.push((name.to_string(), id));
        Ok(())
    }

    fn check_unique_leaf(&self, name: &str, kind: impl Fn(&Op) -> bool, what: &str) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidGraph(format!("{what} name is empty")));
        }
        if self.nodes.iter().any(|n| kind(&n.op) && n.op.leaf_name() == Some(name)) {
            return Err(Error::InvalidGraph(format!("{what} '{name}' is declared twice")));
        }
        Ok(())
    }

    /// Replaces node `id` with `op(inputs)`. The new node must have the same type and may only
    /// use nodes defined before `id`, so consumers and the topological order stay valid.
    pub fn replace(&mut self, id: NodeId, op: impl Into<Op>, inputs: &[NodeId]) -> Result<()> {
        let op = op.into();
        let ty = self.infer(&op, inputs, id.index())?;
        let old = &self.nodes[id.index()];
        if ty != old.ty {
            return Err(Error::InvalidGraph(format!(
                "replacing %{} ({}) with {} changes its type from {} to {ty}",
                id.0,
                old.op.name(),
                op.name(),
                old.ty
            )));
        }
        self.nodes[id.index()] = Node { op, inputs: inputs.to_vec(), ty };
        Ok(())
    }

    /// For every node, the nodes that use it (a node using a value twice appears twice).
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut out = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &inp in &n.inputs {
                out[inp.index()].push(NodeId(i as u32));
            }
        }
        out
    }

    /// True when `id` is one of the graph outputs.
    pub fn is_output(&self, id: NodeId) -> bool {
        self.outputs.iter().any(|&(_, o)| o == id)
    }

    /// Keeps the nodes with `live[i]` set, renumbering them in order; returns the number of
    /// nodes removed. Fails when a kept node or an output uses a removed node.
    pub fn compact(&mut self, live: &[bool]) -> Result<usize> {
        let mut remap = vec![None; self.nodes.len()];
        let mut kept = Vec::with_capacity(self.nodes.len());
        for (i, node) in std::mem::take(&mut self.nodes).into_iter().enumerate() {
            if !live[i] {
                continue;
            }
            let mut node = node;
            for inp in &mut node.inputs {
                *inp = remap[inp.index()]
                    .ok_or_else(|| Error::InvalidGraph(format!("node %{i} uses removed node %{}", inp.0)))?;
            }
            remap[i] = Some(NodeId(kept.len() as u32));
            kept.push(node);
        }
        let removed = live.len() - kept.len();
        self.nodes = kept;
        for (name, id) in &mut self.outputs {
            *id =
                remap[id.index()].ok_or_else(|| Error::InvalidGraph(format!("output '{name}' uses a removed node")))?;
        }
        Ok(removed)
    }
}

impl Graph {
    /// The persistent buffer a node's value lives in: the `State` itself, or a KV-cache
    /// write (through any chain of writes) into it.
    pub fn state_of(&self, id: NodeId) -> Option<&str> {
        let mut id = id;
        loop {
            match &self.node(id).op {
                Op::State(s) => return Some(&s.name),
                Op::KvWrite(_) => id = self.node(id).inputs[0],
                _ => return None,
            }
        }
    }

    /// The values of this graph's runtime scalars, in [`ScalarId`] order, from a name map.
    /// Fails on a missing scalar or one the graph does not declare.
    pub fn scalar_values(&self, given: &std::collections::HashMap<String, u32>) -> Result<Vec<u32>> {
        if let Some(unknown) = given.keys().find(|k| !self.scalars.contains(k)) {
            return Err(Error::BadArgument(format!("runtime scalar '{unknown}' is not used by graph '{}'", self.name)));
        }
        self.scalars
            .iter()
            .map(|name| {
                given
                    .get(name)
                    .copied()
                    .ok_or_else(|| Error::BadArgument(format!("runtime scalar '{name}' was not supplied")))
            })
            .collect()
    }
}

/// q8 is a storage type of weights only: a param may be q8, and only a product's right
/// operand, a gather's table, a convolution's weight and a cast read one (each dequantizes),
/// so no computed value, and nothing a backend keeps in its arena, is q8.
fn check_q8(op: &Op, inputs: &[&TensorType], ty: &TensorType) -> Result<()> {
    if ty.dtype == DType::Q8 && !matches!(op, Op::Param(_)) {
        return Err(Error::shape(op.name(), format!("only weights can be q8, not the result {ty}")));
    }
    for (k, t) in inputs.iter().enumerate() {
        let reads = matches!(
            (op, k),
            (Op::MatMul(_) | Op::MatMulBias(_) | Op::Conv1d(_), 1) | (Op::Gather(_) | Op::Cast(_), 0)
        );
        if t.dtype == DType::Q8 && !reads {
            return Err(Error::shape(
                op.name(),
                format!(
                    "input {k} is the q8 weight {t}; q8 weights are read only by matmul (right operand), \
                     gather (table), conv1d (weight) and cast"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;

    #[test]
    fn oversized_shapes_are_errors_not_overflows() {
        let mut g = Graph::new("big");
        let err = g.input("x", TensorType::new(DType::F32, [1 << 40, 1 << 40])).unwrap_err();
        assert_eq!(err.to_string(), "input: result shape [1099511627776,1099511627776] is too large to address");
        let x = g.input("y", TensorType::new(DType::F32, [4_000_000_000, 384])).unwrap();
        let w = g.input("w", TensorType::new(DType::F32, [384, 4_000_000_000])).unwrap();
        assert!(g.matmul(x, w).unwrap_err().to_string().contains("too large to address"));
    }
}
