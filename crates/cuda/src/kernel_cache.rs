//! Compiled kernel modules kept on disk between runs, so that NVRTC compiles the kernels once
//! per machine instead of on every start (it took most of a `susurrus transcribe`'s start-up).
//!
//! An entry is the CUBIN NVRTC made (the GPU's own code: the driver loads it as it is), named by the SHA-256 of everything that decides it: the
//! module's source, the GPU architecture, NVRTC's version and the compile options. Entries are
//! written to a temporary file and renamed into place, so a reader never sees half of one; an
//! entry that cannot be read, or that the driver refuses, is compiled again and replaced.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A folder of compiled modules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCache {
    dir: PathBuf,
}

impl KernelCache {
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        KernelCache { dir: dir.into() }
    }

    /// `~/.cache/susurrus/kernels`, where the project keeps what it fetches and builds; `None`
    /// without a home directory.
    pub fn default_dir() -> Option<PathBuf> {
        std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| Path::new(&h).join(".cache/susurrus/kernels"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry's file name for a module compiled from `source` with `settings` (the
    /// architecture, compiler version and options, in any stable text form).
    pub fn key(source: &str, settings: &[&str]) -> String {
        let mut hash = Sha256::new();
        for part in std::iter::once(source).chain(settings.iter().copied()) {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        let digest: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        format!("cuda-{digest}.cubin")
    }

    /// The entry `key`, when there is a readable one.
    pub fn load(&self, key: &str) -> Option<Vec<u8>> {
        fs::read(self.dir.join(key)).ok().filter(|module| !module.is_empty())
    }

    /// Stores `module` as entry `key`: written beside it and renamed into place.
    pub fn store(&self, key: &str, module: &[u8]) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let temp = self.dir.join(format!(".{key}.{}.tmp", std::process::id()));
        let written = fs::File::create(&temp).and_then(|mut f| {
            f.write_all(module)?;
            f.sync_all()
        });
        match written.and_then(|()| fs::rename(&temp, self.dir.join(key))) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = fs::remove_file(&temp);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("susurrus-kernel-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn keys_change_with_the_source_and_every_setting() {
        let base = KernelCache::key("kernel", &["sm_90", "13.0", "--std=c++17"]);
        assert!(base.starts_with("cuda-") && base.ends_with(".cubin") && base.len() == 5 + 64 + 6, "{base}");
        assert_eq!(base, KernelCache::key("kernel", &["sm_90", "13.0", "--std=c++17"]));
        for other in [
            KernelCache::key("kernel ", &["sm_90", "13.0", "--std=c++17"]),
            KernelCache::key("kernel", &["sm_80", "13.0", "--std=c++17"]),
            KernelCache::key("kernel", &["sm_90", "13.1", "--std=c++17"]),
            KernelCache::key("kernel", &["sm_90", "13.0"]),
            // Parts are delimited by their lengths: moving text between them changes the key.
            KernelCache::key("kernelsm_90", &["", "13.0", "--std=c++17"]),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn entries_round_trip_and_replace_atomically() {
        let dir = temp_dir("round-trip");
        let cache = KernelCache::at(dir.join("nested"));
        let key = KernelCache::key("src", &["sm_90"]);
        assert_eq!(cache.load(&key), None);
        cache.store(&key, b"\x7fELF a").unwrap();
        assert_eq!(cache.load(&key).as_deref(), Some(&b"\x7fELF a"[..]));
        cache.store(&key, b"\x7fELF b").unwrap();
        assert_eq!(cache.load(&key).as_deref(), Some(&b"\x7fELF b"[..]));
        // Only the entry is left: no temporary files.
        let names: Vec<_> = fs::read_dir(cache.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [std::ffi::OsString::from(&key)]);
        // An empty entry (a crash while something else wrote it) reads as missing.
        fs::write(cache.dir().join(&key), "").unwrap();
        assert_eq!(cache.load(&key), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_that_cannot_be_written_is_an_error_and_leaves_nothing() {
        let dir = temp_dir("blocked");
        fs::create_dir_all(&dir).unwrap();
        // A file where the folder should be.
        let blocked = dir.join("kernels");
        fs::write(&blocked, "not a folder").unwrap();
        let cache = KernelCache::at(&blocked);
        assert!(cache.store("cuda-x.cubin", b"\x7fELF").is_err());
        assert_eq!(fs::read_to_string(&blocked).unwrap(), "not a folder");
        fs::remove_dir_all(&dir).unwrap();
    }
}
