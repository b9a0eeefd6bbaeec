//! Where the browser's decoder puts 16 kHz samples: the module's memory for the first two
//! minutes ([`IN_MEMORY`]), then a file in the origin's private file system, written and read
//! synchronously (`FileSystemSyncAccessHandle`, which workers have), so that a recording of
//! any length leaves memory flat, as the native command's temporary file does. Where no such
//! file can be opened (on a page, or where storage is refused) the rest goes to JavaScript
//! memory, a block at a time, and never into the module's memory (which does not shrink).

use js_sys::{Float32Array, Reflect, Uint8Array};
use susurrus_whisper::audio::{IN_MEMORY, SampleSink};
use susurrus_whisper::{Audio, Error as WhisperError};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetDirectoryOptions, FileSystemGetFileOptions,
    FileSystemReadWriteOptions, FileSystemSyncAccessHandle, StorageManager,
};

use crate::error::describe;

/// The private file system's folder of the package's audio files.
const FOLDER: &str = "susurrus-audio";

/// Samples per block of JavaScript memory (4 MB).
const JS_BLOCK: usize = 1 << 20;

/// The decoded samples of one file.
pub struct JsSamples {
    len: usize,
    store: Store,
    /// The file opened before decoding (opening one waits on promises; pushing samples
    /// cannot), used once the samples outgrow memory.
    spill: Option<Spill>,
}

enum Store {
    Memory(Vec<f32>),
    File(Spill),
    /// Blocks of [`JS_BLOCK`] samples, the last one filled up to `len`.
    Js(Vec<Float32Array>),
}

impl JsSamples {
    /// An empty store, with a private file opened for it where this context can write one.
    pub async fn new() -> JsSamples {
        JsSamples { len: 0, store: Store::Memory(Vec::new()), spill: Spill::open().await }
    }

    /// Where the samples are: "memory", "file" or "javascript" (for tests and messages).
    pub fn place(&self) -> &'static str {
        match self.store {
            Store::Memory(_) => "memory",
            Store::File(_) => "file",
            Store::Js(_) => "javascript",
        }
    }

    /// Moves what memory holds to the file or to JavaScript memory.
    fn move_out(&mut self) -> Result<(), String> {
        let memory = match &mut self.store {
            Store::Memory(memory) => std::mem::take(memory),
            _ => return Ok(()),
        };
        self.store = match self.spill.take() {
            Some(spill) => {
                spill.write(0, &memory)?;
                Store::File(spill)
            }
            None => {
                let mut blocks = Vec::new();
                write_js(&mut blocks, 0, &memory);
                Store::Js(blocks)
            }
        };
        Ok(())
    }
}

impl SampleSink for JsSamples {
    fn push(&mut self, samples: &[f32]) -> Result<(), String> {
        if let Store::Memory(memory) = &mut self.store {
            if memory.len() + samples.len() <= IN_MEMORY {
                memory.extend_from_slice(samples);
                self.len += samples.len();
                return Ok(());
            }
            self.move_out()?;
        }
        match &mut self.store {
            Store::File(spill) => spill.write(self.len, samples)?,
            Store::Js(blocks) => write_js(blocks, self.len, samples),
            Store::Memory(_) => return Err("the audio store did not move out of memory".into()),
        }
        self.len += samples.len();
        Ok(())
    }

    fn count(&self) -> usize {
        self.len
    }

    /// Only the count shrinks outside memory: reads never go past it.
    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
        if let Store::Memory(memory) = &mut self.store {
            memory.truncate(len);
        }
    }

    fn reserve(&mut self, additional: usize) {
        if let Store::Memory(memory) = &mut self.store {
            let _ = memory.try_reserve_exact(additional.min(IN_MEMORY.saturating_sub(memory.len())));
        }
    }

    fn finish(mut self) -> Result<Self, String> {
        match &mut self.store {
            Store::Memory(memory) => memory.shrink_to_fit(),
            Store::File(spill) => spill.handle.flush().map_err(|e| spill.failed("write", &e))?,
            Store::Js(_) => {}
        }
        // An unused file goes now rather than when the samples do.
        self.spill = None;
        Ok(self)
    }
}

impl Audio for JsSamples {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, start: usize, out: &mut [f32]) -> Result<(), WhisperError> {
        let n = self.len.saturating_sub(start).min(out.len());
        match &self.store {
            Store::Memory(memory) => return memory.read(start, out),
            Store::File(spill) => spill.read(start, &mut out[..n]).map_err(WhisperError::AudioRead)?,
            Store::Js(blocks) => {
                let mut at = start;
                while at < start + n {
                    let (block, offset) = (at / JS_BLOCK, at % JS_BLOCK);
                    let take = (JS_BLOCK - offset).min(start + n - at);
                    blocks[block]
                        .subarray(offset as u32, (offset + take) as u32)
                        .copy_to(&mut out[at - start..at - start + take]);
                    at += take;
                }
            }
        }
        out[n..].fill(0.0);
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
struct Spill {
    folder: FileSystemDirectoryHandle,
    name: String,
    handle: FileSystemSyncAccessHandle,
}

impl Spill {
    /// A new file, or `None` where this context cannot write one synchronously.
    async fn open() -> Option<Spill> {
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
            Ok(handle) => Some(Spill { folder, name, handle }),
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
        let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
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
        for (out, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *out = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(())
    }
}

impl Drop for Spill {
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
