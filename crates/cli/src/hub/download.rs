//! Downloading a model's repository from the hub into the cache, the files faster-whisper
//! downloads (`config.json`, `preprocessor_config.json`, `model.bin`, `tokenizer.json`,
//! `vocabulary.*`) at the commit `main` names:
//!
//! - the hub's listing of the commit gives each file's size and id (an LFS file's SHA-256,
//!   else git's blob id), and every file is checked against both before it takes its place;
//! - a file grows in `blobs/{id}.incomplete`, under the blob's lock; a cut download keeps it,
//!   and the next one asks for the rest (an HTTP range) and hashes what it already had;
//! - a finished file is renamed into `blobs/`, linked from the snapshot, and `refs/main` is
//!   written last, so that the cache never names a snapshot that lacks a file.
//!
//! Every error names the model, the file and the cause, and what to do.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use sha1::Digest as _;
use ureq::http::StatusCode;

use super::Hub;
use super::cache::{RepoCache, is_commit};
use crate::error::{Error, Result};

/// Whether faster-whisper downloads `file` (its `allow_patterns`).
fn wanted(file: &str) -> bool {
    matches!(file, "config.json" | "preprocessor_config.json" | "model.bin" | "tokenizer.json")
        || file.strip_prefix("vocabulary.").is_some_and(|ext| !ext.is_empty() && !ext.contains('/'))
}

/// A file of the repository, as the hub lists it.
#[derive(Debug)]
struct Remote {
    name: String,
    size: u64,
    /// The blob's id: the LFS file's SHA-256, else git's blob id (SHA-1).
    id: String,
    /// Whether `id` is a SHA-256 of the bytes (LFS) rather than git's SHA-1 of the blob.
    lfs: bool,
}

/// The hub's answer to `/api/models/{repo}/revision/main?blobs=true` (the fields used).
#[derive(Deserialize)]
struct Listing {
    sha: String,
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
    size: Option<u64>,
    #[serde(rename = "blobId")]
    blob_id: Option<String>,
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    sha256: String,
    size: u64,
}

/// Downloads model `name` (repository `repo`) into `cache`; its snapshot's folder.
pub fn model(name: &str, repo: &str, cache: &Path, hub: &Hub) -> Result<PathBuf> {
    let fail = |msg: String| Error::Download { model: name.to_string(), repo: repo.to_string(), msg };
    let client = Client::new(hub, repo);
    let (commit, files) = client.listing().map_err(fail)?;
    let store = RepoCache::new(cache, repo);
    let io = |what: &Path, e: std::io::Error| fail(format!("{}: {e}", what.display()));

    let present = |f: &Remote| store.blob(&f.id).metadata().is_ok_and(|m| m.len() == f.size);
    let missing: Vec<&Remote> = files.iter().filter(|f| !present(f)).collect();
    let total: u64 = missing.iter().map(|f| f.size).sum();
    let progress = Progress::new(total);
    if !missing.is_empty() {
        progress.note(&format!(
            "downloading model {name} ({repo}) from {}: {} file{}, {} into {}",
            hub.endpoint,
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            megabytes(total),
            store.root().display()
        ));
    }
    for file in &files {
        if !present(file) {
            fetch(&client, &store, &commit, file, &progress).map_err(|msg| fail(format!("{}: {msg}", file.name)))?;
        }
        store.link(&commit, &file.name, &file.id).map_err(|e| io(&store.snapshot(&commit).join(&file.name), e))?;
    }
    store.set_main(&commit).map_err(|e| io(&store.root().join("refs").join("main"), e))?;
    progress.bar.finish_and_clear();
    let snapshot = store.snapshot(&commit);
    if !missing.is_empty() {
        progress.note(&format!("model {name} is in {}", snapshot.display()));
    }
    Ok(snapshot)
}

