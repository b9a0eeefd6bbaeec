//! The building blocks every Whisper graph shares (linear layers, layer norms, multi-head
//! attention, the MLP), written with the IR builder only.
//!
//! Weights are graph params named as in [`super::weights`]; their dtypes come from the
//! model ([`ModelWeights`]), so an f16 model builds f16 params that backends keep in f16.
//! Attention is written out as `softmax(q kᵀ · scale + mask) v`: the attention fusion pass
//! turns it into one op, and a backend without that pass still computes the same thing.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::load::config::WhisperConfig;
use crate::load::names::decoder_layer;
use crate::load::weights::WhisperWeights;
use susurrus_core::exec::Weights;
use susurrus_core::ir::{DType, Graph, NodeId, Shape, TensorType};
use susurrus_core::tensor::Tensor;

/// A large additive mask value: exp of it underflows to exactly 0 next to any real score,
/// while it stays finite (a literal infinity is not valid WGSL, and -inf - -inf is NaN).
pub const MASKED: f32 = -1e30;

/// The weights of a model as the graphs take them: matrices (linear, convolution and
/// embedding weights) in the dtype the file stored them, vectors and position tables in f32
/// (they are added to f32 activations, and are small). Each decoder layer's self-attention
/// q, k and v projections are one matrix ([`SELF_QKV`]): a decoder step computes them with
/// one matrix-vector product, whose three parts the planner keeps as views.
#[derive(Clone, Debug)]
pub struct ModelWeights {
    pub config: WhisperConfig,
    pub weights: Weights,
}

impl ModelWeights {
    pub fn new(model: &WhisperWeights) -> Result<Self> {
        let mut weights = Weights::new();
        for (name, t) in model.tensors() {
            let small = t.shape().rank() == 1 || name.ends_with("embed_positions.weight");
            let t = if small && t.dtype() != DType::F32 {
                Tensor::from_f32(DType::F32, t.shape().clone(), t.to_f32())?
            } else {
                t.clone()
            };
            weights.insert(name.clone(), t);
        }
        let config = model.config().clone();
        for i in 0..config.decoder_layers {
            fuse_self_qkv(&mut weights, i, config.d_model)?;
        }
        Ok(ModelWeights { config, weights })
    }

    /// The type of weight `name`, for declaring it as a param.
    pub fn ty(&self, name: &str) -> Result<TensorType> {
        self.weights
            .get(name)
            .map(Tensor::ty)
            .ok_or_else(|| Error::bad_argument(format!("the Whisper model has no tensor {name}")))
    }

    /// The weights `g` declares as params (what a backend needs to compile `g`).
    pub fn for_graphs<'a>(&self, graphs: impl IntoIterator<Item = &'a Graph>) -> Weights {
        let mut out = HashMap::new();
        for g in graphs {
            for node in g.nodes() {
                if let susurrus_core::ops::Op::Param(p) = &node.op
                    && let Some(t) = self.weights.get(&p.name)
                {
                    out.insert(p.name.clone(), t.clone());
                }
            }
        }
        out
    }
}

/// The fused self-attention projection of a decoder layer (`{SELF_QKV}.weight`, the rows of
/// q, k and v stacked, and `{SELF_QKV}.bias`, k's part zero), under `decoder_layer(i, ..)`.
pub const SELF_QKV: &str = "self_attn.qkv_proj";

/// Replaces decoder layer `i`'s q, k and v projections in `weights` by [`SELF_QKV`]. The
/// products are the same numbers: each output column is still one weight row's dot product
/// with the input, and k's zero bias adds nothing.
fn fuse_self_qkv(weights: &mut Weights, i: usize, d_model: usize) -> Result<()> {
    let mut take = |suffix: &str| {
        let name = decoder_layer(i, &format!("self_attn.{suffix}"));
        weights.remove(&name).ok_or_else(|| Error::bad_argument(format!("the Whisper model has no tensor {name}")))
    };
    let (q, k, v) = (take("q_proj.weight")?, take("k_proj.weight")?, take("v_proj.weight")?);
    let (q_bias, v_bias) = (take("q_proj.bias")?, take("v_proj.bias")?);
    let k_bias = Tensor::zeros(&TensorType::new(q_bias.dtype(), [d_model]));
    let weight = Tensor::concat_rows(&[&q, &k, &v])?;
    let bias = Tensor::concat_rows(&[&q_bias, &k_bias, &v_bias])?;
    weights.insert(decoder_layer(i, &format!("{SELF_QKV}.weight")), weight);
    weights.insert(decoder_layer(i, &format!("{SELF_QKV}.bias")), bias);
    Ok(())
}

/// A graph under construction with the model's weights at hand.
pub(crate) struct Builder<'m> {
    pub g: Graph,
    pub model: &'m ModelWeights,
    /// Params declared so far (a graph declares each weight once, e.g. the embedding that
    /// is also the output projection).
    params: HashMap<String, NodeId>,
}

pub(crate) fn f32_type(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims)
}

impl<'m> Builder<'m> {
    pub fn new(name: &str, model: &'m ModelWeights) -> Self {
        Builder { g: Graph::new(name), model, params: HashMap::new() }
    }

