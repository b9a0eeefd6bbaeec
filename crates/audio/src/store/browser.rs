//! The browser's spill: a file in the origin's private file system, written and read
//! synchronously (`FileSystemSyncAccessHandle`, which workers have), so that a recording of any
//! length leaves memory flat, as the native command's temporary file does. Where no such file
//! can be opened (on a page, or where storage is refused) the samples go to JavaScript memory,
//! a block at a time, and never into the module's memory (which does not shrink).

use js_sys::{Float32Array, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetDirectoryOptions, FileSystemGetFileOptions,
    FileSystemReadWriteOptions, FileSystemSyncAccessHandle, StorageManager,
};

use super::{Spill, Store, from_bytes, to_bytes};

/// The private file system's folder of the package's audio files.
const FOLDER: &str = "susurrus-audio";

/// Samples per block of JavaScript memory (4 MB).
const JS_BLOCK: usize = 1 << 20;

/// The browser package's store: the module's memory, then a private file or JavaScript memory.
pub type JsSamples = Store<BrowserSpill>;

impl JsSamples {
    /// An empty store, with a private file opened for it where this context can write one
    /// (opening one waits on promises; pushing samples cannot).
    pub async fn new() -> JsSamples {
        Store::with(match OpfsFile::open().await {
            Some(file) => BrowserSpill::File(file),
            None => BrowserSpill::Js(Vec::new()),
        })
    }

    /// Where the samples are: "memory", "file" or "javascript" (for tests and messages).
    pub fn place(&self) -> &'static str {
        match self.spill() {
            None => "memory",
            Some(BrowserSpill::File(_)) => "file",
            Some(BrowserSpill::Js(_)) => "javascript",
        }
    }
}

/// Where a browser's samples go past memory.
pub enum BrowserSpill {
    File(OpfsFile),
    /// Blocks of [`JS_BLOCK`] samples, the last one filled up to the store's length.
    Js(Vec<Float32Array>),
}

impl Spill for BrowserSpill {
    fn write(&mut self, at: usize, samples: &[f32]) -> Result<(), String> {
        match self {
            BrowserSpill::File(file) => file.write(at, samples),
            BrowserSpill::Js(blocks) => {
                write_js(blocks, at, samples);
                Ok(())
            }
        }
    }

    fn finish(&mut self) -> Result<(), String> {
        match self {
            BrowserSpill::File(file) => file.handle.flush().map_err(|e| file.failed("write", &e)),
            BrowserSpill::Js(_) => Ok(()),
        }
    }

    fn read(&self, start: usize, out: &mut [f32]) -> Result<(), String> {
        let blocks = match self {
            BrowserSpill::File(file) => return file.read(start, out),
            BrowserSpill::Js(blocks) => blocks,
        };
        let (mut at, end) = (start, start + out.len());
        while at < end {
            let (block, offset) = (at / JS_BLOCK, at % JS_BLOCK);
            let take = (JS_BLOCK - offset).min(end - at);
            blocks[block]
                .subarray(offset as u32, (offset + take) as u32)
                .copy_to(&mut out[at - start..at - start + take]);
            at += take;
        }
        Ok(())
    }
}

/// Writes `samples` at position `at` (the end) of JavaScript memory blocks.
fn write_js(blocks: &mut Vec<Float32Array>, mut at: usize, mut samples: &[f32]) {
    while !samples.is_empty() {
        let (block, offset) = (at / JS_BLOCK, at % JS_BLOCK);
        if block == blocks.len() {
            blocks.push(Float32Array::new_with_length(JS_BLOCK as u32));
        }
        let take = (JS_BLOCK - offset).min(samples.len());
        blocks[block].subarray(offset as u32, (offset + take) as u32).copy_from(&samples[..take]);
        (at, samples) = (at + take, &samples[take..]);
    }
}

/// A file of little-endian f32 samples in the origin's private file system, removed when
/// dropped. Files a closed tab left behind are removed when the next one is opened.
pub struct OpfsFile {
    folder: FileSystemDirectoryHandle,
    name: String,
    handle: FileSystemSyncAccessHandle,
}

