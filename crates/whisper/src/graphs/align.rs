//! The alignment graph: the decoder over a window's whole decoded sequence at once (as a
//! prefill), returning what word timestamps are computed from ([`crate::decode::words`]): the
//! cross-attention weights of the model's alignment heads (its config's `alignment_heads`)
//! and each token's probability among the text tokens, as CTranslate2's `align` computes
//! them.
//!
//! The weights are the heads' scores `q kᵀ · scale` softmaxed over the window's audio only
//! (encoder positions below runtime scalar [`FRAMES`]; the rest of the 30 s window is
//! padding), so only `[A, S, n_audio_ctx]` floats and `S` probabilities leave the device.
//! Like a prefill, it writes the self-attention caches from position 0: it runs after the
//! window's decoding, which no longer needs them.

use crate::error::{Error, Result};
use crate::graphs::decoder::{OFFSET, Rows, TOKENS, decoder_block, output_projection, position_mask};
use crate::graphs::layers::{Builder, MASKED, ModelWeights, concat_few_at_a_time};
use crate::load::names::EMBED_TOKENS;
use susurrus_core::ir::{DType, Graph, TensorType};
use susurrus_core::ops::CmpKind;
use susurrus_core::tensor::Tensor;

/// Input: for each row, `row · text_vocab + the row's next token` (u32 `[S]`): where its
/// probability sits among the rows' text probabilities.
pub const NEXT_INDEX: &str = "next_index";
/// Runtime scalar: the encoder positions holding the window's audio (its frames / 2).
pub const FRAMES: &str = "frames";
/// Output: the alignment heads' weights `[A, S, n_audio_ctx]`, zero past [`FRAMES`].
pub const ALIGNMENT: &str = "alignment";
/// Output: each row's next token's probability among the text tokens `[S, 1]`.
pub const TOKEN_PROBS: &str = "token_probs";

/// Builds the alignment graph of `model` for sequences padded to `positions` tokens, with
/// text tokens `0..text_vocab` (below end of text).
pub fn alignment_graph(model: &ModelWeights, positions: usize, text_vocab: usize) -> Result<Graph> {
    let c = model.config.clone();
    let s = positions;
    let heads = &c.generation.alignment_heads;
    if heads.is_empty() {
        return Err(Error::bad_argument("the model's configuration lists no alignment heads"));
    }
    if let Some(&(l, h)) = heads.iter().find(|&&(l, h)| l >= c.decoder_layers || h >= c.decoder_heads) {
        return Err(Error::bad_argument(format!(
            "alignment head ({l}, {h}) is outside the decoder's {} layers of {} heads",
            c.decoder_layers, c.decoder_heads
        )));
    }
    if s < 2 || s > c.n_text_ctx || text_vocab == 0 || text_vocab > c.n_vocab {
        return Err(Error::bad_argument(format!("an alignment graph of {s} positions and {text_vocab} text tokens")));
    }
    let mut b = Builder::new(&format!("whisper_align_{s}"), model);
    let tokens = b.g.input(TOKENS, TensorType::new(DType::U32, [s]))?;
    let next_index = b.g.input(NEXT_INDEX, TensorType::new(DType::U32, [s]))?;
    let offset = b.g.scalar(OFFSET);
    let embed = b.param(EMBED_TOKENS)?;
    let x = b.g.gather(embed, tokens)?;
    let x = b.widen(x)?;
    let positions = b.iota(&[s])?;
    let pos_table = b.param("model.decoder.embed_positions.weight")?;
    let pos = b.g.gather(pos_table, positions)?;
    let mut x = b.g.add(x, pos)?;
    let mask = position_mask(&mut b, positions, s)?;
    let mut scores = Vec::with_capacity(heads.len());
    for i in 0..c.decoder_layers {
        let layer_heads: Vec<usize> = heads.iter().filter(|&&(l, _)| l == i).map(|&(_, h)| h).collect();
        let (next, layer_scores) = decoder_block(&mut b, model, i, x, mask, offset, Rows::Single, &layer_heads)?;
        x = next;
        scores.extend(layer_scores);
    }
    // By layer, as the reference collects them (the heads are averaged in the end, so
    // their order does not matter).
    let scores = concat_few_at_a_time(&mut b.g, &scores)?;
    let audio = c.n_audio_ctx;
    let frame_ids = b.g.constant(Tensor::f32([1, 1, audio], (0..audio).map(|f| f as f32).collect())?);
    let frames = b.g.scalar(FRAMES);
    let frames = b.g.read_scalar(frames)?;
    let frames = b.widen(frames)?;
    let inside = b.g.compare(CmpKind::Lt, frame_ids, frames)?;
    let masked = b.f32_const(MASKED);
    let scores = b.g.select(inside, scores, masked)?;
    let weights = b.g.softmax(scores)?;
    b.g.output(ALIGNMENT, weights)?;

    let x = b.layer_norm("model.decoder.layer_norm", x)?;
    let proj = output_projection(&mut b, model)?;
    let logits = b.g.matmul_t(x, proj)?;
    let logits = b.widen(logits)?;
    let text = b.g.slice(logits, 1, 0, text_vocab)?;
    let probs = b.g.softmax(text)?;
    let column = b.g.reshape(probs, [s * text_vocab, 1])?;
    let chosen = b.g.gather(column, next_index)?;
    b.g.output(TOKEN_PROBS, chosen)?;
    Ok(b.g)
}