    pub fn config(&self) -> &'m WhisperConfig {
        &self.model.config
    }

    /// The weight `name` as a param of the model's type for it.
    pub fn param(&mut self, name: &str) -> Result<NodeId> {
        if let Some(&id) = self.params.get(name) {
            return Ok(id);
        }
        let ty = self.model.ty(name)?;
        let id = self.g.param(name, ty)?;
        self.params.insert(name.to_string(), id);
        Ok(id)
    }

    /// `x Wᵀ + b` for `{prefix}.weight [out, in]` and, when `bias`, `{prefix}.bias [out]`.
    pub fn linear(&mut self, prefix: &str, x: NodeId, bias: bool) -> Result<NodeId> {
        let w = self.param(&format!("{prefix}.weight"))?;
        let y = self.g.matmul_t(x, w)?;
        if !bias {
            return Ok(y);
        }
        let b = self.param(&format!("{prefix}.bias"))?;
        Ok(self.g.add(y, b)?)
    }

    /// Layer norm over the last axis with `{prefix}.weight` and `{prefix}.bias`.
    pub fn layer_norm(&mut self, prefix: &str, x: NodeId) -> Result<NodeId> {
        let gamma = self.param(&format!("{prefix}.weight"))?;
        let beta = self.param(&format!("{prefix}.bias"))?;
        let eps = self.model.config.layer_norm_eps;
        Ok(self.g.layer_norm(x, gamma, beta, eps)?)
    }

    /// `[S, heads·dh] -> [heads, S, dh]`.
    pub fn split_heads(&mut self, x: NodeId, heads: usize) -> Result<NodeId> {
        let dims = self.g.ty(x).shape.dims().to_vec();
        let (s, d) = (dims[0], dims[1]);
        let r = self.g.reshape(x, [s, heads, d / heads])?;
        Ok(self.g.permute(r, &[1, 0, 2])?)
    }

    /// `[heads, S, dh] -> [S, heads·dh]`.
    pub fn merge_heads(&mut self, x: NodeId) -> Result<NodeId> {
        let dims = self.g.ty(x).shape.dims().to_vec();
        let (h, s, dh) = (dims[0], dims[1], dims[2]);
        let p = self.g.permute(x, &[1, 0, 2])?;
        Ok(self.g.reshape(p, [s, h * dh])?)
    }

    /// `softmax(q kᵀ / sqrt(dh) + mask) v` per head, for `q [H, Sq, dh]`, `k`/`v [H, Sk, dh]`
    /// and an additive `mask` broadcasting to `[H, Sq, Sk]`.
    pub fn attention(&mut self, q: NodeId, k: NodeId, v: NodeId, mask: Option<NodeId>) -> Result<NodeId> {
        let dh = *self.g.ty(q).shape.dims().last().unwrap_or(&1);
        let scores = self.g.matmul_t(q, k)?;
        let scale = self.g.constant(Tensor::scalar_f32(1.0 / (dh as f32).sqrt()));
        let mut scores = self.g.mul(scores, scale)?;
        if let Some(mask) = mask {
            scores = self.g.add(scores, mask)?;
        }
        let probs = self.g.softmax(scores)?;
        Ok(self.g.matmul(probs, v)?)
    }

    /// The feed-forward block `fc2(gelu(fc1(x)))` of layer `prefix`.
    pub fn mlp(&mut self, prefix: &str, x: NodeId) -> Result<NodeId> {
        let h = self.linear(&format!("{prefix}.fc1"), x, true)?;
        let h = self.g.gelu(h)?;
        self.linear(&format!("{prefix}.fc2"), h, true)
    }

    /// A u32 constant `[0, 1, .., n-1]` of shape `dims` (whose product is `n`).
    pub fn iota(&mut self, dims: &[usize]) -> Result<NodeId> {
        let n = Shape::from(dims).numel();
        let t = Tensor::u32(dims, (0..n as u32).collect())?;
        Ok(self.g.constant(t))
    }

    /// A one-element f32 constant.
    pub fn f32_const(&mut self, v: f32) -> NodeId {
        self.g.constant(Tensor::scalar_f32(v))
    }

    /// `x` as f32 (no node when it already is).
    pub fn widen(&mut self, x: NodeId) -> Result<NodeId> {
        if self.g.ty(x).dtype == DType::F32 { Ok(x) } else { Ok(self.g.cast(x, DType::F32)?) }
    }
}

/// `parts` (at least one) concatenated along axis 0 in concats of at most [`CONCAT_GROUP`]
/// inputs, then those concatenated the same way: a kernel binds a bounded number of inputs
/// (tiny.en lists 8 alignment heads, large-v3 10; the VAD network's block has 32 steps).
pub(crate) fn concat_few_at_a_time(g: &mut Graph, parts: &[NodeId]) -> Result<NodeId> {
    let mut level = parts.to_vec();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(CONCAT_GROUP));
        for group in level.chunks(CONCAT_GROUP) {
            next.push(if group.len() == 1 { group[0] } else { g.concat(group, 0)? });
        }
        level = next;
    }
    level.first().copied().ok_or_else(|| Error::bad_argument("nothing to concatenate"))
}

/// Inputs of one concat.
const CONCAT_GROUP: usize = 4;
