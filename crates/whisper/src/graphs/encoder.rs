//! The encoder graph: one 30 s window of log-mel frames in, the encoder output and every
//! decoder layer's cross-attention keys and values out.
//!
//! `mel [n_mels, 2·n_audio_ctx]` → conv1 (k3, pad 1) → GELU → conv2 (k3, stride 2, pad 1) →
//! GELU → `[n_audio_ctx, d]` + positions → pre-norm layers → final layer norm. The cross-
//! attention keys and values depend only on the encoder output, so they are computed here,
//! once per window, and written into persistent buffers ([`cross_key`], [`cross_value`])
//! that the decoder graphs of the same program read at every step.

use crate::error::Result;
use crate::graphs::layers::{Builder, ModelWeights, f32_type};
use crate::load::names::{decoder_layer, encoder_layer};
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
    let x = encoder_stack(&mut b, mel, 1)?;
    b.g.output(ENCODER_OUT, x)?;
    for i in 0..c.decoder_layers {
        let (k, v) = cross_key_value(&mut b, i, x, 1)?;
        let k_buf = b.g.state(&cross_key(i), cross_type(model))?;
        b.g.write_state(k_buf, k)?;
        let v_buf = b.g.state(&cross_value(i), cross_type(model))?;
        b.g.write_state(v_buf, v)?;
    }
    Ok(b.g)
}

/// The encoder from `mel` (`[n_mels, n_frames]`, or `[windows, n_mels, n_frames]` for
/// several) to the final layer norm: `[windows · n_audio_ctx, d_model]`, each window's rows
/// consecutive. Windows never attend to each other; batching them only makes every product
/// one of more rows, which a GPU runs at once.
pub(crate) fn encoder_stack(b: &mut Builder, mel: NodeId, windows: usize) -> Result<NodeId> {
    let c = b.config();
    let w1 = b.param("model.encoder.conv1.weight")?;
    let b1 = b.param("model.encoder.conv1.bias")?;
    let x = b.g.conv1d(mel, w1, Some(b1), 1, 1, 1)?;
    let x = b.g.gelu(x)?;
    let w2 = b.param("model.encoder.conv2.weight")?;
    let b2 = b.param("model.encoder.conv2.bias")?;
    let x = b.g.conv1d(x, w2, Some(b2), 2, 1, 1)?;
    let x = b.g.gelu(x)?;
    let x = match windows {
        1 => b.g.permute(x, &[1, 0])?,
        _ => b.g.permute(x, &[0, 2, 1])?,
    };
    let positions = b.param("model.encoder.embed_positions.weight")?;
    let mut x = b.g.add(x, positions)?;
    if windows > 1 {
        x = b.g.reshape(x, [windows * c.n_audio_ctx, c.d_model])?;
    }
    for i in 0..c.encoder_layers {
        x = encoder_block(b, i, x, windows)?;
    }
    b.layer_norm("model.encoder.layer_norm", x)
}

/// Decoder layer `i`'s cross-attention keys and values of the encoder output `x`
/// (`[windows · n_audio_ctx, d_model]`): each `[windows · H, n_audio_ctx, dh]`, window `w`'s
/// heads at rows `w·H..(w+1)·H`.
pub(crate) fn cross_key_value(b: &mut Builder, i: usize, x: NodeId, windows: usize) -> Result<(NodeId, NodeId)> {
    let heads = b.config().decoder_heads;
    let k = b.linear(&decoder_layer(i, "encoder_attn.k_proj"), x, false)?;
    let k = window_heads(b, k, windows, heads)?;
    let v = b.linear(&decoder_layer(i, "encoder_attn.v_proj"), x, true)?;
    let v = window_heads(b, v, windows, heads)?;
    Ok((k, v))
}

/// `[windows · S, heads · dh] -> [windows · heads, S, dh]`: each window's heads, so that
/// attention runs within windows.
fn window_heads(b: &mut Builder, x: NodeId, windows: usize, heads: usize) -> Result<NodeId> {
    if windows == 1 {
        return b.split_heads(x, heads);
    }
    let dims = b.g.ty(x).shape.dims().to_vec();
    let (s, dh) = (dims[0] / windows, dims[1] / heads);
    let x = b.g.reshape(x, [windows, s, heads, dh])?;
    let x = b.g.permute(x, &[0, 2, 1, 3])?;
    Ok(b.g.reshape(x, [windows * heads, s, dh])?)
}

/// `[windows · heads, S, dh] -> [windows · S, heads · dh]`, the inverse of [`window_heads`].
fn merge_window_heads(b: &mut Builder, x: NodeId, windows: usize) -> Result<NodeId> {
    if windows == 1 {
        return b.merge_heads(x);
    }
    let dims = b.g.ty(x).shape.dims().to_vec();
    let (heads, s, dh) = (dims[0] / windows, dims[1], dims[2]);
    let x = b.g.reshape(x, [windows, heads, s, dh])?;
    let x = b.g.permute(x, &[0, 2, 1, 3])?;
    Ok(b.g.reshape(x, [windows * s, heads * dh])?)
}

/// One pre-norm encoder layer: self-attention then MLP, each with a residual.
fn encoder_block(b: &mut Builder, i: usize, x: NodeId, windows: usize) -> Result<NodeId> {
    let heads = b.config().encoder_heads;
    let h = b.layer_norm(&encoder_layer(i, "self_attn_layer_norm"), x)?;
    let q = b.linear(&encoder_layer(i, "self_attn.q_proj"), h, true)?;
    let k = b.linear(&encoder_layer(i, "self_attn.k_proj"), h, false)?;
    let v = b.linear(&encoder_layer(i, "self_attn.v_proj"), h, true)?;
    let q = window_heads(b, q, windows, heads)?;
    let k = window_heads(b, k, windows, heads)?;
    let v = window_heads(b, v, windows, heads)?;
    let a = b.attention(q, k, v, None)?;
    let a = merge_window_heads(b, a, windows)?;
    let a = b.linear(&encoder_layer(i, "self_attn.out_proj"), a, true)?;
    let x = b.g.add(x, a)?;
    let h = b.layer_norm(&encoder_layer(i, "final_layer_norm"), x)?;
    let m = b.mlp(&format!("model.encoder.layers.{i}"), h)?;
    Ok(b.g.add(x, m)?)
}
