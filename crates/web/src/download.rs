//! Getting a model's files into memory: a folder URL fetched file by file with download
//! progress and kept in the Cache API under each file's URL (so the next load needs no
//! network), or files the user picked.
//!
//! Which files to fetch follows from `config.json` (fetched first): the core's
//! [`ModelFormat`] names the files each format needs and the ones loaded when present.

use std::collections::BTreeMap;

use js_sys::{Array, Function, Uint8Array};
use serde::Serialize;
use susurrus_whisper::files::ModelFormat;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, Cache, File, ReadableStreamDefaultReader, ReadableStreamReadResult, Response};

use crate::error::{describe, from_core, js_error};
use crate::global;

/// The Cache API cache holding model files, keyed by URL.
pub const CACHE_NAME: &str = "susurrus-models-v1";
/// Bytes between two download progress reports.
const PROGRESS_STEP: usize = 1 << 20;

/// A model's files by name, and where they came from.
pub struct ModelBytes {
    pub files: BTreeMap<String, Vec<u8>>,
    /// Every file came from the Cache API (no network).
    pub from_cache: bool,
}

impl ModelBytes {
    /// Total size of the files.
    pub fn bytes(&self) -> usize {
        self.files.values().map(Vec::len).sum()
    }
}

/// What `onProgress` receives while a model loads.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LoadProgress<'a> {
    file: &'a str,
    loaded: f64,
    total: Option<f64>,
    from_cache: bool,
}

/// Reports progress to the caller's `onProgress`, if any. A throwing callback does not stop
/// the download.
struct Reporter<'a>(Option<&'a Function>);

impl Reporter<'_> {
    fn report(&self, file: &str, loaded: usize, total: Option<usize>, from_cache: bool) {
        let Some(callback) = self.0 else { return };
        let progress = LoadProgress { file, loaded: loaded as f64, total: total.map(|t| t as f64), from_cache };
        if let Ok(value) = progress.serialize(&serde_wasm_bindgen::Serializer::json_compatible()) {
            let _ = callback.call1(&JsValue::NULL, &value);
        }
    }
}

/// Fetches the model folder at `base_url` (made absolute; a missing trailing `/` is added).
pub async fn fetch_folder(
    base_url: &str,
    use_cache: bool,
    on_progress: Option<&Function>,
) -> Result<ModelBytes, JsValue> {
    let mut base = global::absolute_url(base_url)?;
    if !base.ends_with('/') {
        base.push('/');
    }
    let cache = if use_cache { open_cache().await } else { None };
    let reporter = Reporter(on_progress);
    let fetch = async |name: &str, required: bool| {
        fetch_file(&format!("{base}{name}"), name, required, cache.as_ref(), &reporter).await
    };
    let Some((config, mut from_cache)) = fetch("config.json", true).await? else {
        return Err(js_error(format!("{base}config.json is missing")));
    };
    let format = ModelFormat::from_config_json(&config).map_err(from_core)?;
    let mut files = BTreeMap::from([("config.json".to_string(), config)]);
    let required = format.required_files().iter().filter(|n| **n != "config.json").map(|n| (*n, true));
    let optional = format.optional_files().iter().map(|n| (*n, false));
    for (name, required) in required.chain(optional) {
        if let Some((bytes, hit)) = fetch(name, required).await? {
            from_cache &= hit;
            files.insert(name.to_string(), bytes);
        }
    }
    Ok(ModelBytes { files, from_cache })
}

/// Fetches the one file at `url` (made absolute), through the model cache when `use_cache`;
/// the flag says whether it came from the cache.
pub async fn fetch_single(
    url: &str,
    use_cache: bool,
    on_progress: Option<&Function>,
) -> Result<(Vec<u8>, bool), JsValue> {
    let url = global::absolute_url(url)?;
    let name = url.rsplit('/').next().unwrap_or(&url).to_string();
    let cache = if use_cache { open_cache().await } else { None };
    let fetched = fetch_file(&url, &name, true, cache.as_ref(), &Reporter(on_progress)).await?;
    fetched.ok_or_else(|| js_error(format!("{url} is missing")))
}

/// The Cache API cache, or `None` where this context has none (an insecure origin): loading
/// then works without caching.
async fn open_cache() -> Option<Cache> {
    let caches = global::caches()?;
    JsFuture::from(caches.open(CACHE_NAME)).await.ok()?.dyn_into::<Cache>().ok()
}