/// Downloads `file` into its blob (resuming a cut download), checks its size and id, and
/// renames it into place. Errors are the message after the file's name.
fn fetch(client: &Client, store: &RepoCache, commit: &str, file: &Remote, progress: &Progress) -> Result<(), String> {
    let _lock = store
        .lock(&file.id, || progress.note(&format!("{}: waiting for another download of it to end", file.name)))
        .map_err(|e| format!("cannot lock its download: {e}"))?;
    let blob = store.blob(&file.id);
    if blob.metadata().is_ok_and(|m| m.len() == file.size) {
        // The other download finished it.
        progress.bar.inc(file.size);
        return Ok(());
    }
    let part_path = store.incomplete(&file.id);
    if let Some(blobs) = part_path.parent() {
        std::fs::create_dir_all(blobs).map_err(|e| format!("{}: {e}", blobs.display()))?;
    }
    let shown = |e: std::io::Error| format!("{}: {e}", part_path.display());
    let mut part =
        File::options().create(true).truncate(false).read(true).write(true).open(&part_path).map_err(shown)?;
    let mut have = part.metadata().map_err(shown)?.len();
    if have > file.size {
        part.set_len(0).map_err(shown)?;
        have = 0;
    }
    let mut hash = Hash::new(file);
    if have > 0 {
        hash.update_from(&mut part, have).map_err(shown)?;
    }
    progress.bar.inc(have);
    if have < file.size {
        let url = client.file_url(commit, &file.name);
        let (response, from) = client.get_range(&url, have)?;
        if from < have {
            // The server sent the whole file: start again.
            part.set_len(0).map_err(shown)?;
            hash = Hash::new(file);
            progress.bar.set_position(progress.bar.position() - have);
            have = 0;
        }
        part.seek(SeekFrom::Start(have)).map_err(shown)?;
        let mut body = response.into_body().into_reader();
        let mut buffer = vec![0u8; 1 << 20];
        while have < file.size {
            let read = match body.read(&mut buffer) {
                Ok(0) => {
                    return Err(format!(
                        "the connection closed after {have} of {} bytes: run the command again to resume the download",
                        file.size
                    ));
                }
                Ok(n) => n.min((file.size - have) as usize),
                Err(e) => {
                    return Err(format!(
                        "the download broke off after {have} of {} bytes ({e}): run the command again to resume it",
                        file.size
                    ));
                }
            };
            part.write_all(&buffer[..read]).map_err(shown)?;
            hash.update(&buffer[..read]);
            have += read as u64;
            progress.bar.inc(read as u64);
        }
    }
    part.sync_all().map_err(shown)?;
    drop(part);
    let got = hash.finish();
    if got != file.id {
        let _ = std::fs::remove_file(&part_path);
        let what = if file.lfs { "SHA-256" } else { "git blob id" };
        return Err(format!(
            "its {what} is {got}, not {} as the hub lists it: the download is damaged and was removed; run the command \
             again",
            file.id
        ));
    }
    std::fs::rename(&part_path, &blob).map_err(|e| format!("{}: {e}", blob.display()))
}

/// The check of a file's bytes against its id: SHA-256 of the bytes for an LFS file, else
/// git's blob id (SHA-1 of `blob {size}\0` and the bytes).
enum Hash {
    Lfs(sha2::Sha256),
    Git(sha1::Sha1),
}

impl Hash {
    fn new(file: &Remote) -> Hash {
        if file.lfs {
            Hash::Lfs(sha2::Sha256::new())
        } else {
            let mut sha1 = sha1::Sha1::new();
            sha1.update(format!("blob {}\0", file.size).as_bytes());
            Hash::Git(sha1)
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hash::Lfs(h) => h.update(bytes),
            Hash::Git(h) => h.update(bytes),
        }
    }

    /// Hashes the first `length` bytes of `file` (what a cut download left).
    fn update_from(&mut self, file: &mut File, length: u64) -> std::io::Result<()> {
        file.seek(SeekFrom::Start(0))?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut reader = file.take(length);
        loop {
            let n = reader.read(&mut buffer)?;
            if n == 0 {
                return Ok(());
            }
            self.update(&buffer[..n]);
        }
    }

