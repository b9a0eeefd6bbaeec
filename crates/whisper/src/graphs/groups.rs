//! The graphs of beam search over several windows at once: `G` groups of `B` beams, each
//! group a window of its own (a transcription of its own, in a server), run as one batch.
//!
//! A window joins a free group after its prefill ([`group_join_graph`]): the prefill's
//! self-attention cache is copied into each of the group's beam rows and the window's
//! cross-attention keys and values into the group's rows of the group cross buffers. Then
//! every group step ([`group_step_graph`]) runs one token per beam of every group: the same
//! layers as the one-window beam step, with `G · B` rows, and the cross-attention of each
//! group reading its own window (its beams are the query rows of its heads).
//!
//! Windows that join together are encoded together ([`group_encoder_graph`]): the encoder
//! over `W` windows at once (attention within each), each window's cross keys and values
//! written straight into its group's rows; [`group_take_graph`] then copies one of them into
//! the one-window cross buffers for its prefill, and the join copies them back, unchanged.
//!
//! Groups join at different times, after prompts of different lengths, so their positions
//! differ; a step writes one cache slot for all rows (a runtime scalar, as `kv_write` takes
//! it). The caches are therefore rings: every step writes the slot after the last step's,
//! and a group's keys lie on the ring from the slot its prompt starts at
//! ([`SEEN_FROM`]) to the slot written now, [`SEEN_SPAN`] slots on. Whisper's positions are
//! embedded into the tokens, not read from cache slots, and attention sums over keys in any
//! order, so a key's slot does not matter, only which slots each row sees (the mask). A
//! window's prompt and tokens never fill more than the context, so a group's keys never
//! wrap onto its own. A group that has no window runs dead: it sees one slot, scores -inf,
//! and its candidates are not read.

use crate::error::{Error, Result};
use crate::graphs::decoder::{OFFSET, Rows, decoder_block};
use crate::graphs::decoder::{
    PARENT_ROWS, TOKENS, beam_cache_type, output_projection, self_cache_type, self_key, self_value,
};
use crate::graphs::encoder::{MEL, cross_key, cross_key_value, cross_type, cross_value, encoder_stack};
use crate::graphs::layers::{Builder, MASKED, ModelWeights, f32_type};
use crate::graphs::select::{Bans, CANDIDATE_SCORES, CANDIDATES, LATEST, PREVIOUS, SCORES, Selection, masked_with_lse};
use crate::load::names::EMBED_TOKENS;
use susurrus_core::ir::{DType, Graph, NodeId, TensorType};
use susurrus_core::ops::CmpKind;
use susurrus_core::tensor::Tensor;

/// Group step input: each row's position (its window's prompt length plus the steps so far),
/// u32 `[G·B]`.
pub const POSITIONS: &str = "positions";
/// Group step input: for each cache row (`(g·B + b)·H + h`), the ring slot its group's
/// keys start at, f32 `[G·B·H, 1]`.
pub const SEEN_FROM: &str = "seen_from";
/// Group step input: for each cache row, how many slots after [`SEEN_FROM`] the slot this
/// step writes is (its keys are the slots from there to it), f32 `[G·B·H, 1]`.
pub const SEEN_SPAN: &str = "seen_span";
/// Join input: for each row of one group's caches `(b·H + h)·ctx + slot`, the row of the
/// prefill cache (`h·ctx + position`) whose key goes there, u32 `[B·H·ctx]`.
pub const RING_ROWS: &str = "ring_rows";
/// Take input: the rows of the group cross buffers (`[G·H·n_audio_ctx, dh]`) of one group's
/// window, u32 `[H·n_audio_ctx]`.
pub const TAKE_ROWS: &str = "take_rows";
/// Join runtime scalar: the group's first cache row, `g·B·H`.
pub const CACHE_ROW: &str = "cache_row";
/// Join runtime scalar: the group's first cross-attention row, `g·H`.
pub const CROSS_ROW: &str = "cross_row";

/// Group encoder runtime scalar: the first row of the group cross buffers that window
/// `w`'s keys and values go to, `g·H` for its group `g`.
pub fn window_cross_row(w: usize) -> String {
    format!("cross_row.{w}")
}

/// The persistent buffer of decoder layer `layer`'s group self-attention keys
/// `[G·B·H, n_text_ctx, dh]`.
pub fn group_key(layer: usize) -> String {
    format!("group_k.{layer}")
}

