//! Matmul epilogue fusion: `matmul(a, b) + bias` (bias `[N]`, either operand order),
//! optionally followed by GELU, becomes one [`MatMulBias`] op. Whisper's linear layers are
//! all of this form, and the FFN's first layer carries the GELU. Then a residual add of such
//! a layer's result, `r + layer(x)` with `r` of the output's type and a weight of rank 2 (so
//! that every backend sees one matrix of rows), joins it as the op's residual: a residual
//! block's last layer and the stream's add become one kernel.

use super::Pass;
use super::pattern::{Uses, rewrite_to_fixpoint, try_replace};
use crate::error::Result;
use crate::ir::{Graph, NodeId};
use crate::ops::{BinaryKind, MatMulBias, Op, UnaryKind};

pub struct FuseMatMulBias;

impl Pass for FuseMatMulBias {
    fn name(&self) -> &'static str {
        "fuse_matmul_bias"
    }

    fn run(&self, g: &mut Graph) -> Result<bool> {
        rewrite_to_fixpoint(g, |g| {
            let uses = Uses::of(g);
            // GELU roots first: an add under a GELU must not be taken alone.
            let gelu = g.ids().filter_map(|id| Some((id, match_gelu(g, &uses, id)?)));
            let bias = g.ids().filter_map(|id| Some((id, match_bias(g, &uses, id, false)?)));
            let residual = g.ids().filter_map(|id| Some((id, match_residual(g, &uses, id)?)));
            let candidates: Vec<_> = gelu.chain(bias).chain(residual).collect();
            for (id, (op, inputs)) in candidates {
                if try_replace(g, id, op, &inputs)? {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }
}

/// `gelu(matmul + bias)` rooted at the GELU.
fn match_gelu(g: &Graph, uses: &Uses, id: NodeId) -> Option<(MatMulBias, Vec<NodeId>)> {
    match &g.node(id).op {
        Op::Unary(u) if u.kind == UnaryKind::Gelu => {
            let add = g.node(id).inputs[0];
            if uses.single(add) { match_bias(g, uses, add, true) } else { None }
        }
        _ => None,
    }
}

/// `matmul + bias` rooted at the add.
fn match_bias(g: &Graph, uses: &Uses, id: NodeId, gelu: bool) -> Option<(MatMulBias, Vec<NodeId>)> {
    let Op::Binary(add) = &g.node(id).op else { return None };
    if add.kind != BinaryKind::Add {
        return None;
    }
    let n = g.ty(id).shape.last();
    let [x, y] = [g.node(id).inputs[0], g.node(id).inputs[1]];
    let is_bias = |b: NodeId| g.ty(b).shape.dims() == [n];
    let (mm, bias) = [(x, y), (y, x)]
        .into_iter()
        .find(|&(m, b)| matches!(g.node(m).op, Op::MatMul(_)) && uses.single(m) && is_bias(b) && g.ty(m) == g.ty(id))?;
    let Op::MatMul(m) = &g.node(mm).op else { return None };
    let (a, b) = (g.node(mm).inputs[0], g.node(mm).inputs[1]);
    Some((MatMulBias { transpose_b: m.transpose_b, gelu, residual: false }, vec![a, b, bias]))
}

/// `r + matmul_bias(..)` (either order) rooted at the add.
fn match_residual(g: &Graph, uses: &Uses, id: NodeId) -> Option<(MatMulBias, Vec<NodeId>)> {
    let Op::Binary(add) = &g.node(id).op else { return None };
    if add.kind != BinaryKind::Add {
        return None;
    }
    let [x, y] = [g.node(id).inputs[0], g.node(id).inputs[1]];
    let (layer, r) = [(x, y), (y, x)].into_iter().find(|&(m, r)| {
        let fusable =
            matches!(&g.node(m).op, Op::MatMulBias(mb) if !mb.residual) && g.ty(g.node(m).inputs[1]).shape.rank() == 2;
        fusable && uses.single(m) && m != r && g.ty(m) == g.ty(id) && g.ty(r) == g.ty(id)
    })?;
    let Op::MatMulBias(mb) = &g.node(layer).op else { return None };
    let mut inputs = g.node(layer).inputs.clone();
    inputs.push(r);
    Some((MatMulBias { residual: true, ..mb.clone() }, inputs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};
    use crate::passes::testing::run_and_compare;

    fn f32t(dims: &[usize]) -> TensorType {
        TensorType::new(DType::F32, dims)
    }

    #[test]
    fn fuses_linear_layers_with_and_without_gelu() {
        let mut g = Graph::new("mlp");
        let x = g.input("x", f32t(&[5, 4])).unwrap();
        let w1 = g.param("fc1.weight", f32t(&[6, 4])).unwrap();
        let b1 = g.param("fc1.bias", f32t(&[6])).unwrap();
        let h = g.matmul_t(x, w1).unwrap();
        let a = g.add(h, b1).unwrap();
        let act = g.gelu(a).unwrap();
        let w2 = g.param("fc2.weight", f32t(&[3, 6])).unwrap();
        let b2 = g.param("fc2.bias", f32t(&[3])).unwrap();
        let h2 = g.matmul_t(act, w2).unwrap();
        let y = g.add(b2, h2).unwrap();
        g.output("y", y).unwrap();
        let (after, changed) = run_and_compare(&FuseMatMulBias, &g, 1e-5);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph mlp {\n  %0 = input \"x\" : f32[5,4]\n  %1 = param \"fc1.weight\" : f32[6,4]\n  \
             %2 = param \"fc1.bias\" : f32[6]\n  %3 = matmul_bias(%0, %1, %2) transpose_b gelu : f32[5,6]\n  \
             %4 = param \"fc2.weight\" : f32[3,6]\n  %5 = param \"fc2.bias\" : f32[3]\n  \
             %6 = matmul_bias(%3, %4, %5) transpose_b : f32[5,3]\n  outputs: y=%6\n}"
        );
    }

    #[test]
    fn full_adds_and_shared_products_are_left_alone() {
        let mut g = Graph::new("mlp");
        let x = g.input("x", f32t(&[5, 4])).unwrap();
        let w = g.param("w", f32t(&[4, 6])).unwrap();
        let r = g.input("r", f32t(&[5, 6])).unwrap();
        let h = g.matmul(x, w).unwrap();
        // A residual add is not a bias add; and `h` is also an output.
        let y = g.add(h, r).unwrap();
        let b = g.param("b", f32t(&[6])).unwrap();
        let z = g.add(h, b).unwrap();
        g.output("y", y).unwrap();
        g.output("z", z).unwrap();
        let before = g.to_string();
        assert!(!FuseMatMulBias.run(&mut g).unwrap());
        assert_eq!(g.to_string(), before);
    }

    #[test]
    fn a_residual_add_joins_the_layer_before_it() {
        let mut g = Graph::new("block");
        let x = g.input("x", f32t(&[5, 4])).unwrap();
        let w = g.param("out.weight", f32t(&[4, 4])).unwrap();
        let b = g.param("out.bias", f32t(&[4])).unwrap();
        let h = g.matmul_t(x, w).unwrap();
        let h = g.add(h, b).unwrap();
        let y = g.add(x, h).unwrap();
        g.output("y", y).unwrap();
        let (after, changed) = run_and_compare(&FuseMatMulBias, &g, 1e-6);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph block {\n  %0 = input \"x\" : f32[5,4]\n  %1 = param \"out.weight\" : f32[4,4]\n  \
             %2 = param \"out.bias\" : f32[4]\n  %3 = matmul_bias(%0, %1, %2, %0) transpose_b residual : f32[5,4]\n  \
             outputs: y=%3\n}"
        );
    }

    #[test]
    fn residuals_of_shared_or_batched_layers_are_left_alone() {
        // The layer's result is also an output: it must stay.
        let mut g = Graph::new("shared");
        let x = g.input("x", f32t(&[5, 4])).unwrap();
        let w = g.param("w", f32t(&[4, 4])).unwrap();
        let b = g.param("b", f32t(&[4])).unwrap();
        let h = g.matmul_t(x, w).unwrap();
        let h = g.add(h, b).unwrap();
        let y = g.add(x, h).unwrap();
        g.output("y", y).unwrap();
        g.output("h", h).unwrap();
        FuseMatMulBias.run(&mut g).unwrap();
        assert!(g.to_string().contains("add("), "{g}");
        // A batched weight (one matrix per batch) keeps its add.
        let mut g = Graph::new("batched");
        let x = g.input("x", f32t(&[2, 5, 4])).unwrap();
        let w = g.input("w", f32t(&[2, 4, 4])).unwrap();
        let b = g.param("b", f32t(&[4])).unwrap();
        let h = g.matmul(x, w).unwrap();
        let h = g.add(h, b).unwrap();
        let y = g.add(h, x).unwrap();
        g.output("y", y).unwrap();
        FuseMatMulBias.run(&mut g).unwrap();
        assert!(g.to_string().contains("matmul_bias(%0, %1, %2) : f32[2,5,4]"), "{g}");
        assert!(g.to_string().contains("add("), "{g}");
    }
}
