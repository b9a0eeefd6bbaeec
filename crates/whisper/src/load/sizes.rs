//! The released Whisper sizes as configs, for the places that need a model's shapes without
//! its files: random-weight models in the tests and the size benchmarks, and per-op timings.

use crate::load::config::{GenerationConfig, WhisperConfig};

/// The released Whisper sizes, at their real widths: what random-weight models test the graphs
/// and every backend at (with fewer layers where time counts), and the shapes `susurrus
/// bench-ops` times. Numbers from the models' `config.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// d_model 384, 6 heads, 4 + 4 layers (tiny's shapes; tiny.en's vocabulary is one token
    /// shorter).
    Tiny,
    /// d_model 512, 8 heads, 6 + 6 layers.
    Base,
    /// d_model 768, 12 heads, 12 + 12 layers.
    Small,
    /// d_model 1024, 16 heads, 24 + 24 layers.
    Medium,
    /// d_model 1280, 20 heads, 32 + 32 layers, 128 mels, 51866 tokens.
    LargeV3,
    /// large-v3 with 4 decoder layers.
    LargeV3Turbo,
}

impl Architecture {
    pub const ALL: [Architecture; 6] = [
        Architecture::Tiny,
        Architecture::Base,
        Architecture::Small,
        Architecture::Medium,
        Architecture::LargeV3,
        Architecture::LargeV3Turbo,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Architecture::Tiny => "tiny",
            Architecture::Base => "base",
            Architecture::Small => "small",
            Architecture::Medium => "medium",
            Architecture::LargeV3 => "large-v3",
            Architecture::LargeV3Turbo => "large-v3-turbo",
        }
    }

    /// The full model's config; multilingual token settings as the released models have them
    /// (ids shifted by one in large-v3's vocabulary of 51866).
    pub fn config(self) -> WhisperConfig {
        let (d_model, heads, encoder_layers, decoder_layers) = match self {
            Architecture::Tiny => (384, 6, 4, 4),
            Architecture::Base => (512, 8, 6, 6),
            Architecture::Small => (768, 12, 12, 12),
            Architecture::Medium => (1024, 16, 24, 24),
            Architecture::LargeV3 => (1280, 20, 32, 32),
            Architecture::LargeV3Turbo => (1280, 20, 32, 4),
        };
        let v3 = matches!(self, Architecture::LargeV3 | Architecture::LargeV3Turbo);
        let (n_mels, n_vocab, languages) = if v3 { (128, 51866, 100) } else { (80, 51865, 99) };
        WhisperConfig {
            n_mels,
            n_audio_ctx: 1500,
            n_text_ctx: 448,
            d_model,
            encoder_layers,
            decoder_layers,
            encoder_heads: heads,
            decoder_heads: heads,
            encoder_ffn: 4 * d_model,
            decoder_ffn: 4 * d_model,
            n_vocab,
            layer_norm_eps: 1e-5,
            generation: GenerationConfig {
                suppress_ids: vec![1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91],
                suppress_ids_begin: vec![220, 50257],
                lang_ids: (50259..50259 + languages).collect(),
                alignment_heads: vec![(decoder_layers - 1, 0)],
            },
        }
    }

    /// The size called `name` (as [`Architecture::name`] spells it).
    pub fn from_name(name: &str) -> Option<Architecture> {
        Architecture::ALL.into_iter().find(|a| a.name() == name)
    }
}
