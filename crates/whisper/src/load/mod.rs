//! Loading a model: the config, the one naming of weights the graph builders read
//! ([`weights`]), the CTranslate2 and Hugging Face readers (whole or streamed), the folder
//! and file-set dispatch ([`files`]), the conversion between the two formats ([`convert`]) and
//! the released sizes' shapes ([`sizes`]).
//! The readers end in [`weights::WhisperWeights`], so nothing above this folder knows a format.

pub mod catalog;
pub mod config;
pub mod convert;
pub mod ct2;
pub mod ct2_stream;
pub mod file_data;
pub mod files;
pub mod hf;
pub mod hf_stream;
pub mod names;
pub mod sizes;
pub mod weights;

pub use config::WhisperConfig;
pub use files::{ModelFormat, load_files};
pub use weights::WhisperWeights;

use std::path::Path;

use crate::error::{Result, model_error};

/// Loads a model folder of either format: CTranslate2 (`model.bin`) or Hugging Face
/// (`model.safetensors`).
pub fn load_dir(dir: &Path) -> Result<WhisperWeights> {
    if dir.join("model.bin").is_file() {
        ct2::load_ct2_dir(dir)
    } else if dir.join("model.safetensors").is_file() {
        hf::load_hf_dir(dir)
    } else {
        Err(model_error(
            &dir.display().to_string(),
            "no model.bin (CTranslate2) or model.safetensors (Hugging Face) here",
        ))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn load_dir_picks_the_format() {
        let ct2 = load_dir(&crate::load::weights::testing::tiny_en_dir()).unwrap();
        assert_eq!(ct2.config().d_model, 384);
        let empty = std::env::temp_dir().join(format!("susurrus-empty-model-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let err = load_dir(&empty).unwrap_err().to_string();
        std::fs::remove_dir(&empty).unwrap();
        assert_eq!(
            err,
            format!("{}: no model.bin (CTranslate2) or model.safetensors (Hugging Face) here", empty.display())
        );
    }
}