/// One file: from the cache when it holds `url`, else from the network (and then stored).
/// `Ok(None)` for an optional file the server does not have (404). The flag says whether the
/// bytes came from the cache.
async fn fetch_file(
    url: &str,
    name: &str,
    required: bool,
    cache: Option<&Cache>,
    reporter: &Reporter<'_>,
) -> Result<Option<(Vec<u8>, bool)>, JsValue> {
    if let Some(cache) = cache {
        let hit = JsFuture::from(cache.match_with_str(url)).await.ok().and_then(|r| r.dyn_into::<Response>().ok());
        if let Some(response) = hit {
            let bytes = read_body(&response, url, name, true, reporter).await?;
            return Ok(Some((bytes, true)));
        }
    }
    let response = global::fetch(url).await?;
    if response.status() == 404 && !required {
        return Ok(None);
    }
    if !response.ok() {
        return Err(js_error(format!("cannot load {url}: HTTP {} {}", response.status(), response.status_text())));
    }
    // The cache reads a copy of the body while this function reads the other.
    let stored = match (cache, response.clone()) {
        (Some(cache), Ok(copy)) => Some(JsFuture::from(cache.put_with_str(url, &copy))),
        _ => None,
    };
    let bytes = read_body(&response, url, name, false, reporter).await?;
    if let Some(stored) = stored {
        // A full disk or quota only costs the next load a download.
        if let Err(e) = stored.await {
            web_sys_console_warn(&format!("susurrus: {url} was not cached: {}", describe(&e)));
        }
    }
    Ok(Some((bytes, false)))
}

/// Reads a response body to the end, reporting progress every [`PROGRESS_STEP`] bytes.
async fn read_body(
    response: &Response,
    url: &str,
    name: &str,
    from_cache: bool,
    reporter: &Reporter<'_>,
) -> Result<Vec<u8>, JsValue> {
    // Content-Length counts the encoded bytes of a compressed response (the stream gives them
    // decoded), so it is the total only without a Content-Encoding. A transfer cut short is
    // the stream's error; a truncated file, the parser's.
    let headers = response.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    let encoded = header("content-encoding").is_some_and(|e| !e.eq_ignore_ascii_case("identity"));
    let total = header("content-length").filter(|_| !encoded).and_then(|v| v.parse::<usize>().ok());
    let mut bytes = Vec::with_capacity(total.unwrap_or(0));
    reporter.report(name, 0, total, from_cache);
    let Some(body) = response.body() else {
        reporter.report(name, 0, Some(0), from_cache);
        return Ok(bytes);
    };
    let reader: ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let failed = |e: JsValue| js_error(format!("download of {url} failed: {}", describe(&e)));
    let mut reported = 0;
    loop {
        let chunk: ReadableStreamReadResult = JsFuture::from(reader.read()).await.map_err(failed)?.unchecked_into();
        if chunk.get_done().unwrap_or(true) {
            break;
        }
        let data = Uint8Array::new(&chunk.get_value());
        let start = bytes.len();
        bytes.resize(start + data.length() as usize, 0);
        data.copy_to(&mut bytes[start..]);
        if bytes.len() - reported >= PROGRESS_STEP {
            reported = bytes.len();
            reporter.report(name, reported, total, from_cache);
        }
    }
    reporter.report(name, bytes.len(), Some(bytes.len()), from_cache);
    Ok(bytes)
}

/// Reads files the user picked (a `FileList` or an array of `File`s), by file name.
pub async fn read_files(list: &JsValue, on_progress: Option<&Function>) -> Result<ModelBytes, JsValue> {
    let files: Vec<File> = if let Some(list) = list.dyn_ref::<web_sys::FileList>() {
        (0..list.length()).filter_map(|i| list.get(i)).collect()
    } else if Array::is_array(list) {
        let array = Array::from(list);
        array
            .iter()
            .map(|f| f.dyn_into::<File>().map_err(|_| js_error("the model's files must be File objects")))
            .collect::<Result<_, _>>()?
    } else {
        return Err(js_error("a model is a folder URL (a string) or its files (a FileList or an array of File)"));
    };
    let reporter = Reporter(on_progress);
    let mut out = BTreeMap::new();
    for file in files {
        let name = file.name();
        let blob: &Blob = file.as_ref();
        let buffer = JsFuture::from(blob.array_buffer())
            .await
            .map_err(|e| js_error(format!("cannot read the file {name}: {}", describe(&e))))?;
        let bytes = Uint8Array::new(&buffer).to_vec();
        reporter.report(&name, bytes.len(), Some(bytes.len()), false);
        out.insert(name, bytes);
    }
    Ok(ModelBytes { files: out, from_cache: false })
}

/// Deletes the model cache; `true` when there was one.
pub async fn clear_cache() -> Result<bool, JsValue> {
    let Some(caches) = global::caches() else { return Ok(false) };
    let deleted = JsFuture::from(caches.delete(CACHE_NAME))
        .await
        .map_err(|e| js_error(format!("cannot clear the model cache: {}", describe(&e))))?;
    Ok(deleted.as_bool().unwrap_or(false))
}

fn web_sys_console_warn(message: &str) {
    web_sys::console::warn_1(&JsValue::from_str(message));
}
