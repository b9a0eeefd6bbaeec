//! Whisper models by name, as faster-whisper names them (`tiny.en` to `large-v3-turbo`), found
//! where faster-whisper leaves them: the Hugging Face hub's cache. A user who has run
//! faster-whisper already holds its CTranslate2 folders there, and they load as they are.
//!
//! The cache's layout (huggingface_hub's): `models--{org}--{name}/refs/main` holds the commit
//! of the `main` revision, `snapshots/{commit}/` the repository's files at that commit (links
//! into `blobs/`, which holds each file once).

use std::path::{Path, PathBuf};

pub use susurrus_whisper::load::catalog::{NAMES, names, repository};

/// The hub's cache folder, as huggingface_hub finds it: `$HF_HUB_CACHE`, else `$HF_HOME/hub`,
/// else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("HF_HUB_CACHE") {
        return Some(dir);
    }
    if let Some(home) = var("HF_HOME") {
        return Some(home.join("hub"));
    }
    let cache = var("XDG_CACHE_HOME").or_else(|| std::env::home_dir().map(|home| home.join(".cache")))?;
    Some(cache.join("huggingface").join("hub"))
}

/// What the cache holds of a repository.
#[derive(Debug, PartialEq)]
pub enum Cached {
    /// The folder of the `main` revision, with a model in it.
    Model(PathBuf),
    /// Nothing of the repository.
    Missing,
    /// Something, but no model to load: why (a partial download, a broken reference).
    Incomplete(String),
}

/// The files a faster-whisper folder needs: the weights and the configuration, then the
/// tokenizer (either file).
const NEEDED: [&str; 2] = ["model.bin", "config.json"];
const TOKENIZER: [&str; 2] = ["tokenizer.json", "vocabulary.txt"];

/// The `main` revision of `repo` in the cache at `cache`.
pub fn cached(cache: &Path, repo: &str) -> Cached {
    let folder = cache.join(format!("models--{}", repo.replace('/', "--")));
    if !folder.is_dir() {
        return Cached::Missing;
    }
    let reference = folder.join("refs").join("main");
    let commit = match std::fs::read_to_string(&reference) {
        Ok(commit) => commit.trim().to_string(),
        Err(e) => return Cached::Incomplete(format!("{} cannot be read: {e}", reference.display())),
    };
    if commit.is_empty() || commit.contains(['/', '\\']) || commit.starts_with('.') {
        return Cached::Incomplete(format!("{} does not hold a commit", reference.display()));
    }
    let snapshot = folder.join("snapshots").join(&commit);
    if !snapshot.is_dir() {
        return Cached::Incomplete(format!("{} names commit {commit}, which has no snapshot", reference.display()));
    }
    // `is_file` follows the snapshot's links: a link whose blob is gone is missing too.
    let missing: Vec<&str> = NEEDED.iter().copied().filter(|f| !snapshot.join(f).is_file()).collect();
    if !missing.is_empty() {
        return Cached::Incomplete(format!(
            "{} lacks {} (an interrupted download?)",
            snapshot.display(),
            missing.join(" and ")
        ));
    }
    if !TOKENIZER.iter().any(|f| snapshot.join(f).is_file()) {
        return Cached::Incomplete(format!("{} has no tokenizer.json or vocabulary.txt", snapshot.display()));
    }
    Cached::Model(snapshot)
}
