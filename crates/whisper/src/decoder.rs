//! The decoder graphs: `S` token positions in, the next token (chosen on the device) out.
//!
//! One builder makes both kinds the decoding loop runs:
//! - the **step** graph (`S = 1`): one token at runtime position `offset`, compiled once and
//!   run for every generated token; its token selection applies the timestamp rules from the
//!   tokens so far on the device ([`Bans::History`]), so one step's outputs are all the next
//!   step's changing inputs: the chosen token, the step's own token (the next one's previous)
//!   and the latest timestamp;
//! - **prefill** graphs (`S` > 1): a whole prompt at once from position 0, padded to `S`;
//!   runtime scalar `last` says which row is the prompt's last token (whose logits choose the
//!   first generated token) and `sot` which row holds `<|startoftranscript|>` (whose logits
//!   give the no-speech probability, output [`NO_SPEECH_PROB`]).
//!
//! Each layer appends its keys and values to its self-attention cache, a persistent
//! `[H, n_text_ctx, dh]` buffer, at `offset`, and attends over the whole cache with a mask
//! that hides positions after each query's own (rows of padding write keys past the prompt,
//! which the next steps overwrite before any query can see them). Cross-attention reads the
//! keys and values the encoder graph wrote for the current window.

use crate::encoder::{cross_key, cross_type, cross_value};
use crate::error::{Error, Result};
use crate::layers::{Builder, MASKED, ModelWeights, SELF_QKV, f32_type};
use crate::select::{Bans, LATEST, PREVIOUS, Selection, select_token};
use crate::weights::{EMBED_TOKENS, PROJ_OUT, decoder_layer};
use susurrus_core::ir::{DType, Graph, NodeId, TensorType};
use susurrus_core::ops::CmpKind;
use susurrus_core::tensor::Tensor;

/// Input: the token ids `[S]` (u32).
pub const TOKENS: &str = "tokens";
/// Runtime scalar: the position of the first token.
pub const OFFSET: &str = "offset";
/// Runtime scalar of prefill graphs: the row of the prompt's last token.
pub const LAST: &str = "last";
/// Runtime scalar of prefill graphs: the row of `<|startoftranscript|>`.
pub const SOT: &str = "sot";
/// Output of prefill graphs: the probability of the no-speech token at the `sot` row, `[1, 1]`.
pub const NO_SPEECH_PROB: &str = "no_speech_prob";
/// Output of the step graph: its input token, which is the next step's
/// [`PREVIOUS`](crate::select::PREVIOUS).
pub const STEP_TOKEN: &str = "step_token";

/// The persistent buffer of decoder layer `layer`'s self-attention keys `[H, n_text_ctx, dh]`.
pub fn self_key(layer: usize) -> String {
    format!("self_k.{layer}")
}

/// The persistent buffer of decoder layer `layer`'s self-attention values.
pub fn self_value(layer: usize) -> String {
    format!("self_v.{layer}")
}

/// What a decoder graph is built for.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderSpec {
    /// Token positions per run: 1 for the step graph, the padded prompt length for prefill.
    pub positions: usize,
    /// The no-speech token, whose probability prefill graphs output.
    pub no_speech: Option<u32>,
    pub selection: Selection,
}

