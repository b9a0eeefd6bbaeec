//! The models by name, as faster-whisper names them (`tiny.en` to `large-v3-turbo`), and the
//! Hugging Face repositories of their CTranslate2 folders: one table for the command (which
//! finds them in the hub's cache) and the browser package (which fetches them from the hub).

/// faster-whisper's names and the repositories they download (its `utils._MODELS`).
pub const NAMES: [(&str, &str); 19] = [
    ("tiny.en", "Systran/faster-whisper-tiny.en"),
    ("tiny", "Systran/faster-whisper-tiny"),
    ("base.en", "Systran/faster-whisper-base.en"),
    ("base", "Systran/faster-whisper-base"),
    ("small.en", "Systran/faster-whisper-small.en"),
    ("small", "Systran/faster-whisper-small"),
    ("medium.en", "Systran/faster-whisper-medium.en"),
    ("medium", "Systran/faster-whisper-medium"),
    ("large-v1", "Systran/faster-whisper-large-v1"),
    ("large-v2", "Systran/faster-whisper-large-v2"),
    ("large-v3", "Systran/faster-whisper-large-v3"),
    ("large", "Systran/faster-whisper-large-v3"),
    ("distil-large-v2", "Systran/faster-distil-whisper-large-v2"),
    ("distil-medium.en", "Systran/faster-distil-whisper-medium.en"),
    ("distil-small.en", "Systran/faster-distil-whisper-small.en"),
    ("distil-large-v3", "Systran/faster-distil-whisper-large-v3"),
    ("distil-large-v3.5", "distil-whisper/distil-large-v3.5-ct2"),
    ("large-v3-turbo", "mobiuslabsgmbh/faster-whisper-large-v3-turbo"),
    ("turbo", "mobiuslabsgmbh/faster-whisper-large-v3-turbo"),
];

/// The repository faster-whisper downloads for `name`.
pub fn repository(name: &str) -> Option<&'static str> {
    NAMES.iter().find(|(n, _)| *n == name).map(|(_, repo)| *repo)
}

/// The names, comma-separated, for messages.
pub fn names() -> String {
    NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// The URL of `repo`'s folder at its `main` revision on the hub at `endpoint`
/// (`https://huggingface.co` or a mirror), under which each file is `{url}{file}`.
pub fn folder_url(endpoint: &str, repo: &str) -> String {
    format!("{}/{repo}/resolve/main/", endpoint.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_maps_to_a_repository_and_the_aliases_agree() {
        assert_eq!(repository("turbo"), repository("large-v3-turbo"));
        assert_eq!(repository("large"), Some("Systran/faster-whisper-large-v3"));
        assert_eq!(repository("base"), Some("Systran/faster-whisper-base"));
        assert_eq!(repository("whisper-1"), None);
        let mut names: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), NAMES.len(), "no name twice");
        assert_eq!(
            folder_url("https://huggingface.co/", "Systran/faster-whisper-base"),
            "https://huggingface.co/Systran/faster-whisper-base/resolve/main/"
        );
    }
}
