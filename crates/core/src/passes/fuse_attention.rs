//! Attention fusion: `softmax(q k^T * scale [+ mask]) v` becomes one [`Attention`] op, so a
//! backend can run it without materialising the score matrix.
//!
//! Matched: `matmul(softmax(S), v)` where `S` is `m`, `m * c`, `c * m` or `m / c` for
//! `m = matmul_t(q, k)` and a one-element constant `c`, optionally followed by `+ mask`.
//! Every intermediate must feed only the next step. A constant mask that is exactly causal
//! (0 where key `j <= i + Sk - Sq`, at most -1e9 elsewhere) becomes [`MaskKind::Causal`] and
//! needs no mask input at run time.

use super::Pass;
use super::pattern::{Uses, const_scalar, rewrite_to_fixpoint, try_replace};
use crate::error::Result;
use crate::ir::{Graph, NodeId};
use crate::ops::{Attention, BinaryKind, MaskKind, Op};

pub struct FuseAttention;

impl Pass for FuseAttention {
    fn name(&self) -> &'static str {
        "fuse_attention"
    }

    fn run(&self, g: &mut Graph) -> Result<bool> {
        rewrite_to_fixpoint(g, |g| {
            let uses = Uses::of(g);
            for id in g.ids() {
                if let Some((op, inputs)) = match_attention(g, &uses, id)
                    && try_replace(g, id, op, &inputs)?
                {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }
}

fn match_attention(g: &Graph, uses: &Uses, id: NodeId) -> Option<(Attention, Vec<NodeId>)> {
    let node = g.node(id);
    let Op::MatMul(mm) = &node.op else { return None };
    if mm.transpose_b {
        return None;
    }
    let (probs, v) = (node.inputs[0], node.inputs[1]);
    if !matches!(g.node(probs).op, Op::Softmax(_)) || !uses.single(probs) {
        return None;
    }
    let logits = g.node(probs).inputs[0];
    if let Some((q, k, scale)) = scaled_scores(g, uses, logits) {
        return Some((Attention { scale, mask: MaskKind::None }, vec![q, k, v]));
    }
    let Op::Binary(add) = &g.node(logits).op else { return None };
    if add.kind != BinaryKind::Add || !uses.single(logits) {
        return None;
    }
    let [a, b] = [g.node(logits).inputs[0], g.node(logits).inputs[1]];
    let (q, k, scale, mask) = match (scaled_scores(g, uses, a), scaled_scores(g, uses, b)) {
        (Some((q, k, s)), _) => (q, k, s, b),
        (None, Some((q, k, s))) => (q, k, s, a),
        (None, None) => return None,
    };
    if is_causal_mask(g, mask, g.ty(logits).shape.dims()) {
        Some((Attention { scale, mask: MaskKind::Causal }, vec![q, k, v]))
    } else {
        Some((Attention { scale, mask: MaskKind::Additive }, vec![q, k, v, mask]))
    }
}

/// `(q, k, scale)` when `id` computes `matmul_t(q, k)` times a constant, used only onward.
fn scaled_scores(g: &Graph, uses: &Uses, id: NodeId) -> Option<(NodeId, NodeId, f32)> {
    if !uses.single(id) {
        return None;
    }
    let qk = |m: NodeId| match &g.node(m).op {
        Op::MatMul(mm) if mm.transpose_b && (m == id || uses.single(m)) => {
            Some((g.node(m).inputs[0], g.node(m).inputs[1]))
        }
        _ => None,
    };
    if let Some((q, k)) = qk(id) {
        return Some((q, k, 1.0));
    }
    let Op::Binary(bin) = &g.node(id).op else { return None };
    let [a, b] = [g.node(id).inputs[0], g.node(id).inputs[1]];
    let (m, scale) = match bin.kind {
        BinaryKind::Mul => match (const_scalar(g, a), const_scalar(g, b)) {
            (_, Some(c)) => (a, c),
            (Some(c), None) => (b, c),
            (None, None) => return None,
        },
        BinaryKind::Div => (a, 1.0 / const_scalar(g, b)?),
        _ => return None,
    };
    let (q, k) = qk(m)?;
    // The scores must not be broadcast by the scale, or the fused op would change the shape.
    (g.ty(m) == g.ty(id)).then_some((q, k, scale))
}

/// True when `mask` is a constant that masks exactly the keys after each query's position,
/// for scores of shape `[.., Sq, Sk]`.
fn is_causal_mask(g: &Graph, mask: NodeId, scores: &[usize]) -> bool {
    let Op::Const(c) = &g.node(mask).op else { return false };
    let dims = c.value.shape().dims();
    let (sq, sk) = (scores[scores.len() - 2], scores[scores.len() - 1]);
    if dims.len() < 2 || dims[dims.len() - 2..] != [sq, sk] || dims[..dims.len() - 2].iter().any(|&d| d != 1) {
        return false;
    }
    let values = c.value.to_f32();
    (0..sq).all(|i| {
        (0..sk).all(|j| {
            let v = values[i * sk + j];
            if j + sq <= i + sk { v == 0.0 } else { v <= -1e9 }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};
    use crate::passes::testing::run_and_compare;
    use crate::tensor::Tensor;

    /// Heads 2, queries `sq`, keys 5, head size 4; `mask` picks the mask input.
    fn graph(sq: usize, mask: Option<Tensor>, additive_input: bool) -> Graph {
        let t = |d: &[usize]| TensorType::new(DType::F32, d);
        let mut g = Graph::new("attn");
        let q = g.input("q", t(&[2, sq, 4])).unwrap();
        let k = g.input("k", t(&[2, 5, 4])).unwrap();
        let v = g.input("v", t(&[2, 5, 4])).unwrap();
        let scores = g.matmul_t(q, k).unwrap();
        let half = g.constant(Tensor::scalar_f32(0.5));
        let mut logits = g.mul(scores, half).unwrap();
        if let Some(m) = mask {
            let m = g.constant(m);
            logits = g.add(logits, m).unwrap();
        }
        if additive_input {
            let m = g.input("mask", t(&[sq, 5])).unwrap();
            logits = g.add(m, logits).unwrap();
        }
        let p = g.softmax(logits).unwrap();
        let o = g.matmul(p, v).unwrap();
        g.output("o", o).unwrap();
        g
    }

    /// A causal mask for `sq` queries over 5 keys, aligned to the end.
    fn causal(sq: usize) -> Tensor {
        let values = (0..sq).flat_map(|i| (0..5).map(move |j| if j + sq <= i + 5 { 0.0 } else { f32::NEG_INFINITY }));
        Tensor::f32([sq, 5], values.collect()).unwrap()
    }

    #[test]
    fn a_constant_causal_mask_becomes_the_causal_variant() {
        let (after, changed) = run_and_compare(&FuseAttention, &graph(3, Some(causal(3)), false), 1e-5);
        assert!(changed);
        assert_eq!(
            after.to_string(),
            "graph attn {\n  %0 = input \"q\" : f32[2,3,4]\n  %1 = input \"k\" : f32[2,5,4]\n  \
             %2 = input \"v\" : f32[2,5,4]\n  %3 = attention(%0, %1, %2) scale=0.5 mask=causal : f32[2,3,4]\n  \
             outputs: o=%3\n}"
        );
    }

    #[test]
    fn unmasked_and_additive_masks() {
        let (after, _) = run_and_compare(&FuseAttention, &graph(5, None, false), 1e-5);
        assert!(after.to_string().contains("%3 = attention(%0, %1, %2) scale=0.5 : f32[2,5,4]"), "{after}");
        let (after, _) = run_and_compare(&FuseAttention, &graph(5, None, true), 1e-5);
        assert!(after.to_string().contains("= attention(%0, %1, %2, %3) scale=0.5 mask=additive"), "{after}");
        // A constant mask that is not causal stays an input of the fused op.
        let not_causal = Tensor::f32([5, 5], causal(5).to_f32().into_iter().rev().collect()).unwrap();
        let (after, _) = run_and_compare(&FuseAttention, &graph(5, Some(not_causal), false), 1e-5);
        assert!(after.to_string().contains("mask=additive"), "{after}");
    }

    #[test]
    fn shared_scores_are_left_alone() {
        let mut g = graph(5, None, false);
        // Also return the probabilities: the softmax must stay.
        let probs = g.ids().find(|&i| matches!(g.node(i).op, Op::Softmax(_))).unwrap();
        g.output("p", probs).unwrap();
        let before = g.to_string();
        assert!(!FuseAttention.run(&mut g).unwrap());
        assert_eq!(g.to_string(), before);
    }
}