impl OpfsFile {
    /// A new file, or `None` where this context cannot write one synchronously.
    async fn open() -> Option<OpfsFile> {
        // Only dedicated workers have synchronous handles (pages have no such class).
        if !Reflect::has(&js_sys::global(), &"FileSystemSyncAccessHandle".into()).unwrap_or(false) {
            return None;
        }
        let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
        let storage: StorageManager = Reflect::get(&navigator, &"storage".into()).ok()?.dyn_into().ok()?;
        let root: FileSystemDirectoryHandle = JsFuture::from(storage.get_directory()).await.ok()?.dyn_into().ok()?;
        let create = FileSystemGetDirectoryOptions::new();
        create.set_create(true);
        let folder: FileSystemDirectoryHandle =
            JsFuture::from(root.get_directory_handle_with_options(FOLDER, &create)).await.ok()?.dyn_into().ok()?;
        remove_left_behind(&folder).await;
        let name = format!("{:x}-{:08x}.f32", js_sys::Date::now() as u64, (js_sys::Math::random() * 4e9) as u32);
        let create = FileSystemGetFileOptions::new();
        create.set_create(true);
        let file: FileSystemFileHandle =
            JsFuture::from(folder.get_file_handle_with_options(&name, &create)).await.ok()?.dyn_into().ok()?;
        // Storage may still refuse the handle.
        match JsFuture::from(file.create_sync_access_handle()).await.and_then(|h| h.dyn_into()) {
            Ok(handle) => Some(OpfsFile { folder, name, handle }),
            Err(_) => {
                let _ = JsFuture::from(folder.remove_entry(&name)).await;
                None
            }
        }
    }

    fn failed(&self, what: &str, e: &JsValue) -> String {
        format!("cannot {what} the audio's file {FOLDER}/{} in the browser's storage: {}", self.name, describe(e))
    }

    /// Writes `samples` from sample `at` on.
    fn write(&self, at: usize, samples: &[f32]) -> Result<(), String> {
        let bytes = to_bytes(samples);
        let options = FileSystemReadWriteOptions::new();
        options.set_at_f64(at as f64 * 4.0);
        let written = self
            .handle
            .write_with_js_u8_array_and_options(&Uint8Array::from(&bytes[..]), &options)
            .map_err(|e| self.failed("write", &e))?;
        if written as usize != bytes.len() {
            return Err(format!(
                "the browser's storage took {written} of {} bytes of the audio's file {FOLDER}/{} (is it full?)",
                bytes.len(),
                self.name
            ));
        }
        Ok(())
    }

    /// Reads `out.len()` samples from sample `at` on (all written).
    fn read(&self, at: usize, out: &mut [f32]) -> Result<(), String> {
        let js = Uint8Array::new_with_length(out.len() as u32 * 4);
        let options = FileSystemReadWriteOptions::new();
        options.set_at_f64(at as f64 * 4.0);
        let read = self.handle.read_with_js_u8_array_and_options(&js, &options).map_err(|e| self.failed("read", &e))?;
        if read as usize != out.len() * 4 {
            return Err(format!(
                "samples {at} to {} of the audio's file {FOLDER}/{}: read {read} of {} bytes",
                at + out.len(),
                self.name,
                out.len() * 4
            ));
        }
        let mut bytes = vec![0u8; out.len() * 4];
        js.copy_to(&mut bytes);
        from_bytes(&bytes, out);
        Ok(())
    }
}

impl Drop for OpfsFile {
    fn drop(&mut self) {
        self.handle.close();
        let (folder, name) = (self.folder.clone(), self.name.clone());
        wasm_bindgen_futures::spawn_local(async move {
            // Already gone is as good as removed.
            let _ = JsFuture::from(folder.remove_entry(&name)).await;
        });
    }
}

/// Removes the files of tabs that ended without removing theirs; a file another tab is using
/// is locked by its handle and stays.
async fn remove_left_behind(folder: &FileSystemDirectoryHandle) {
    let names = folder.keys();
    let mut found = Vec::new();
    while let Ok(next) = names.next() {
        let Ok(step) = JsFuture::from(next).await else { break };
        if Reflect::get(&step, &"done".into()).ok().and_then(|d| d.as_bool()) != Some(false) {
            break;
        }
        if let Some(name) = Reflect::get(&step, &"value".into()).ok().and_then(|v| v.as_string()) {
            found.push(name);
        }
    }
    for name in found {
        let _ = JsFuture::from(folder.remove_entry(&name)).await;
    }
}

/// A thrown JavaScript value as a message: its name and message for an `Error`, else its text.
/// The one wording of the browser's errors, for this store and the package above it.
pub fn describe(thrown: &JsValue) -> String {
    if let Some(e) = thrown.dyn_ref::<js_sys::Error>() {
        let (name, message) = (String::from(e.name()), String::from(e.message()));
        return if name == "Error" || name.is_empty() { message } else { format!("{name}: {message}") };
    }
    thrown.as_string().unwrap_or_else(|| format!("{thrown:?}"))
}
