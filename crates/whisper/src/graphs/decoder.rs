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

use crate::error::{Error, Result};
use crate::graphs::encoder::{cross_key, cross_type, cross_value};
use crate::graphs::groups::{group_cross_attention, group_key, group_value};
use crate::graphs::layers::{Builder, MASKED, ModelWeights, SELF_QKV, f32_type};
use crate::graphs::select::{
    Bans, LATEST, PREVIOUS, SCORES, Selection, beam_candidates, masked_with_lse, select_token,
};
use crate::load::names::{EMBED_TOKENS, PROJ_OUT, decoder_layer};
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
/// [`PREVIOUS`](crate::graphs::select::PREVIOUS).
pub const STEP_TOKEN: &str = "step_token";

/// The persistent buffer of decoder layer `layer`'s self-attention keys `[H, n_text_ctx, dh]`.
pub fn self_key(layer: usize) -> String {
    format!("self_k.{layer}")
}

/// The persistent buffer of decoder layer `layer`'s self-attention values.
pub fn self_value(layer: usize) -> String {
    format!("self_v.{layer}")
}

/// The persistent buffer of decoder layer `layer`'s beam self-attention keys
/// `[B·H, n_text_ctx, dh]`.
pub fn beam_key(layer: usize) -> String {
    format!("beam_k.{layer}")
}

/// The persistent buffer of decoder layer `layer`'s beam self-attention values.
pub fn beam_value(layer: usize) -> String {
    format!("beam_v.{layer}")
}

/// Beam step input: for each row b·H + h of the beam caches, the row it continues:
/// `parent(b)·H + h` (u32 `[B·H]`).
pub const PARENT_ROWS: &str = "parent_rows";

/// What a decoder graph is built for.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderSpec {
    /// Token positions per run: 1 for the step graph, the padded prompt length for prefill.
    pub positions: usize,
    /// The no-speech token, whose probability prefill graphs output.
    pub no_speech: Option<u32>,
    pub selection: Selection,
    /// Prefill graphs: the number of first beam candidates to output (0 for none).
    pub candidates: usize,
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

    let mask = position_mask(&mut b, positions, s)?;

    for i in 0..c.decoder_layers {
        x = decoder_block(&mut b, model, i, x, mask, offset, Rows::Single, &[])?.0;
    }
    let x = b.layer_norm("model.decoder.layer_norm", x)?;

    let proj = output_projection(&mut b, model)?;
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
    let masked = select_token(&mut b, logits, &spec.selection, bans)?;
    if s > 1 && spec.candidates > 0 {
        beam_candidates(&mut b, masked, None, spec.candidates)?;
    }
    Ok(b.g)
}

/// Builds the beam step graph of `model` (unoptimised): `beams` sequences' next tokens at
/// runtime position `offset`, each with its own self-attention cache ([`beam_key`],
/// [`beam_value`]: the beams' rows of every head, `[B·H, n_text_ctx, dh]`), reordered first
/// by [`PARENT_ROWS`] so that each beam continues the cache of the beam it extends. The
/// cross-attention reads the window's keys once for all beams (the beams are its query
/// rows). Outputs the best `candidates` continuations over all beams
/// ([`crate::graphs::select::beam_candidates`]).
pub fn beam_step_graph(model: &ModelWeights, beams: usize, candidates: usize, selection: &Selection) -> Result<Graph> {
    let c = model.config.clone();
    if beams < 2 || candidates == 0 || candidates > beams * c.n_vocab {
        return Err(Error::bad_argument(format!(
            "a beam step needs 2 or more beams and candidates, not {beams} and {candidates}"
        )));
    }
    let mut b = Builder::new(&format!("whisper_beam_step_{beams}"), model);
    let tokens = b.g.input(TOKENS, TensorType::new(DType::U32, [beams]))?;
    let parent_rows = b.g.input(PARENT_ROWS, TensorType::new(DType::U32, [beams * c.decoder_heads]))?;
    let previous = b.g.input(PREVIOUS, TensorType::new(DType::U32, [beams]))?;
    let latest = b.g.input(LATEST, f32_type(&[beams]))?;
    let scores = b.g.input(SCORES, f32_type(&[beams, 1]))?;
    let offset = b.g.scalar(OFFSET);
    let offset_value = b.g.read_scalar(offset)?;

    let embed = b.param(EMBED_TOKENS)?;
    let x = b.g.gather(embed, tokens)?;
    let x = b.widen(x)?;
    let position = b.g.reshape(offset_value, [1])?;
    let pos_table = b.param("model.decoder.embed_positions.weight")?;
    let pos = b.g.gather(pos_table, position)?;
    let mut x = b.g.add(x, pos)?;
    let mask = position_mask(&mut b, position, 1)?;
    for i in 0..c.decoder_layers {
        x = decoder_block(&mut b, model, i, x, mask, offset, Rows::Beams { parent_rows }, &[])?.0;
    }
    let x = b.layer_norm("model.decoder.layer_norm", x)?;
    let proj = output_projection(&mut b, model)?;
    let logits = b.g.matmul_t(x, proj)?;
    let logits = b.widen(logits)?;
    let column = |b: &mut Builder, v: NodeId| b.g.reshape(v, [beams, 1]);
    let bans = Bans::History {
        last: column(&mut b, tokens)?,
        previous: column(&mut b, previous)?,
        latest: column(&mut b, latest)?,
    };
    let masked = masked_with_lse(&mut b, logits, selection, bans)?;
    beam_candidates(&mut b, masked, Some(scores), candidates)?;
    Ok(b.g)
}

