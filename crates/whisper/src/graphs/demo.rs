//! A Whisper encoder layer built with the graph builder only: the graph the `demo` command,
//! the planner tests and the benchmarks use to show the compiler end to end.
//!
//! The layer is pre-norm, as in Whisper:
//! `x1 = x + out(attention(ln1(x)))`, `y = x1 + fc2(gelu(fc1(ln2(x1))))`,
//! with the key projection unbiased (Whisper's `key` linear has no bias).

use susurrus_core::error::{Error, Result};
use susurrus_core::ir::{DType, Graph, NodeId, TensorType};
use susurrus_core::tensor::Tensor;

/// Layer norm epsilon of Whisper.
const LN_EPS: f32 = 1e-5;

/// The sizes of one encoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderLayerShape {
    /// Sequence positions (Whisper's encoder sees 1500 per 30 s window).
    pub positions: usize,
    /// Model width.
    pub d_model: usize,
    /// Attention heads; must divide `d_model`.
    pub heads: usize,
    /// Width of the MLP's hidden layer.
    pub ffn: usize,
}

impl EncoderLayerShape {
    /// Whisper tiny: 1500 positions, width 384, 6 heads, MLP 1536.
    pub const WHISPER_TINY: EncoderLayerShape =
        EncoderLayerShape { positions: 1500, d_model: 384, heads: 6, ffn: 1536 };
}

fn f32_type(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims)
}

/// Layer norm over the last axis with params `{prefix}.weight` and `{prefix}.bias`.
fn layer_norm(g: &mut Graph, prefix: &str, x: NodeId, d: usize) -> Result<NodeId> {
    let gamma = g.param(&format!("{prefix}.weight"), f32_type(&[d]))?;
    let beta = g.param(&format!("{prefix}.bias"), f32_type(&[d]))?;
    g.layer_norm(x, gamma, beta, LN_EPS)
}

/// `x W^T (+ b)` with `W` stored `[out, in]` as `{prefix}.weight` and `b` as `{prefix}.bias`.
fn linear(g: &mut Graph, prefix: &str, x: NodeId, d_in: usize, d_out: usize, bias: bool) -> Result<NodeId> {
    let w = g.param(&format!("{prefix}.weight"), f32_type(&[d_out, d_in]))?;
    let y = g.matmul_t(x, w)?;
    if !bias {
        return Ok(y);
    }
    let b = g.param(&format!("{prefix}.bias"), f32_type(&[d_out]))?;
    g.add(y, b)
}

/// `[P, H*dh] -> [H, P, dh]`.
fn split_heads(g: &mut Graph, x: NodeId, s: &EncoderLayerShape) -> Result<NodeId> {
    let r = g.reshape(x, [s.positions, s.heads, s.d_model / s.heads])?;
    g.permute(r, &[1, 0, 2])
}

