//! The reference interpreter: evaluates every node with its op's CPU reference.
//!
//! This is the oracle the op harness and the pass tests compare against. It keeps every
//! value alive and never shares storage, so it cannot suffer from planner mistakes.

use std::collections::HashMap;

use super::graph::Graph;
use crate::error::{Error, Result};
use crate::ops::{EvalCtx, Op};
use crate::tensor::Tensor;

/// What [`evaluate`] computed.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Every node's value, indexed by node id.
    pub values: Vec<Tensor>,
    /// The graph outputs by name.
    pub outputs: HashMap<String, Tensor>,
    /// Persistent buffers after the run (those the graph writes, by name).
    pub states: HashMap<String, Tensor>,
}

/// Evaluates `g` on the given inputs, weights, persistent state and runtime scalars.
pub fn evaluate(
    g: &Graph,
    inputs: &HashMap<String, Tensor>,
    weights: &HashMap<String, Tensor>,
    states: &HashMap<String, Tensor>,
    scalars: &HashMap<String, u32>,
) -> Result<Evaluation> {
    let scalar_values = g.scalar_values(scalars)?;
    let ctx = EvalCtx { inputs, weights, states, scalars: &scalar_values };
    let mut values: Vec<Tensor> = Vec::with_capacity(g.len());
    let mut new_states = HashMap::new();
    for id in g.ids() {
        let node = g.node(id);
        let args: Vec<&Tensor> = node.inputs.iter().map(|i| &values[i.index()]).collect();
        let value = node.op.eval(&args, &ctx)?;
        if value.ty() != node.ty {
            return Err(Error::InvalidGraph(format!(
                "%{} ({}) evaluated to {} but is typed {}",
                id.0,
                node.op.name(),
                value.ty(),
                node.ty
            )));
        }
        if matches!(node.op, Op::KvWrite(_))
            && let Some(name) = g.state_of(id)
        {
            new_states.insert(name.to_string(), value.clone());
        }
        values.push(value);
    }
    let outputs = g.outputs().iter().map(|(name, id)| (name.clone(), values[id.index()].clone())).collect();
    Ok(Evaluation { values, outputs, states: new_states })
}
