//! A stable text form of a graph, for snapshot tests and `susurrus demo`.
//!
//! ```text
//! graph layer(scalars: pos) {
//!   %0 = input "x" : f32[4,8]
//!   %1 = gelu(%0) : f32[4,8]
//!   outputs: y=%1
//! }
//! ```

use std::fmt;

use super::graph::Graph;

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "graph {}", self.name())?;
        if !self.scalars().is_empty() {
            write!(f, "(scalars: {})", self.scalars().join(", "))?;
        }
        writeln!(f, " {{")?;
        for id in self.ids() {
            let node = self.node(id);
            write!(f, "  %{} = {}", id.0, node.op.name())?;
            if !node.inputs.is_empty() {
                let args: Vec<String> = node.inputs.iter().map(|i| format!("%{}", i.0)).collect();
                write!(f, "({})", args.join(", "))?;
            }
            let attrs = node.op.attrs();
            if !attrs.is_empty() {
                write!(f, " {attrs}")?;
            }
            writeln!(f, " : {}", node.ty)?;
        }
        let outs: Vec<String> = self.outputs().iter().map(|(n, id)| format!("{n}=%{}", id.0)).collect();
        writeln!(f, "  outputs: {}", outs.join(", "))?;
        write!(f, "}}")
    }
}
