//! The intermediate representation: typed nodes in a graph with static shapes.

mod eval;
mod graph;
mod print;
mod verify;

/// The types of values, defined with the host tensors (below the IR) and named here too.
pub use crate::tensor::{DType, Shape, TensorType, broadcast_offset};
pub use eval::{Evaluation, evaluate};
pub use graph::{Graph, Node, NodeId, ScalarId};
pub use verify::verify;
