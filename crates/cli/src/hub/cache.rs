//! The Hugging Face hub's cache on disk, laid out as huggingface_hub lays it out, so that
//! faster-whisper's downloads load here as they are and ours load there:
//!
//! - `models--{org}--{name}/blobs/{id}`: each file's bytes once, named by its id on the hub
//!   (an LFS file's SHA-256, else git's blob id); `{id}.incomplete` while it downloads;
//! - `models--{org}--{name}/snapshots/{commit}/{file}`: links into `blobs/`, one folder per
//!   commit;
//! - `models--{org}--{name}/refs/main`: the commit of the `main` revision, written last;
//! - `.locks/models--{org}--{name}/{id}.lock`: held while `{id}` downloads (an advisory lock,
//!   `flock` on Unix, as Python's `filelock` takes it), so that two downloads of one model, ours
//!   or faster-whisper's, never write the same file.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

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

/// One repository's folders in the cache at `cache`.
pub struct RepoCache {
    root: PathBuf,
    locks: PathBuf,
}

impl RepoCache {
    pub fn new(cache: &Path, repo: &str) -> RepoCache {
        let folder = format!("models--{}", repo.replace('/', "--"));
        RepoCache { root: cache.join(&folder), locks: cache.join(".locks").join(folder) }
    }

    /// The repository's folder, `models--{org}--{name}`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the file of id `blob` lies once downloaded.
    pub fn blob(&self, blob: &str) -> PathBuf {
        self.root.join("blobs").join(blob)
    }

    /// Where the file of id `blob` grows while it downloads (kept when a download is cut,
    /// so that the next one resumes from its end).
    pub fn incomplete(&self, blob: &str) -> PathBuf {
        self.root.join("blobs").join(format!("{blob}.incomplete"))
    }

    /// The folder of `commit`'s files.
    pub fn snapshot(&self, commit: &str) -> PathBuf {
        self.root.join("snapshots").join(commit)
    }

    /// Takes the lock of blob `blob`, waiting for whoever holds it (another download of the
    /// same file); `waiting` is called once first when someone does. Released when dropped.
    pub fn lock(&self, blob: &str, waiting: impl FnOnce()) -> std::io::Result<File> {
        std::fs::create_dir_all(&self.locks)?;
        let file =
            File::options().create(true).truncate(false).write(true).open(self.locks.join(format!("{blob}.lock")))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                waiting();
                file.lock()?;
                Ok(file)
            }
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }

    /// Puts `file` of `commit` in its snapshot as a link to blob `blob`, replacing whatever
    /// was there (in one rename: a reader sees the old entry or the new one).
    pub fn link(&self, commit: &str, file: &str, blob: &str) -> std::io::Result<()> {
        let snapshot = self.snapshot(commit);
        std::fs::create_dir_all(&snapshot)?;
        let temporary = snapshot.join(format!(".{file}.{}.link", std::process::id()));
        let _ = std::fs::remove_file(&temporary);
        #[cfg(unix)]
        std::os::unix::fs::symlink(Path::new("../../blobs").join(blob), &temporary)?;
        // Without links (Windows outside developer mode), huggingface_hub copies: so do we.
        #[cfg(not(unix))]
        std::fs::copy(self.blob(blob), &temporary).map(|_| ())?;
        std::fs::rename(&temporary, snapshot.join(file))
    }

    /// Makes `commit` the `main` revision: the last step of a download, so that a cut one
    /// never names a snapshot that lacks files. Written to a temporary file and renamed.
    pub fn set_main(&self, commit: &str) -> std::io::Result<()> {
        let refs = self.root.join("refs");
        std::fs::create_dir_all(&refs)?;
        let mut temporary = tempfile::NamedTempFile::new_in(&refs)?;
        temporary.write_all(commit.as_bytes())?;
        temporary.persist(refs.join("main")).map(|_| ()).map_err(|e| e.error)
    }

    /// The `main` revision's folder, when it holds a model.
    pub fn cached(&self) -> Cached {
        if !self.root.is_dir() {
            return Cached::Missing;
        }
        let reference = self.root.join("refs").join("main");
        let commit = match std::fs::read_to_string(&reference) {
            Ok(commit) => commit.trim().to_string(),
            Err(e) => return Cached::Incomplete(format!("{} cannot be read: {e}", reference.display())),
        };
        if !is_commit(&commit) {
            return Cached::Incomplete(format!("{} does not hold a commit", reference.display()));
        }
        let snapshot = self.snapshot(&commit);
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
}

/// Whether `id` can name a commit or a blob: a file name of letters and digits (the hub's
/// are hexadecimal), never a path.
pub fn is_commit(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The `main` revision of `repo` in the cache at `cache`.
pub fn cached(cache: &Path, repo: &str) -> Cached {
    RepoCache::new(cache, repo).cached()
}
