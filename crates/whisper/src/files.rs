//! Reading a model's files from disk: regular files only (a named pipe would wait for a writer
//! that may never come; a link to `/dev/zero` would never end), and a text file never past what
//! one of its kind can hold. Every loader (weights, config, tokenizer, VAD) goes through here.

use std::io::Read;
use std::path::Path;

use crate::error::{Result, model_error};

/// The most bytes a model's text or small file may have: the largest real one, a multilingual
/// `tokenizer.json`, is 2.5 MB; Silero's network is 2.3 MB.
pub const SMALL_FILE_LIMIT: u64 = 64 << 20;

/// `path`'s metadata (links followed) when it is a regular file; else an error naming the file
/// `shown` and what it is.
pub fn regular_file(path: &Path, shown: &str) -> Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path).map_err(|e| model_error(shown, format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(model_error(shown, format!("not a regular file: {}", kind(&meta))));
    }
    Ok(meta)
}

/// The bytes of the regular file at `path`, at most [`SMALL_FILE_LIMIT`] of them.
pub fn read_small(path: &Path, shown: &str) -> Result<Vec<u8>> {
    let meta = regular_file(path, shown)?;
    let too_big = |len: u64| {
        model_error(
            shown,
            format!("{len} bytes: larger than any file of a model of this kind ({} MB)", SMALL_FILE_LIMIT >> 20),
        )
    };
    if meta.len() > SMALL_FILE_LIMIT {
        return Err(too_big(meta.len()));
    }
    let cannot = |e: std::io::Error| model_error(shown, format!("cannot read: {e}"));
    let mut bytes = Vec::new();
    std::fs::File::open(path).map_err(cannot)?.take(SMALL_FILE_LIMIT + 1).read_to_end(&mut bytes).map_err(cannot)?;
    // It grew while it was read.
    if bytes.len() as u64 > SMALL_FILE_LIMIT {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What a file that is not a regular one is, for messages.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    let file_type = meta.file_type();
    if file_type.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a named pipe";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    "not a file"
}