/// Builds the graph that starts `beams` beams from a prefill: every beam's self-attention
/// caches become copies of the prefill's ([`self_key`], [`self_value`]).
pub fn beam_expand_graph(model: &ModelWeights, beams: usize) -> Result<Graph> {
    let c = &model.config;
    let mut b = Builder::new(&format!("whisper_beam_expand_{beams}"), model);
    let heads = c.decoder_heads;
    // Row b·H + h of a beam cache is head h of beam b: every beam's rows are the prefill's.
    let rows: Vec<u32> = (0..beams).flat_map(|_| 0..heads as u32).collect();
    let rows = b.g.constant(Tensor::u32([beams * heads], rows)?);
    for i in 0..c.decoder_layers {
        for (single, beam) in [(self_key(i), beam_key(i)), (self_value(i), beam_value(i))] {
            let from = b.g.state(&single, self_cache_type(model))?;
            let copies = b.g.gather(from, rows)?;
            let to = b.g.state(&beam, beam_cache_type(model, beams))?;
            b.g.write_state(to, copies)?;
        }
    }
    Ok(b.g)
}

/// The type of a one-sequence self-attention cache `[H, n_text_ctx, dh]`.
pub(crate) fn self_cache_type(model: &ModelWeights) -> TensorType {
    let c = &model.config;
    f32_type(&[c.decoder_heads, c.n_text_ctx, c.decoder_head_dim()])
}

/// The type of a beam self-attention cache `[B·H, n_text_ctx, dh]`.
pub(crate) fn beam_cache_type(model: &ModelWeights, beams: usize) -> TensorType {
    let c = &model.config;
    f32_type(&[beams * c.decoder_heads, c.n_text_ctx, c.decoder_head_dim()])
}

/// The weight that turns hidden states into logits: the output projection where the model
/// has one, else the token embedding (tied).
pub(crate) fn output_projection(b: &mut Builder, model: &ModelWeights) -> Result<NodeId> {
    let proj = if model.weights.contains_key(PROJ_OUT) { PROJ_OUT } else { EMBED_TOKENS };
    b.param(proj)
}

/// The self-attention mask `[S, n_text_ctx]` of queries at `positions [S]` (u32): query row
/// i sits at position offset + i and sees cache slots j <= offset + i. Compared as f32 (exact
/// for any context), so the comparison and the select fuse into one kernel.
pub(crate) fn position_mask(b: &mut Builder, positions: NodeId, s: usize) -> Result<NodeId> {
    let ctx = b.config().n_text_ctx;
    let slots = (0..ctx).map(|j| j as f32).collect();
    let slots = b.g.constant(Tensor::f32([1, ctx], slots)?);
    let query_pos = b.g.reshape(positions, [s, 1])?;
    let query_pos = b.widen(query_pos)?;
    let visible = b.g.compare(CmpKind::Le, slots, query_pos)?;
    let zero = b.f32_const(0.0);
    let masked = b.f32_const(MASKED);
    Ok(b.g.select(visible, zero, masked)?)
}

/// Whose tokens a decoder graph's rows are, which decides the caches its layers use.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rows {
    /// The positions of one sequence ([`self_key`], the window's cross-attention buffers).
    Single,
    /// One token per beam of one window: beam caches ([`beam_key`]) reordered by
    /// `parent_rows`, the window's cross-attention buffers.
    Beams { parent_rows: NodeId },
    /// One token per beam of `groups` windows, each group's beams consecutive: group caches
    /// ([`group_key`]) reordered by `parent_rows`, and each group's own
    /// cross-attention buffers ([`crate::graphs::groups::group_cross_key`]).
    Groups { parent_rows: NodeId, groups: usize },
}

