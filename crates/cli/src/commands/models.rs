//! `susurrus models`: the names `--model` takes, the repository each stands for, and which of
//! them the Hugging Face cache holds (where faster-whisper downloads them), with the folder
//! each loads from; and the default model's folder.

use std::fmt::Write as _;

use crate::error::Result;
use crate::hub::{self, Cached};
use crate::load;

/// Arguments of `susurrus models` (none: it reads the environment's cache settings,
/// `HF_HUB_CACHE` and `HF_HOME`).
#[derive(Debug, clap::Args)]
pub struct ModelsArgs {}

/// Prints the table.
pub fn run(_: &ModelsArgs) -> Result<()> {
    print!("{}", report());
    Ok(())
}

/// The table `run` prints.
pub fn report() -> String {
    let mut out = String::new();
    let default = load::default_dir();
    let state = |ok: bool| if ok { "present" } else { "missing: ./scripts/models/fetch_model.sh fetches it" };
    match &default {
        Some(dir) => {
            let _ = writeln!(out, "default model: {} ({})", dir.display(), state(dir.join("model.bin").is_file()));
        }
        None => out.push_str("default model: no home directory\n"),
    }
    let Some(cache) = hub::cache_dir() else {
        out.push_str("Hugging Face cache: no home directory, HF_HOME or HF_HUB_CACHE\n");
        return out;
    };
    let _ = writeln!(out, "Hugging Face cache: {}", cache.display());
    let _ = writeln!(out, "{:<18} {:<46} cached", "name", "repository");
    for (name, repo) in hub::NAMES {
        let cached = match hub::cached(&cache, repo) {
            Cached::Model(dir) => dir.display().to_string(),
            Cached::Missing => "-".to_string(),
            Cached::Incomplete(why) => format!("incomplete: {why}"),
        };
        let _ = writeln!(out, "{name:<18} {repo:<46} {cached}");
    }
    out
}
