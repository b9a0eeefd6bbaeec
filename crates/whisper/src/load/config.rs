//! Whisper's dimensions and generation settings, derived from a model's files.
//!
//! Sizes come from the tensor shapes (the one thing every format has), head counts from the
//! format's settings (CTranslate2 scalar variables, Hugging Face `config.json`); whatever else
//! a file states about the sizes is checked against the shapes. Nothing is assumed about the
//! model size, so tiny … large, `.en` and multilingual, 80 and 128 mels all load the same way.

use crate::error::Result;
use crate::error::model_error;

/// Whisper's layer-norm epsilon (PyTorch's default, which Whisper uses everywhere).
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// The smallest vocabulary of a multilingual Whisper (Whisper's own test for multilinguality).
const MULTILINGUAL_MIN_VOCAB: usize = 51865;

/// The dimensions of a Whisper model.
#[derive(Clone, Debug, PartialEq)]
pub struct WhisperConfig {
    /// Mel bins of the input (80, or 128 for large-v3).
    pub n_mels: usize,
    /// Encoder positions (1500 for 30 s; the mel has twice as many frames).
    pub n_audio_ctx: usize,
    /// Decoder positions (448).
    pub n_text_ctx: usize,
    /// Width of both encoder and decoder.
    pub d_model: usize,
    pub encoder_layers: usize,
    pub decoder_layers: usize,
    pub encoder_heads: usize,
    pub decoder_heads: usize,
    /// Hidden width of the encoder's feed-forward blocks.
    pub encoder_ffn: usize,
    /// Hidden width of the decoder's feed-forward blocks.
    pub decoder_ffn: usize,
    /// Tokens in the vocabulary (rows of the embedding).
    pub n_vocab: usize,
    pub layer_norm_eps: f32,
    pub generation: GenerationConfig,
}

/// Token settings a model's files carry for decoding. Empty where a file does not say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenerationConfig {
    /// Tokens never to sample.
    pub suppress_ids: Vec<u32>,
    /// Tokens not to sample as the first token of a transcript.
    pub suppress_ids_begin: Vec<u32>,
    /// The language tokens, in the model's order.
    pub lang_ids: Vec<u32>,
    /// (decoder layer, head) pairs whose cross-attention aligns tokens with time.
    pub alignment_heads: Vec<(usize, usize)>,
}

impl WhisperConfig {
    /// Whether the model is multilingual (Whisper's rule: 51865 tokens or more).
    pub fn is_multilingual(&self) -> bool {
        self.n_vocab >= MULTILINGUAL_MIN_VOCAB
    }

    /// Mel frames of one window: the encoder's second convolution has stride 2.
    pub fn n_frames(&self) -> usize {
        2 * self.n_audio_ctx
    }

    pub fn encoder_head_dim(&self) -> usize {
        self.d_model / self.encoder_heads
    }

    pub fn decoder_head_dim(&self) -> usize {
        self.d_model / self.decoder_heads
    }

    /// Checks that the config describes a buildable model; `file` names the source in errors.
    pub fn validate(&self, file: &str) -> Result<()> {
        self.validate_sizes(file)?;
        self.validate_generation(file)
    }

    /// Checks the sizes: none is zero, the heads divide the width.
    pub fn validate_sizes(&self, file: &str) -> Result<()> {
        let sizes = [
            ("n_mels", self.n_mels),
            ("n_audio_ctx", self.n_audio_ctx),
            ("n_text_ctx", self.n_text_ctx),
            ("d_model", self.d_model),
            ("encoder_layers", self.encoder_layers),
            ("decoder_layers", self.decoder_layers),
            ("encoder_ffn", self.encoder_ffn),
            ("decoder_ffn", self.decoder_ffn),
            ("n_vocab", self.n_vocab),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(model_error(file, format!("{name} is 0")));
        }
        for (what, heads) in [("encoder", self.encoder_heads), ("decoder", self.decoder_heads)] {
            if heads == 0 || !self.d_model.is_multiple_of(heads) {
                return Err(model_error(file, format!("{what} heads {heads} do not divide d_model {}", self.d_model)));
            }
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(model_error(
                file,
                format!("layer norm epsilon {} is not a positive number", self.layer_norm_eps),
            ));
        }
        Ok(())
    }

    /// Checks the generation settings against the sizes: token ids inside the vocabulary,
    /// alignment heads inside the decoder.
    pub fn validate_generation(&self, file: &str) -> Result<()> {
        let g = &self.generation;
        let ids = g.suppress_ids.iter().chain(&g.suppress_ids_begin).chain(&g.lang_ids);
        if let Some(id) = ids.copied().find(|&id| id as usize >= self.n_vocab) {
            return Err(model_error(file, format!("token id {id} is outside the vocabulary of {}", self.n_vocab)));
        }
        if let Some((layer, head)) =
            g.alignment_heads.iter().find(|&&(l, h)| l >= self.decoder_layers || h >= self.decoder_heads)
        {
            return Err(model_error(
                file,
                format!(
                    "alignment head ({layer}, {head}) is outside the decoder's {} layers x {} heads",
                    self.decoder_layers, self.decoder_heads
                ),
            ));
        }
        Ok(())
    }
}

/// A layer index in canonical decimal form ("0", "12"; not "012" or "+1").
pub(crate) fn parse_index(s: &str) -> Option<usize> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical { s.parse().ok() } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::weights::testing::{multilingual_config, small_config};

    #[test]
    fn validate_reports_each_problem() {
        let ok = small_config();
        ok.validate("f").unwrap();
        assert_eq!(ok.n_frames(), 12);
        assert_eq!(ok.encoder_head_dim(), 4);
        assert!(!ok.is_multilingual());
        assert!(multilingual_config().is_multilingual());

        let check = |edit: fn(&mut WhisperConfig), want: &str| {
            let mut c = small_config();
            edit(&mut c);
            assert_eq!(c.validate("config.json").unwrap_err().to_string(), want);
        };
        check(|c| c.n_mels = 0, "config.json: n_mels is 0");
        check(|c| c.decoder_heads = 3, "config.json: decoder heads 3 do not divide d_model 8");
        check(|c| c.encoder_heads = 0, "config.json: encoder heads 0 do not divide d_model 8");
        check(|c| c.layer_norm_eps = f32::NAN, "config.json: layer norm epsilon NaN is not a positive number");
        check(|c| c.generation.suppress_ids.push(20), "config.json: token id 20 is outside the vocabulary of 20");
        check(
            |c| c.generation.alignment_heads.push((2, 0)),
            "config.json: alignment head (2, 0) is outside the decoder's 2 layers x 2 heads",
        );
    }

    #[test]
    fn layer_indices_are_canonical_decimals() {
        assert_eq!(parse_index("0"), Some(0));
        assert_eq!(parse_index("31"), Some(31));
        assert_eq!(parse_index("01"), None);
        assert_eq!(parse_index("+1"), None);
        assert_eq!(parse_index(""), None);
        assert_eq!(parse_index("99999999999999999999999"), None);
    }
}