/// Builds a decoder graph of `model` (unoptimised).
pub fn decoder_graph(model: &ModelWeights, spec: &DecoderSpec) -> Result<Graph> {
    let c = model.config.clone();
    let s = spec.positions;
    if s == 0 || s > c.n_text_ctx {
        return Err(Error::bad_argument(format!("a decoder graph needs 1 to {} positions, not {s}", c.n_text_ctx)));
    }
    let name = if s == 1 { "whisper_decoder_step".to_string() } else { format!("whisper_prefill_{s}") };
    let mut b = Builder::new(&name, model);
    let tokens = b.g.input(TOKENS, TensorType::new(DType::U32, [s]))?;
    let offset = b.g.scalar(OFFSET);
    let offset_value = b.g.read_scalar(offset)?;

    let embed = b.param(EMBED_TOKENS)?;
    let x = b.g.gather(embed, tokens)?;
    let x = b.widen(x)?;
    // A step's one position is the offset itself: a view of the scalar, which kernels read in
    // place (no add to run).
    let positions = if s == 1 {
        b.g.reshape(offset_value, [1])?
    } else {
        let rows = b.iota(&[s])?;
        b.g.add(rows, offset_value)?
    };
    let pos_table = b.param("model.decoder.embed_positions.weight")?;
    let pos = b.g.gather(pos_table, positions)?;
    let mut x = b.g.add(x, pos)?;

    // Query row i sits at position offset + i and sees cache slots j <= offset + i. Compared
    // as f32 (exact for any context), so the comparison and the select fuse into one kernel.
    let slots = (0..c.n_text_ctx).map(|j| j as f32).collect();
    let slots = b.g.constant(Tensor::f32([1, c.n_text_ctx], slots)?);
    let query_pos = b.g.reshape(positions, [s, 1])?;
    let query_pos = b.widen(query_pos)?;
    let visible = b.g.compare(CmpKind::Le, slots, query_pos)?;
    let zero = b.f32_const(0.0);
    let masked = b.f32_const(MASKED);
    let mask = b.g.select(visible, zero, masked)?;

    for i in 0..c.decoder_layers {
        x = decoder_block(&mut b, model, i, x, mask, offset)?;
    }
    let x = b.layer_norm("model.decoder.layer_norm", x)?;

    let proj = if model.weights.contains_key(PROJ_OUT) { PROJ_OUT } else { EMBED_TOKENS };
    let proj = b.param(proj)?;
    let logits_of = |b: &mut Builder, row: NodeId| -> Result<NodeId> {
        let logits = b.g.matmul_t(row, proj)?;
        b.widen(logits)
    };
    let last_row = if s == 1 {
        x
    } else {
        let last = b.g.scalar(LAST);
        let last = b.g.read_scalar(last)?;
        let last = b.g.reshape(last, [1])?;
        b.g.gather(x, last)?
    };
    if let Some(no_speech) = spec.no_speech {
        if s == 1 {
            return Err(Error::bad_argument("the no-speech probability comes from prefill graphs only"));
        }
        let sot = b.g.scalar(SOT);
        let sot = b.g.read_scalar(sot)?;
        let sot = b.g.reshape(sot, [1])?;
        let sot_row = b.g.gather(x, sot)?;
        let logits = logits_of(&mut b, sot_row)?;
        let probs = b.g.softmax(logits)?;
        let id = no_speech as usize;
        if id >= c.n_vocab {
            return Err(Error::bad_argument(format!("no-speech token {id} is outside the vocabulary")));
        }
        let p = b.g.slice(probs, 1, id, id + 1)?;
        b.g.output(NO_SPEECH_PROB, p)?;
    }
    let logits = logits_of(&mut b, last_row)?;
    let bans = if s == 1 {
        let previous = b.g.input(PREVIOUS, TensorType::new(DType::U32, [1]))?;
        let latest = b.g.input(LATEST, f32_type(&[1]))?;
        b.g.output(STEP_TOKEN, tokens)?;
        Bans::History { last: tokens, previous, latest }
    } else {
        Bans::First
    };
    select_token(&mut b, logits, &spec.selection, bans)?;
    Ok(b.g)
}

/// One pre-norm decoder layer: masked self-attention over the cache, cross-attention over
/// the window, MLP; each with a residual.
fn decoder_block(
    b: &mut Builder,
    model: &ModelWeights,
    i: usize,
    x: NodeId,
    mask: NodeId,
    offset: susurrus_core::ir::ScalarId,
) -> Result<NodeId> {
    let c = &model.config;
    let heads = c.decoder_heads;
    let cache = f32_type(&[heads, c.n_text_ctx, c.decoder_head_dim()]);

    let h = b.layer_norm(&decoder_layer(i, "self_attn_layer_norm"), x)?;
    // q, k and v from one product (`ModelWeights`'s fused projection): in a step, slices of
    // one row, which the planner keeps as views of it.
    let qkv = b.linear(&decoder_layer(i, SELF_QKV), h, true)?;
    let (last, d) = (b.g.ty(qkv).shape.rank() - 1, c.d_model);
    let (q, k, v) = (b.g.slice(qkv, last, 0, d)?, b.g.slice(qkv, last, d, 2 * d)?, b.g.slice(qkv, last, 2 * d, 3 * d)?);
    let (q, k, v) = (b.split_heads(q, heads)?, b.split_heads(k, heads)?, b.split_heads(v, heads)?);
    let k_cache = b.g.state(&self_key(i), cache.clone())?;
    let k_cache = b.g.kv_write(k_cache, k, 1, offset)?;
    let v_cache = b.g.state(&self_value(i), cache)?;
    let v_cache = b.g.kv_write(v_cache, v, 1, offset)?;
    let a = b.attention(q, k_cache, v_cache, Some(mask))?;
    let a = b.merge_heads(a)?;
    let a = b.linear(&decoder_layer(i, "self_attn.out_proj"), a, true)?;
    let x = b.g.add(x, a)?;

    let h = b.layer_norm(&decoder_layer(i, "encoder_attn_layer_norm"), x)?;
    let q = b.linear(&decoder_layer(i, "encoder_attn.q_proj"), h, true)?;
    let q = b.split_heads(q, heads)?;
    let k = b.g.state(&cross_key(i), cross_type(model))?;
    let v = b.g.state(&cross_value(i), cross_type(model))?;
    let a = b.attention(q, k, v, None)?;
    let a = b.merge_heads(a)?;
    let a = b.linear(&decoder_layer(i, "encoder_attn.out_proj"), a, true)?;
    let x = b.g.add(x, a)?;

    let h = b.layer_norm(&decoder_layer(i, "final_layer_norm"), x)?;
    let m = b.mlp(&format!("model.decoder.layers.{i}"), h)?;
    Ok(b.g.add(x, m)?)
}