/// The persistent buffer of decoder layer `layer`'s group self-attention values.
pub fn group_value(layer: usize) -> String {
    format!("group_v.{layer}")
}

/// The persistent buffer of decoder layer `layer`'s cross-attention keys of every group's
/// window, `[G·H, n_audio_ctx, dh]`.
pub fn group_cross_key(layer: usize) -> String {
    format!("group_cross_k.{layer}")
}

/// The persistent buffer of decoder layer `layer`'s cross-attention values of every group.
pub fn group_cross_value(layer: usize) -> String {
    format!("group_cross_v.{layer}")
}

fn group_cross_type(model: &ModelWeights, groups: usize) -> TensorType {
    let c = &model.config;
    f32_type(&[groups * c.decoder_heads, c.n_audio_ctx, c.decoder_head_dim()])
}

/// Cross-attention of `q [G·B, d]` (each group's beams consecutive) over each group's own
/// window: the beams of group g are the query rows of its heads `g·H + h`. Returns `[G·B, d]`.
pub(crate) fn group_cross_attention(
    b: &mut Builder,
    model: &ModelWeights,
    i: usize,
    q: NodeId,
    groups: usize,
) -> Result<NodeId> {
    let c = &model.config;
    let (heads, dh, d) = (c.decoder_heads, c.decoder_head_dim(), c.d_model);
    let rows = b.g.ty(q).shape.dims()[0];
    let beams = rows / groups;
    let q = b.g.reshape(q, [groups, beams, heads, dh])?;
    let q = b.g.permute(q, &[0, 2, 1, 3])?;
    let q = b.g.reshape(q, [groups * heads, beams, dh])?;
    let k = b.g.state(&group_cross_key(i), group_cross_type(model, groups))?;
    let v = b.g.state(&group_cross_value(i), group_cross_type(model, groups))?;
    let a = b.attention(q, k, v, None)?;
    let a = b.g.reshape(a, [groups, heads, beams, dh])?;
    let a = b.g.permute(a, &[0, 2, 1, 3])?;
    Ok(b.g.reshape(a, [rows, d])?)
}

/// The self-attention mask `[G·B·H, 1, n_text_ctx]` of the ring caches: row r sees the
/// slots `SEEN_FROM[r]` to `SEEN_FROM[r] + SEEN_SPAN[r]`, modulo the context.
fn ring_mask(b: &mut Builder, rows: usize) -> Result<NodeId> {
    let ctx = b.config().n_text_ctx;
    let from = b.g.input(SEEN_FROM, f32_type(&[rows, 1]))?;
    let span = b.g.input(SEEN_SPAN, f32_type(&[rows, 1]))?;
    let slots = b.g.constant(Tensor::f32([1, ctx], (0..ctx).map(|j| j as f32).collect())?);
    // The distance from the first seen slot, going round the ring: slot - from, plus ctx
    // where that is negative.
    let distance = b.g.sub(slots, from)?;
    let zero = b.f32_const(0.0);
    let behind = b.g.compare(CmpKind::Lt, distance, zero)?;
    let behind = b.widen(behind)?;
    let ctx_f = b.f32_const(ctx as f32);
    let wrap = b.g.mul(behind, ctx_f)?;
    let distance = b.g.add(distance, wrap)?;
    let visible = b.g.compare(CmpKind::Le, distance, span)?;
    let masked = b.f32_const(MASKED);
    let mask = b.g.select(visible, zero, masked)?;
    Ok(b.g.reshape(mask, [rows, 1, ctx])?)
}