/// One pre-norm decoder layer: masked self-attention over the cache, cross-attention over
/// the window, MLP; each with a residual. Also returns the cross-attention scores
/// (`q kᵀ · scale`, before the softmax) of the layer's heads listed in `score_heads`, each
/// `[1, S, n_audio_ctx]`: what word alignment reads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decoder_block(
    b: &mut Builder,
    model: &ModelWeights,
    i: usize,
    x: NodeId,
    mask: NodeId,
    offset: susurrus_core::ir::ScalarId,
    rows: Rows,
    score_heads: &[usize],
) -> Result<(NodeId, Vec<NodeId>)> {
    let c = &model.config;
    let heads = c.decoder_heads;

    let h = b.layer_norm(&decoder_layer(i, "self_attn_layer_norm"), x)?;
    // q, k and v from one product (`ModelWeights`'s fused projection): in a step, slices of
    // one row, which the planner keeps as views of it.
    let qkv = b.linear(&decoder_layer(i, SELF_QKV), h, true)?;
    let (last, d) = (b.g.ty(qkv).shape.rank() - 1, c.d_model);
    let (q, k, v) = (b.g.slice(qkv, last, 0, d)?, b.g.slice(qkv, last, d, 2 * d)?, b.g.slice(qkv, last, 2 * d, 3 * d)?);
    let cached = match rows {
        Rows::Single => None,
        Rows::Beams { parent_rows } => Some((parent_rows, beam_key(i), beam_value(i))),
        Rows::Groups { parent_rows, .. } => Some((parent_rows, group_key(i), group_value(i))),
    };
    let a = match cached {
        None => {
            let (q, k, v) = (b.split_heads(q, heads)?, b.split_heads(k, heads)?, b.split_heads(v, heads)?);
            let k_cache = b.g.state(&self_key(i), self_cache_type(model))?;
            let k_cache = b.g.kv_write(k_cache, k, 1, offset)?;
            let v_cache = b.g.state(&self_value(i), self_cache_type(model))?;
            let v_cache = b.g.kv_write(v_cache, v, 1, offset)?;
            let a = b.attention(q, k_cache, v_cache, Some(mask))?;
            b.merge_heads(a)?
        }
        Some((parent_rows, key, value)) => {
            // One token per beam: each beam's heads are rows b·H + h of its caches, one
            // query each, with no permute.
            let beams = b.g.ty(q).shape.dims()[0];
            let rows = |b: &mut Builder, v: NodeId| b.g.reshape(v, [beams * heads, 1, c.decoder_head_dim()]);
            let (q, k, v) = (rows(b, q)?, rows(b, k)?, rows(b, v)?);
            let mut caches = Vec::with_capacity(2);
            for (name, value) in [(key, k), (value, v)] {
                let cache = b.g.state(&name, beam_cache_type(model, beams))?;
                let reordered = b.g.gather(cache, parent_rows)?;
                let cache = b.g.write_state(cache, reordered)?;
                caches.push(b.g.kv_write(cache, value, 1, offset)?);
            }
            let a = b.attention(q, caches[0], caches[1], Some(mask))?;
            b.g.reshape(a, [beams, d])?
        }
    };
    let a = b.linear(&decoder_layer(i, "self_attn.out_proj"), a, true)?;
    let x = b.g.add(x, a)?;

    let h = b.layer_norm(&decoder_layer(i, "encoder_attn_layer_norm"), x)?;
    let q = b.linear(&decoder_layer(i, "encoder_attn.q_proj"), h, true)?;
    let (a, scores) = match rows {
        Rows::Groups { groups, .. } => (group_cross_attention(b, model, i, q, groups)?, Vec::new()),
        Rows::Single | Rows::Beams { .. } => {
            let q = b.split_heads(q, heads)?;
            let k = b.g.state(&cross_key(i), cross_type(model))?;
            let v = b.g.state(&cross_value(i), cross_type(model))?;
            let mut scores = Vec::with_capacity(score_heads.len());
            for &h in score_heads {
                let (qh, kh) = (b.g.slice(q, 0, h, h + 1)?, b.g.slice(k, 0, h, h + 1)?);
                let product = b.g.matmul_t(qh, kh)?;
                let scale = b.f32_const(1.0 / (c.decoder_head_dim() as f32).sqrt());
                scores.push(b.g.mul(product, scale)?);
            }
            let a = b.attention(q, k, v, None)?;
            (b.merge_heads(a)?, scores)
        }
    };
    let a = b.linear(&decoder_layer(i, "encoder_attn.out_proj"), a, true)?;
    let x = b.g.add(x, a)?;

    let h = b.layer_norm(&decoder_layer(i, "final_layer_norm"), x)?;
    let m = b.mlp(&format!("model.decoder.layers.{i}"), h)?;
    Ok((b.g.add(x, m)?, scores))
}
