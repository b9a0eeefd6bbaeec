//! The intermediate representation: typed nodes in a graph with static shapes.

mod dtype;
mod eval;
mod graph;
mod print;
mod shape;
mod verify;

pub use dtype::{DType, TensorType};
pub use eval::{Evaluation, evaluate};
pub use graph::{Graph, Node, NodeId, ScalarId};
pub use shape::{Shape, broadcast_offset};
pub use verify::verify;