/// Builds the group step graph of `model` (unoptimised): one token for each of `beams`
/// beams of `groups` groups, at each row's own position ([`POSITIONS`]), written to ring
/// slot `offset` of the group caches after each beam took over its parent's
/// ([`PARENT_ROWS`], global rows). Outputs, per group, the best `2 · beams` continuations
/// over its beams: [`CANDIDATES`] `[G, 2B]` (indices `beam · V + token` within the group)
/// and [`CANDIDATE_SCORES`] `[G·2B, 1]`.
pub fn group_step_graph(model: &ModelWeights, groups: usize, beams: usize, selection: &Selection) -> Result<Graph> {
    let c = model.config.clone();
    if groups < 2 || beams < 2 {
        return Err(Error::bad_argument(format!(
            "a group step needs 2 or more groups of 2 or more beams, not {groups} of {beams}"
        )));
    }
    let rows = groups * beams;
    let heads = c.decoder_heads;
    let mut b = Builder::new(&format!("whisper_group_step_{groups}x{beams}"), model);
    let tokens = b.g.input(TOKENS, TensorType::new(DType::U32, [rows]))?;
    let parent_rows = b.g.input(PARENT_ROWS, TensorType::new(DType::U32, [rows * heads]))?;
    let positions = b.g.input(POSITIONS, TensorType::new(DType::U32, [rows]))?;
    let previous = b.g.input(PREVIOUS, TensorType::new(DType::U32, [rows]))?;
    let latest = b.g.input(LATEST, f32_type(&[rows]))?;
    let scores = b.g.input(SCORES, f32_type(&[rows, 1]))?;
    let offset = b.g.scalar(OFFSET);

    let embed = b.param(EMBED_TOKENS)?;
    let x = b.g.gather(embed, tokens)?;
    let x = b.widen(x)?;
    let pos_table = b.param("model.decoder.embed_positions.weight")?;
    let pos = b.g.gather(pos_table, positions)?;
    let mut x = b.g.add(x, pos)?;
    let mask = ring_mask(&mut b, rows * heads)?;
    for i in 0..c.decoder_layers {
        x = decoder_block(&mut b, model, i, x, mask, offset, Rows::Groups { parent_rows, groups }, &[])?.0;
    }
    let x = b.layer_norm("model.decoder.layer_norm", x)?;
    let proj = output_projection(&mut b, model)?;
    let logits = b.g.matmul_t(x, proj)?;
    let logits = b.widen(logits)?;
    let column = |b: &mut Builder, v: NodeId| b.g.reshape(v, [rows, 1]);
    let bans = Bans::History {
        last: column(&mut b, tokens)?,
        previous: column(&mut b, previous)?,
        latest: column(&mut b, latest)?,
    };
    let masked = masked_with_lse(&mut b, logits, selection, bans)?;
    // Every row's log-probabilities plus its beam's score, ranked within each group.
    let vocab = c.n_vocab;
    let logprobs = b.g.sub(masked.x, masked.lse)?;
    let total = b.g.add(logprobs, scores)?;
    let per_group = b.g.reshape(total, [groups, beams * vocab])?;
    let k = 2 * beams;
    let best = b.g.top_k(per_group, k)?;
    b.g.output(CANDIDATES, best)?;
    // Their scores: each index moved to its group's place in the flat scores.
    let starts: Vec<u32> = (0..groups).map(|g| (g * beams * vocab) as u32).collect();
    let starts = b.g.constant(Tensor::u32([groups, 1], starts)?);
    let flat_best = b.g.add(best, starts)?;
    let flat_best = b.g.reshape(flat_best, [groups * k])?;
    let column = b.g.reshape(per_group, [rows * vocab, 1])?;
    let best_scores = b.g.gather(column, flat_best)?;
    b.g.output(CANDIDATE_SCORES, best_scores)?;
    Ok(b.g)
}

/// Builds the graph that makes the window a prefill just ran on group `g`'s: the prefill's
/// self-attention caches copied into every one of the group's beam rows, each key at the
/// ring slot [`RING_ROWS`] gives it (from runtime scalar [`CACHE_ROW`] on), and the window's
/// cross-attention keys and values into the group's rows (from [`CROSS_ROW`] on).
pub fn group_join_graph(model: &ModelWeights, groups: usize, beams: usize) -> Result<Graph> {
    let c = &model.config;
    let (heads, ctx, dh) = (c.decoder_heads, c.n_text_ctx, c.decoder_head_dim());
    let mut b = Builder::new(&format!("whisper_group_join_{groups}x{beams}"), model);
    let ring_rows = b.g.input(RING_ROWS, TensorType::new(DType::U32, [beams * heads * ctx]))?;
    let cache_row = b.g.scalar(CACHE_ROW);
    let cross_row = b.g.scalar(CROSS_ROW);
    for i in 0..c.decoder_layers {
        for (single, group) in [(self_key(i), group_key(i)), (self_value(i), group_value(i))] {
            let from = b.g.state(&single, self_cache_type(model))?;
            let from = b.g.reshape(from, [heads * ctx, dh])?;
            let copies = b.g.gather(from, ring_rows)?;
            let copies = b.g.reshape(copies, [beams * heads, ctx, dh])?;
            let to = b.g.state(&group, beam_cache_type(model, groups * beams))?;
            b.g.kv_write(to, copies, 0, cache_row)?;
        }
        for (single, group) in [(cross_key(i), group_cross_key(i)), (cross_value(i), group_cross_value(i))] {
            let from = b.g.state(&single, cross_type(model))?;
            let to = b.g.state(&group, group_cross_type(model, groups))?;
            b.g.kv_write(to, from, 0, cross_row)?;
        }
    }
    Ok(b.g)
}

