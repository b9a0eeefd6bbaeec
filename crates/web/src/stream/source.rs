//! The encoded file as symphonia reads it: a seekable byte source over a `Blob` (read a block
//! at a time with `FileReaderSync`, in workers, so a file the user picked is never in memory
//! whole) or over bytes already in JavaScript memory (an `ArrayBuffer`, a `Uint8Array`).

use std::io::{Read, Seek, SeekFrom};

use js_sys::{ArrayBuffer, Uint8Array};
use send_wrapper::SendWrapper;
use symphonia_core::io::MediaSource;
use wasm_bindgen::JsCast;
use web_sys::{Blob, FileReaderSync};

use crate::error::describe;

/// Where the bytes are.
pub enum Bytes {
    /// In JavaScript memory.
    Array(Uint8Array),
    /// A `Blob` (a `File`), read with `FileReaderSync`, which only workers have.
    Blob(Blob, FileReaderSync),
}

impl Bytes {
    /// A `Blob` read a block at a time where this context can read one synchronously (a
    /// worker), else `None`.
    pub fn blob(blob: &Blob) -> Option<Bytes> {
        FileReaderSync::new().ok().map(|reader| Bytes::Blob(blob.clone(), reader))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> u64 {
        match self {
            Bytes::Array(array) => u64::from(array.length()),
            Bytes::Blob(blob, _) => blob.size() as u64,
        }
    }

    /// Copies bytes `start..start + out.len()` (all within the source) into `out`.
    fn read_at(&self, start: u64, out: &mut [u8]) -> std::io::Result<()> {
        let end = start + out.len() as u64;
        match self {
            Bytes::Array(array) => array.subarray(start as u32, end as u32).copy_to(out),
            Bytes::Blob(blob, reader) => {
                let failed = |e: wasm_bindgen::JsValue| {
                    std::io::Error::other(format!("cannot read bytes {start} to {end} of the file: {}", describe(&e)))
                };
                let slice = blob.slice_with_f64_and_f64(start as f64, end as f64).map_err(failed)?;
                let buffer: ArrayBuffer = reader.read_as_array_buffer(&slice).map_err(failed)?.unchecked_into();
                let bytes = Uint8Array::new(&buffer);
                if bytes.length() as usize != out.len() {
                    return Err(std::io::Error::other(format!(
                        "reading bytes {start} to {end} of the file gave {} bytes (did the file change?)",
                        bytes.length()
                    )));
                }
                bytes.copy_to(out);
            }
        }
        Ok(())
    }
}

/// A [`MediaSource`] over [`Bytes`]. symphonia wants sources that are `Send`; JavaScript
/// objects are not, and this one never leaves the thread that made it (the decoder runs
/// there): `SendWrapper` checks that.
pub struct Source {
    bytes: SendWrapper<Bytes>,
    len: u64,
    position: u64,
}

impl Source {
    pub fn new(bytes: Bytes) -> Source {
        let len = bytes.len();
        Source { bytes: SendWrapper::new(bytes), len, position: 0 }
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.len.saturating_sub(self.position)).min(buf.len() as u64) as usize;
        if n > 0 {
            self.bytes.read_at(self.position, &mut buf[..n])?;
            self.position += n as u64;
        }
        Ok(n)
    }
}

impl Seek for Source {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let target = match pos {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::End(by) => self.len.checked_add_signed(by),
            SeekFrom::Current(by) => self.position.checked_add_signed(by),
        };
        let target = target.ok_or_else(|| std::io::Error::other("seek before the start of the file"))?;
        self.position = target;
        Ok(target)
    }
}

impl MediaSource for Source {
    fn is_seekable(&self) -> bool {
        true
    }

    fn byte_len(&self) -> Option<u64> {
        Some(self.len)
    }
}