    fn finish(self) -> String {
        let digest: Vec<u8> = match self {
            Hash::Lfs(h) => h.finalize().to_vec(),
            Hash::Git(h) => h.finalize().to_vec(),
        };
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The hub's HTTP side for one repository.
struct Client<'a> {
    agent: ureq::Agent,
    hub: &'a Hub,
    repo: &'a str,
}

impl<'a> Client<'a> {
    fn new(hub: &'a Hub, repo: &'a str) -> Client<'a> {
        let config = ureq::Agent::config_builder()
            // Statuses are told apart below, each with its own message.
            .http_status_as_error(false)
            // The token goes to the hub, never to the storage it redirects files to.
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .user_agent(format!("susurrus/{}", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(Duration::from_secs(30)))
            // A server that stops sending is an error, never a hang.
            .timeout_per_read(Some(Duration::from_secs(60)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .build();
        Client { agent: config.into(), hub, repo }
    }

    /// The commit `main` names and the files to download, from the hub's listing.
    fn listing(&self) -> Result<(String, Vec<Remote>), String> {
        let url = format!("{}/api/models/{}/revision/main?blobs=true", self.hub.endpoint, self.repo);
        let mut response = self.send(self.agent.get(&url), &url)?;
        let status = response.status();
        if status != StatusCode::OK {
            return Err(if status == StatusCode::NOT_FOUND {
                format!(
                    "the hub at {} has no repository {} ({url} answered {})",
                    self.hub.endpoint,
                    self.repo,
                    said(status)
                )
            } else {
                self.refused(&url, status)
            });
        }
        let body = response.body_mut().read_to_string().map_err(|e| format!("reading {url}: {e}"))?;
        let listing: Listing =
            serde_json::from_str(&body).map_err(|e| format!("{url} answered what is not the hub's listing: {e}"))?;
        if !is_commit(&listing.sha) {
            return Err(format!("{url} names commit {:?}, which is not a commit id", listing.sha));
        }
        let mut files = Vec::new();
        for sibling in listing.siblings.into_iter().filter(|s| wanted(&s.rfilename)) {
            let (id, size, lfs) = match (sibling.lfs, sibling.blob_id, sibling.size) {
                (Some(lfs), _, _) => (lfs.sha256.to_ascii_lowercase(), lfs.size, true),
                (None, Some(id), Some(size)) => (id.to_ascii_lowercase(), size, false),
                _ => {
                    return Err(format!(
                        "{url} lists {} without its size and id (a mirror without the hub's blobs=true?)",
                        sibling.rfilename
                    ));
                }
            };
            if !is_commit(&id) {
                return Err(format!("{url} gives {} the id {id:?}, which is not a hash", sibling.rfilename));
            }
            files.push(Remote { name: sibling.rfilename, size, id, lfs });
        }
        let has = |f: &str| files.iter().any(|r| r.name == f);
        let lacking: Vec<&str> = ["model.bin", "config.json"].into_iter().filter(|f| !has(f)).collect();
        if !lacking.is_empty() {
            return Err(format!(
                "commit {} of the repository has no {}: it is not a CTranslate2 model",
                listing.sha,
                lacking.join(" or ")
            ));
        }
        if !has("tokenizer.json") && !files.iter().any(|f| f.name.starts_with("vocabulary.")) {
            return Err(format!("commit {} of the repository has no tokenizer.json or vocabulary file", listing.sha));
        }
        Ok((listing.sha, files))
    }

    fn file_url(&self, commit: &str, file: &str) -> String {
        format!("{}/{}/resolve/{commit}/{file}", self.hub.endpoint, self.repo)
    }

    /// GETs `url` from byte `from` on (all of it when 0), following the hub's redirects; the
    /// response and the byte its body starts at (0 when the server sent the whole file).
    fn get_range(&self, url: &str, from: u64) -> Result<(ureq::http::Response<ureq::Body>, u64), String> {
        let mut request = self.agent.get(url);
        if from > 0 {
            request = request.header("Range", format!("bytes={from}-"));
        }
        let response = self.send(request, url)?;
        let status = response.status();
        match status {
            StatusCode::OK => Ok((response, 0)),
            StatusCode::PARTIAL_CONTENT => {
                let range = response.headers().get("content-range").and_then(|v| v.to_str().ok()).unwrap_or("");
                match content_range_start(range) {
                    Some(start) if start == from => Ok((response, from)),
                    _ => Err(format!("{url} answered range {range:?} for bytes {from} on")),
                }
            }
            StatusCode::NOT_FOUND => Err(format!("{url} answered {}", said(status))),
            _ => Err(self.refused(url, status)),
        }
    }

    /// Sends `request` with the token, as a message on a failure to get an answer.
    fn send(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
        url: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, String> {
        let request = match &self.hub.token {
            Some(token) => request.header("Authorization", format!("Bearer {token}")),
            None => request,
        };
        request.call().map_err(|e| {
            format!("cannot reach {url} ({e}): check the network connection, or HF_ENDPOINT, or pass --model DIR")
        })
    }

    /// The message of a status that is neither success nor "not found".
    fn refused(&self, url: &str, status: StatusCode) -> String {
        let said = format!("{url} answered {}", said(status));
        match (status, &self.hub.token) {
            (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, None) => format!(
                "{said}: {} is gated or private; accept its terms on the hub and set HF_TOKEN to a token with access",
                self.repo
            ),
            (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, Some(_)) => {
                format!("{said}: the token (HF_TOKEN or the saved token) has no access to {}", self.repo)
            }
            (s, _) if s.is_server_error() => format!("{said}: the hub failed; try again later"),
            _ => said,
        }
    }
}

/// `404 Not Found`.
fn said(status: StatusCode) -> String {
    format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""))
}

/// The first byte of a `Content-Range: bytes {start}-{end}/{size}` header.
fn content_range_start(value: &str) -> Option<u64> {
    value.strip_prefix("bytes ")?.split('-').next()?.trim().parse().ok()
}

/// `75.5 MB`.
fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// The download's bar on stderr (hidden when stderr is not a terminal) and its notes (printed
/// always, above the bar).
struct Progress {
    bar: ProgressBar,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let style = ProgressStyle::with_template("{msg} [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        Progress { bar: ProgressBar::new(total).with_style(style).with_message("downloading") }
    }

    /// A line on stderr, `susurrus: {line}`; a closed stderr is ignored.
    fn note(&self, line: &str) {
        self.bar.suspend(|| {
            let _ = writeln!(std::io::stderr(), "susurrus: {line}");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_faster_whisper_downloads_and_no_others() {
        for yes in ["config.json", "preprocessor_config.json", "model.bin", "tokenizer.json", "vocabulary.txt"] {
            assert!(wanted(yes), "{yes}");
        }
        for no in ["README.md", ".gitattributes", "vocabulary.", "model.bin.bak", "onnx/model.bin", "vocabulary.x/y"] {
            assert!(!wanted(no), "{no}");
        }
        assert_eq!(content_range_start("bytes 100-199/200"), Some(100));
        assert_eq!(content_range_start("bytes */200"), None);
    }

    /// git's blob id of a known file (`printf 'hello\n' | git hash-object --stdin`).
    #[test]
    fn a_small_files_id_is_gits_blob_id() {
        let file = Remote { name: "x".into(), size: 6, id: String::new(), lfs: false };
        let mut hash = Hash::new(&file);
        hash.update(b"hello\n");
        assert_eq!(hash.finish(), "ce013625030ba8dba906f756967f9e9ca394464a");
    }
}