/// Windows encoded together at most: every intermediate of the encoder grows with them, and
/// 8 of them already fill a large GPU's products with a tiny model's.
pub const MAX_ENCODED_TOGETHER: usize = 8;

/// The window counts the group encoders are built for in a program of `groups` groups:
/// powers of two from 2, and the most windows that can join at once
/// (`groups`, at most [`MAX_ENCODED_TOGETHER`]).
pub fn group_encoder_sizes(groups: usize) -> Vec<usize> {
    let most = groups.min(MAX_ENCODED_TOGETHER);
    let mut sizes: Vec<usize> = (1..).map(|p| 1 << p).take_while(|&w| w < most).collect();
    if most >= 2 {
        sizes.push(most);
    }
    sizes
}

/// Builds the encoder graph of `windows` windows at once (unoptimised): log-mel [`MEL`]
/// `[windows, n_mels, n_frames]` in, each window's cross-attention keys and values written
/// straight into its group's rows of the group cross buffers (from runtime scalar
/// [`window_cross_row`] on). Windows joining groups together are encoded together: every
/// product of the encoder then has `windows` times the rows.
pub fn group_encoder_graph(model: &ModelWeights, windows: usize, groups: usize) -> Result<Graph> {
    let c = &model.config;
    if windows < 2 || windows > groups {
        return Err(Error::bad_argument(format!("a group encoder of {windows} windows for {groups} groups")));
    }
    let heads = c.decoder_heads;
    let mut b = Builder::new(&format!("whisper_group_encoder_{windows}of{groups}"), model);
    let mel = b.g.input(MEL, f32_type(&[windows, c.n_mels, c.n_frames()]))?;
    let x = encoder_stack(&mut b, mel, windows)?;
    let rows: Vec<_> = (0..windows).map(|w| b.g.scalar(&window_cross_row(w))).collect();
    for i in 0..c.decoder_layers {
        let (k, v) = cross_key_value(&mut b, i, x, windows)?;
        for (all, group) in [(k, group_cross_key(i)), (v, group_cross_value(i))] {
            // Each write goes into the buffer as the last one left it.
            let mut to = b.g.state(&group, group_cross_type(model, groups))?;
            for (w, &row) in rows.iter().enumerate() {
                let one = b.g.slice(all, 0, w * heads, (w + 1) * heads)?;
                to = b.g.kv_write(to, one, 0, row)?;
            }
        }
    }
    Ok(b.g)
}

/// Builds the graph that copies one group's window ([`TAKE_ROWS`]) from the group cross
/// buffers into the one-window cross buffers, which the prefill reads: how a window
/// encoded with others ([`group_encoder_graph`]) gets its prefill.
pub fn group_take_graph(model: &ModelWeights, groups: usize) -> Result<Graph> {
    let c = &model.config;
    let (heads, audio, dh) = (c.decoder_heads, c.n_audio_ctx, c.decoder_head_dim());
    let mut b = Builder::new(&format!("whisper_group_take_{groups}"), model);
    let take_rows = b.g.input(TAKE_ROWS, TensorType::new(DType::U32, [heads * audio]))?;
    for i in 0..c.decoder_layers {
        for (group, single) in [(group_cross_key(i), cross_key(i)), (group_cross_value(i), cross_value(i))] {
            let from = b.g.state(&group, group_cross_type(model, groups))?;
            let from = b.g.reshape(from, [groups * heads * audio, dh])?;
            let window = b.g.gather(from, take_rows)?;
            let window = b.g.reshape(window, [heads, audio, dh])?;
            let to = b.g.state(&single, cross_type(model))?;
            b.g.write_state(to, window)?;
        }
    }
    Ok(b.g)
}
