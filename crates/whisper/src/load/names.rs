//! The canonical weight names (Hugging Face's), a leaf every reader and graph builder takes
//! them from: the CTranslate2 reader renames its variables to these, the graph builders read
//! these, so nothing else spells a weight's name.

/// The output projection (logits = x · proj_outᵀ).
pub const PROJ_OUT: &str = "proj_out.weight";
/// The token embedding, which the output projection is tied to.
pub const EMBED_TOKENS: &str = "model.decoder.embed_tokens.weight";
/// Prefix of every encoder layer's tensors: `model.encoder.layers.{i}.`.
pub const ENCODER_LAYERS: &str = "model.encoder.layers.";
/// Prefix of every decoder layer's tensors: `model.decoder.layers.{i}.`.
pub const DECODER_LAYERS: &str = "model.decoder.layers.";

/// The name of tensor `suffix` (e.g. `fc1.weight`) of encoder layer `i`.
pub fn encoder_layer(i: usize, suffix: &str) -> String {
    format!("{ENCODER_LAYERS}{i}.{suffix}")
}

/// The name of tensor `suffix` (e.g. `encoder_attn.k_proj.weight`) of decoder layer `i`.
pub fn decoder_layer(i: usize, suffix: &str) -> String {
    format!("{DECODER_LAYERS}{i}.{suffix}")
}
