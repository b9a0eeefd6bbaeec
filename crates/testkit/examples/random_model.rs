//! Writes a Hugging Face Whisper folder with random weights at a released size's real widths
//! (`susurrus_testkit::whisper::released_shape_files`): what the demo page's end-to-end test
//! loads to show that a large-v3-shaped model fits a browser.
//!
//!     cargo run -p susurrus-testkit --example random_model -- ARCH LAYERS OUT_DIR BASE_TOKENIZER_JSON [int8]
//!
//! ARCH: tiny, base, small, medium, large-v3 or large-v3-turbo; LAYERS each side (at most the size's own:
//! `large-v3-turbo 32` is the whole turbo, 32 + 4); BASE_TOKENIZER_JSON the
//! multilingual base model's `tokenizer.json` (scripts/models/fetch_model.sh base).

use std::path::PathBuf;
use std::process::ExitCode;

use susurrus_testkit::whisper::{Architecture, released_shape_files};
use susurrus_whisper::load::convert::WeightFormat;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("random_model: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let usage = "usage: random_model ARCH LAYERS OUT_DIR BASE_TOKENIZER_JSON [int8]";
    let [arch, layers, out, tokenizer, rest @ ..] = args else { return Err(usage.into()) };
    let arch = Architecture::from_name(arch)
        .ok_or_else(|| format!("unknown size {arch:?} (tiny, base, small, medium, large-v3, large-v3-turbo)"))?;
    let layers: usize = layers.parse().ok().filter(|&n| n > 0).ok_or_else(|| format!("bad layer count {layers:?}"))?;
    let format = match rest {
        [] => WeightFormat::F16,
        [q] if q == "int8" => WeightFormat::Int8,
        _ => return Err(usage.into()),
    };
    let base = std::fs::read(tokenizer).map_err(|e| format!("{tokenizer}: {e}"))?;
    let files = released_shape_files(arch, layers, &base, format, 0)?;
    let config = arch.config();
    let (encoder, decoder) = (layers.min(config.encoder_layers), layers.min(config.decoder_layers));
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    for (name, bytes) in files {
        let path = out.join(&name);
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    println!("{} ({encoder} + {decoder} layers, random weights) -> {}", arch.name(), out.display());
    Ok(())
}
