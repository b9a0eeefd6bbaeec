//! Whisper models by name, as faster-whisper names them (`tiny.en` to `large-v3-turbo`): found
//! where faster-whisper leaves them, the Hugging Face hub's cache ([`cache`]), else downloaded
//! there from the hub ([`download`]) as faster-whisper downloads them, so that each program
//! uses the other's files.
//!
//! The settings are huggingface_hub's variables: `HF_HUB_CACHE`/`HF_HOME` (the cache),
//! `HF_ENDPOINT` (a mirror), `HF_TOKEN` or the token file `hf auth login` writes (gated and
//! private repositories), `HF_HUB_OFFLINE` (never the network; also `--offline`).

pub mod cache;
pub mod download;

use std::path::PathBuf;

pub use cache::{Cached, cached};
pub use susurrus_whisper::load::catalog::{NAMES, names, repository};

use crate::error::{Error, Result};

/// The hub's address when `HF_ENDPOINT` names none.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Where models come from: the hub's settings, from the environment.
#[derive(Debug, Clone)]
pub struct Hub {
    /// The hub's address, without a trailing `/`.
    pub endpoint: String,
    /// Sent as `Authorization: Bearer` to the hub (never to the servers it redirects to).
    pub token: Option<String>,
    /// Why the network is off limits, for messages (`--offline`, `HF_HUB_OFFLINE=1`), or
    /// `None` when downloads may run.
    pub offline: Option<&'static str>,
}

impl Hub {
    /// The settings from the environment; `offline` is the command's `--offline`.
    pub fn from_env(offline: bool) -> Hub {
        let endpoint = var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let offline = if offline {
            Some("--offline")
        } else if var("HF_HUB_OFFLINE").is_some_and(|v| is_true(&v)) {
            Some("HF_HUB_OFFLINE")
        } else {
            None
        };
        Hub { endpoint: endpoint.trim_end_matches('/').to_string(), token: token(), offline }
    }
}

/// The folder of model `name` (repository `repo`): the cache's, else downloaded there from the
/// hub (unless offline), printing its progress on stderr.
pub fn model(name: &str, repo: &str, hub: &Hub) -> Result<PathBuf> {
    let Some(cache) = cache_dir() else {
        return Err(Error::Usage(format!(
            "model {name}: no home directory, HF_HOME or HF_HUB_CACHE to find the Hugging Face cache in"
        )));
    };
    let why = match cached(&cache, repo) {
        Cached::Model(dir) => return Ok(dir),
        Cached::Missing => None,
        Cached::Incomplete(why) => Some(why),
    };
    match (hub.offline, why) {
        (None, _) => download::model(name, repo, &cache, hub),
        (Some(flag), None) => Err(Error::Usage(format!(
            "model {name} ({repo}) is not in the Hugging Face cache {} and {flag} forbids downloading it: run once \
             without {flag}, or pass --model DIR",
            cache.display()
        ))),
        (Some(flag), Some(why)) => Err(Error::Usage(format!(
            "model {name} ({repo}) in the Hugging Face cache cannot be loaded: {why}; {flag} forbids downloading it \
             again"
        ))),
    }
}

/// The hub's cache folder, as huggingface_hub finds it: `$HF_HUB_CACHE`, else `$HF_HOME/hub`,
/// else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = var("HF_HUB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    Some(hf_home()?.join("hub"))
}

/// `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`.
fn hf_home() -> Option<PathBuf> {
    if let Some(home) = var("HF_HOME") {
        return Some(PathBuf::from(home));
    }
    let cache =
        var("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| std::env::home_dir().map(|home| home.join(".cache")))?;
    Some(cache.join("huggingface"))
}

/// The token: `$HF_TOKEN`, else the file `$HF_TOKEN_PATH` or `$HF_HOME/token` names (where
/// `hf auth login` saves it).
fn token() -> Option<String> {
    let token = var("HF_TOKEN").or_else(|| {
        let file = var("HF_TOKEN_PATH").map(PathBuf::from).or_else(|| Some(hf_home()?.join("token")))?;
        std::fs::read_to_string(file).ok()
    })?;
    Some(token.trim().to_string()).filter(|t| !t.is_empty())
}

/// A variable's value, unset when empty.
fn var(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// huggingface_hub's reading of a boolean variable.
fn is_true(value: &str) -> bool {
    ["1", "ON", "YES", "TRUE"].contains(&value.trim().to_ascii_uppercase().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_read_as_huggingface_hub_reads_them() {
        for yes in ["1", "on", "YES", "true", " True "] {
            assert!(is_true(yes), "{yes}");
        }
        for no in ["0", "off", "no", "false", "", "2"] {
            assert!(!is_true(no), "{no}");
        }
    }
}