/// The graph of one pre-norm Whisper encoder layer: input `x [positions, d_model]`, output
/// `y` of the same type, weights named like Whisper's (`attn.q.weight`, `mlp.fc1.bias`, ...).
pub fn encoder_layer(s: &EncoderLayerShape) -> Result<Graph> {
    if s.heads == 0 || !s.d_model.is_multiple_of(s.heads) {
        return Err(Error::InvalidGraph(format!(
            "encoder layer: d_model {} cannot be split into {} heads",
            s.d_model, s.heads
        )));
    }
    let (p, d) = (s.positions, s.d_model);
    let head_dim = d / s.heads;
    let mut g = Graph::new("encoder_layer");
    let x = g.input("x", f32_type(&[p, d]))?;

    let ln1 = layer_norm(&mut g, "attn_ln", x, d)?;
    let q = linear(&mut g, "attn.q", ln1, d, d, true)?;
    let k = linear(&mut g, "attn.k", ln1, d, d, false)?;
    let v = linear(&mut g, "attn.v", ln1, d, d, true)?;
    let (q, k, v) = (split_heads(&mut g, q, s)?, split_heads(&mut g, k, s)?, split_heads(&mut g, v, s)?);
    let scores = g.matmul_t(q, k)?;
    let scale = g.constant(Tensor::scalar_f32(1.0 / (head_dim as f32).sqrt()));
    let scores = g.mul(scores, scale)?;
    let probs = g.softmax(scores)?;
    let context = g.matmul(probs, v)?;
    let context = g.permute(context, &[1, 0, 2])?;
    let context = g.reshape(context, [p, d])?;
    let attn = linear(&mut g, "attn.out", context, d, d, true)?;
    let x1 = g.add(x, attn)?;

    let ln2 = layer_norm(&mut g, "mlp_ln", x1, d)?;
    let hidden = linear(&mut g, "mlp.fc1", ln2, d, s.ffn, true)?;
    let hidden = g.gelu(hidden)?;
    let mlp = linear(&mut g, "mlp.fc2", hidden, s.ffn, d, true)?;
    let y = g.add(x1, mlp)?;
    g.output("y", y)?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use susurrus_core::ir::evaluate;
    use susurrus_core::ops::Op;

    const SMALL: EncoderLayerShape = EncoderLayerShape { positions: 5, d_model: 8, heads: 2, ffn: 12 };

    /// Row-major `[rows, inner] x [out, inner]^T + bias`.
    fn linear_ref(x: &[f32], rows: usize, inner: usize, w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        let out = w.len() / inner;
        let mut y = vec![0.0; rows * out];
        for r in 0..rows {
            for o in 0..out {
                let dot: f32 = (0..inner).map(|i| x[r * inner + i] * w[o * inner + i]).sum();
                y[r * out + o] = dot + bias.map_or(0.0, |b| b[o]);
            }
        }
        y
    }

    fn layer_norm_ref(x: &[f32], d: usize, gamma: &[f32], beta: &[f32]) -> Vec<f32> {
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks(d) {
            let mean = row.iter().sum::<f32>() / d as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
            let inv = 1.0 / (var + LN_EPS).sqrt();
            y.extend(row.iter().enumerate().map(|(i, v)| (v - mean) * inv * gamma[i] + beta[i]));
        }
        y
    }

    /// The layer written out with loops, independent of the graph and its ops.
    fn layer_ref(s: &EncoderLayerShape, x: &[f32], w: &HashMap<String, Tensor>) -> Vec<f32> {
        let (p, d, h) = (s.positions, s.d_model, s.heads);
        let dh = d / h;
        let t = |name: &str| w[name].to_f32();
        let ln1 = layer_norm_ref(x, d, &t("attn_ln.weight"), &t("attn_ln.bias"));
        let q = linear_ref(&ln1, p, d, &t("attn.q.weight"), Some(&t("attn.q.bias")));
        let k = linear_ref(&ln1, p, d, &t("attn.k.weight"), None);
        let v = linear_ref(&ln1, p, d, &t("attn.v.weight"), Some(&t("attn.v.bias")));
        let mut context = vec![0.0; p * d];
        for head in 0..h {
            for i in 0..p {
                let scores: Vec<f32> = (0..p)
                    .map(|j| {
                        let dot: f32 = (0..dh).map(|c| q[i * d + head * dh + c] * k[j * d + head * dh + c]).sum();
                        dot / (dh as f32).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f32 = exps.iter().sum();
                for c in 0..dh {
                    context[i * d + head * dh + c] = (0..p).map(|j| exps[j] / sum * v[j * d + head * dh + c]).sum();
                }
            }
        }
        let attn = linear_ref(&context, p, d, &t("attn.out.weight"), Some(&t("attn.out.bias")));
        let x1: Vec<f32> = x.iter().zip(&attn).map(|(a, b)| a + b).collect();
        let ln2 = layer_norm_ref(&x1, d, &t("mlp_ln.weight"), &t("mlp_ln.bias"));
        let hidden: Vec<f32> = linear_ref(&ln2, p, d, &t("mlp.fc1.weight"), Some(&t("mlp.fc1.bias")))
            .into_iter()
            .map(|v| 0.5 * v * (1.0 + libm::erff(v / std::f32::consts::SQRT_2)))
            .collect();
        let mlp = linear_ref(&hidden, p, s.ffn, &t("mlp.fc2.weight"), Some(&t("mlp.fc2.bias")));
        x1.iter().zip(&mlp).map(|(a, b)| a + b).collect()
    }

    #[test]
    fn matches_a_loop_implementation_of_the_layer() {
        let g = encoder_layer(&SMALL).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let mut random = |ty: &TensorType| {
            let values = (0..ty.numel()).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            Tensor::from_f32(ty.dtype, ty.shape.clone(), values).unwrap()
        };
        let mut weights = HashMap::new();
        for node in g.nodes() {
            if let Op::Param(p) = &node.op {
                weights.insert(p.name.clone(), random(&p.ty));
            }
        }
        assert_eq!(weights.len(), 15);
        let x = random(&f32_type(&[5, 8]));
        let inputs = HashMap::from([("x".to_string(), x.clone())]);
        let out = evaluate(&g, &inputs, &weights, &HashMap::new(), &HashMap::new()).unwrap();
        let y = &out.outputs["y"];
        assert_eq!(y.ty(), f32_type(&[5, 8]));
        let want = layer_ref(&SMALL, &x.to_f32(), &weights);
        for (i, (a, b)) in y.to_f32().iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "y[{i}] = {a}, loops give {b}");
        }
    }

    #[test]
    fn heads_must_divide_the_width() {
        let bad = EncoderLayerShape { heads: 5, ..SMALL };
        assert_eq!(
            encoder_layer(&bad).unwrap_err().to_string(),
            "invalid graph: encoder layer: d_model 8 cannot be split into 5 heads"
        );
        let none = EncoderLayerShape { heads: 0, ..SMALL };
        assert!(encoder_layer(&none).is_err());
    }
}
