//! The encoder graph: one 30 s window of log-mel frames in, the encoder output and every
//! decoder layer's cross-attention keys and values out.
//!
//! `mel [n_mels, 2·n_audio_ctx]` → conv1 (k3, pad 1) → GELU → conv2 (k3, stride 2, pad 1) →
//! GELU → `[n_audio_ctx, d]` + positions → pre-norm layers → final layer norm. The cross-
//! attention keys and values depend only on the encoder output, so they are computed here,
//! once per window, and written into persistent buffers ([`cross_key`], [`cross_value`])
//! that the decoder graphs of the same program read at every step.

use crate::error::Result;
use crate::layers::{Builder, ModelWeights, f32_type};
use crate::weights::{decoder_layer, encoder_layer};
use susurrus_core::ir::{Graph, NodeId, TensorType};

/// The graph's input: the window's log-mel `[n_mels, n_frames]`.
pub const MEL: &str = "mel";
/// The graph's output: the encoder output `[n_audio_ctx, d_model]` (read back only by tests).
pub const ENCODER_OUT: &str = "encoder_out";

/// The persistent buffer holding decoder layer `layer`'s cross-attention keys `[H, A, dh]`.
pub fn cross_key(layer: usize) -> String {
    format!("cross_k.{layer}")
}

/// The persistent buffer holding decoder layer `layer`'s cross-attention values `[H, A, dh]`.
pub fn cross_value(layer: usize) -> String {
    format!("cross_v.{layer}")
}

/// The type of every cross-attention key/value buffer.
pub fn cross_type(model: &ModelWeights) -> TensorType {
    let c = &model.config;
    f32_type(&[c.decoder_heads, c.n_audio_ctx, c.decoder_head_dim()])
}

/// Builds the encoder graph of `model` (unoptimised).
pub fn encoder_graph(model: &ModelWeights) -> Result<Graph> {
    let c = model.config.clone();
    let mut b = Builder::new("whisper_encoder", model);
    let mel = b.g.input(MEL, f32_type(&[c.n_mels, c.n_frames()]))?;

    let w1 = b.param("model.encoder.conv1.weight")?;
    let b1 = b.param("model.encoder.conv1.bias")?;
    let x = b.g.conv1d(mel, w1, Some(b1), 1, 1, 1)?;
    let x = b.g.gelu(x)?;
    let w2 = b.param("model.encoder.conv2.weight")?;
    let b2 = b.param("model.encoder.conv2.bias")?;
    let x = b.g.conv1d(x, w2, Some(b2), 2, 1, 1)?;
    let x = b.g.gelu(x)?;
    let x = b.g.permute(x, &[1, 0])?;
    let positions = b.param("model.encoder.embed_positions.weight")?;
    let mut x = b.g.add(x, positions)?;

    for i in 0..c.encoder_layers {
        x = encoder_block(&mut b, i, x)?;
    }
    let x = b.layer_norm("model.encoder.layer_norm", x)?;
    b.g.output(ENCODER_OUT, x)?;

    for i in 0..c.decoder_layers {
        let heads = c.decoder_heads;
        let k = b.linear(&decoder_layer(i, "encoder_attn.k_proj"), x, false)?;
        let k = b.split_heads(k, heads)?;
        let v = b.linear(&decoder_layer(i, "encoder_attn.v_proj"), x, true)?;
        let v = b.split_heads(v, heads)?;
        let k_buf = b.g.state(&cross_key(i), cross_type(model))?;
        b.g.write_state(k_buf, k)?;
        let v_buf = b.g.state(&cross_value(i), cross_type(model))?;
        b.g.write_state(v_buf, v)?;
    }
    Ok(b.g)
}

/// One pre-norm encoder layer: self-attention then MLP, each with a residual.
fn encoder_block(b: &mut Builder, i: usize, x: NodeId) -> Result<NodeId> {
    let heads = b.config().encoder_heads;
    let h = b.layer_norm(&encoder_layer(i, "self_attn_layer_norm"), x)?;
    let q = b.linear(&encoder_layer(i, "self_attn.q_proj"), h, true)?;
    let k = b.linear(&encoder_layer(i, "self_attn.k_proj"), h, false)?;
    let v = b.linear(&encoder_layer(i, "self_attn.v_proj"), h, true)?;
    let (q, k, v) = (b.split_heads(q, heads)?, b.split_heads(k, heads)?, b.split_heads(v, heads)?);
    let a = b.attention(q, k, v, None)?;
    let a = b.merge_heads(a)?;
    let a = b.linear(&encoder_layer(i, "self_attn.out_proj"), a, true)?;
    let x = b.g.add(x, a)?;
    let h = b.layer_norm(&encoder_layer(i, "final_layer_norm"), x)?;
    let m = b.mlp(&format!("model.encoder.layers.{i}"), h)?;
    Ok(b.g.add(x, m)?)
}
