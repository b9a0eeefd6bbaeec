//! Getting a model's files into memory: a folder URL fetched file by file with download
//! progress and kept in the Cache API under each file's URL (so the next load needs no
//! network), or files the user picked. The weights file, a CTranslate2 `model.bin` or a
//! `model.safetensors`, is parsed as it arrives ([`Ct2Stream`], [`SafetensorsStream`]: each
//! tensor's data goes straight into its buffer), so the model is never in memory twice; the
//! other files are read whole.
//!
//! Which files to fetch follows from `config.json` (fetched first): the core's
//! [`ModelFormat`] names the files each format needs and the ones loaded when present.

use std::collections::BTreeMap;

use js_sys::{Array, Function, Uint8Array};
use serde::Serialize;
use susurrus_whisper::load::ct2_stream::Ct2Stream;
use susurrus_whisper::load::files::{ModelFormat, ParsedWeights};
use susurrus_whisper::load::hf_stream::SafetensorsStream;
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
    /// The files read whole (all of them but the weights file).
    pub files: BTreeMap<String, Vec<u8>>,
    /// The weights file (`model.bin` or `model.safetensors`), parsed as it arrived.
    pub weights: Option<ParsedWeights>,
    /// Total size of the files.
    pub bytes: usize,
    /// Every file came from the Cache API (no network).
    pub from_cache: bool,
}

/// Where a response's body goes as it is read.
trait Body: Default {
    /// Before the first chunk: the file's name and the body's length when the response says it.
    fn start(&mut self, name: &str, total: Option<usize>);
    fn chunk(&mut self, bytes: &[u8]) -> Result<(), JsValue>;
}

impl Body for Vec<u8> {
    fn start(&mut self, _name: &str, total: Option<usize>) {
        self.reserve(total.unwrap_or(0));
    }

    fn chunk(&mut self, bytes: &[u8]) -> Result<(), JsValue> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

/// The files parsed as they arrive, so that the weights are never in memory twice.
const WEIGHTS_FILES: [&str; 2] = ["model.bin", "model.safetensors"];

/// A weights file parsed as it arrives: a CTranslate2 `model.bin` or a `model.safetensors`.
#[derive(Default)]
struct WeightsFile(Option<WeightsStream>);

enum WeightsStream {
    Ct2(Ct2Stream),
    Hf(SafetensorsStream),
}

impl Body for WeightsFile {
    fn start(&mut self, name: &str, total: Option<usize>) {
        self.0 = Some(match name {
            "model.safetensors" => WeightsStream::Hf(SafetensorsStream::new(name, total)),
            _ => WeightsStream::Ct2(Ct2Stream::new(name, total)),
        });
    }

    fn chunk(&mut self, bytes: &[u8]) -> Result<(), JsValue> {
        match &mut self.0 {
            Some(WeightsStream::Ct2(stream)) => stream.push(bytes).map_err(from_core),
            Some(WeightsStream::Hf(stream)) => stream.push(bytes).map_err(from_core),
            None => Err(js_error("a chunk of the weights came before the body started")),
        }
    }
}

impl WeightsFile {
    fn finish(self) -> Result<ParsedWeights, JsValue> {
        match self.0 {
            Some(WeightsStream::Ct2(stream)) => stream.finish().map(ParsedWeights::Ct2),
            Some(WeightsStream::Hf(stream)) => stream.finish().map(ParsedWeights::Hf),
            None => Ct2Stream::new("model.bin", Some(0)).finish().map(ParsedWeights::Ct2),
        }
        .map_err(from_core)
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
        fetch_file::<Vec<u8>>(&format!("{base}{name}"), name, required, cache.as_ref(), &reporter).await
    };
    let Some((config, _, mut from_cache)) = fetch("config.json", true).await? else {
        return Err(js_error(format!("{base}config.json is missing")));
    };
    let format = ModelFormat::from_config_json(&config).map_err(from_core)?;
    let mut total = config.len();
    let mut files = BTreeMap::from([("config.json".to_string(), config)]);
    // The format's weights file, parsed as it arrives.
    let weights_file = match format {
        ModelFormat::Ct2 => "model.bin",
        ModelFormat::HuggingFace => "model.safetensors",
    };
    let url = format!("{base}{weights_file}");
    let Some((body, length, hit)) =
        fetch_file::<WeightsFile>(&url, weights_file, true, cache.as_ref(), &reporter).await?
    else {
        return Err(js_error(format!("{url} is missing")));
    };
    from_cache &= hit;
    total += length;
    let weights = Some(body.finish()?);
    let required = format
        .required_files()
        .iter()
        .filter(|n| **n != "config.json" && !WEIGHTS_FILES.contains(n))
        .map(|n| (*n, true));
    let optional = format.optional_files().iter().map(|n| (*n, false));
    for (name, required) in required.chain(optional) {
        if let Some((bytes, length, hit)) = fetch(name, required).await? {
            from_cache &= hit;
            total += length;
            files.insert(name.to_string(), bytes);
        }
    }
    Ok(ModelBytes { files, weights, bytes: total, from_cache })
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
    let fetched = fetch_file::<Vec<u8>>(&url, &name, true, cache.as_ref(), &Reporter(on_progress)).await?;
    fetched.map(|(bytes, _, hit)| (bytes, hit)).ok_or_else(|| js_error(format!("{url} is missing")))
}

/// The Cache API cache, or `None` where this context has none (an insecure origin): loading
/// then works without caching.
async fn open_cache() -> Option<Cache> {
    let caches = global::caches()?;
    JsFuture::from(caches.open(CACHE_NAME)).await.ok()?.dyn_into::<Cache>().ok()
}

/// One file into a `B`: from the cache when it holds `url`, else from the network (and then
/// stored). `Ok(None)` for an optional file the server does not have (404). With the body,
/// its length and whether it came from the cache.
async fn fetch_file<B: Body>(
    url: &str,
    name: &str,
    required: bool,
    cache: Option<&Cache>,
    reporter: &Reporter<'_>,
) -> Result<Option<(B, usize, bool)>, JsValue> {
    if let Some(cache) = cache {
        let hit = JsFuture::from(cache.match_with_str(url)).await.ok().and_then(|r| r.dyn_into::<Response>().ok());
        if let Some(response) = hit {
            let mut body = B::default();
            let length = read_body(&response, None, url, name, true, reporter, &mut body).await?;
            return Ok(Some((body, length, true)));
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
    let mut body = B::default();
    let length = read_body(&response, None, url, name, false, reporter, &mut body).await?;
    if let Some(stored) = stored {
        // A full disk or quota only costs the next load a download.
        if let Err(e) = stored.await {
            web_sys_console_warn(&format!("susurrus: {url} was not cached: {}", describe(&e)));
        }
    }
    Ok(Some((body, length, false)))
}

/// Reads a response body to the end into `body`, reporting progress every [`PROGRESS_STEP`]
/// bytes; its length. `length`: the body's length when the caller knows it (a picked file).
async fn read_body(
    response: &Response,
    length: Option<usize>,
    url: &str,
    name: &str,
    from_cache: bool,
    reporter: &Reporter<'_>,
    body: &mut impl Body,
) -> Result<usize, JsValue> {
    // Content-Length counts the encoded bytes of a compressed response (the stream gives them
    // decoded), so it is the total only without a Content-Encoding. A transfer cut short is
    // the stream's error; a truncated file, the parser's.
    let headers = response.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    let encoded = header("content-encoding").is_some_and(|e| !e.eq_ignore_ascii_case("identity"));
    let total = length.or_else(|| header("content-length").filter(|_| !encoded).and_then(|v| v.parse::<usize>().ok()));
    body.start(name, total);
    reporter.report(name, 0, total, from_cache);
    let Some(stream) = response.body() else {
        reporter.report(name, 0, Some(0), from_cache);
        return Ok(0);
    };
    let reader: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    let failed = |e: JsValue| js_error(format!("reading {url} failed: {}", describe(&e)));
    let (mut read, mut reported) = (0, 0);
    let mut buffer = Vec::new();
    loop {
        let chunk: ReadableStreamReadResult = JsFuture::from(reader.read()).await.map_err(failed)?.unchecked_into();
        if chunk.get_done().unwrap_or(true) {
            break;
        }
        let data = Uint8Array::new(&chunk.get_value());
        buffer.resize(data.length() as usize, 0);
        data.copy_to(&mut buffer);
        body.chunk(&buffer)?;
        read += buffer.len();
        if read - reported >= PROGRESS_STEP {
            reported = read;
            reporter.report(name, reported, total, from_cache);
        }
    }
    reporter.report(name, read, Some(read), from_cache);
    Ok(read)
}

/// Reads files the user picked (a `FileList` or an array of `File`s), by file name; a
/// `model.bin` is parsed as it is read, as a downloaded one.
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
        return Err(js_error(
            "a model is a name or a folder URL (a string) or its files (a FileList or an array of File)",
        ));
    };
    // The set of files is checked before anything is read (a second weights file, none).
    let names: Vec<String> = files.iter().map(File::name).collect();
    ModelFormat::from_names(names.iter().map(String::as_str)).map_err(from_core)?;
    let reporter = Reporter(on_progress);
    let (mut out, mut weights, mut total) = (BTreeMap::new(), None, 0);
    for file in files {
        let name = file.name();
        let blob: &Blob = file.as_ref();
        // A Response over the file gives its bytes as a stream, a block at a time.
        let response = Response::new_with_opt_blob(Some(blob))
            .map_err(|e| js_error(format!("cannot read the file {name}: {}", describe(&e))))?;
        let length = Some(blob.size() as usize);
        if WEIGHTS_FILES.contains(&name.as_str()) {
            let mut body = WeightsFile::default();
            total += read_body(&response, length, &name, &name, false, &reporter, &mut body).await?;
            weights = Some(body.finish()?);
        } else {
            let mut body = Vec::new();
            total += read_body(&response, length, &name, &name, false, &reporter, &mut body).await?;
            out.insert(name, body);
        }
    }
    Ok(ModelBytes { files: out, weights, bytes: total, from_cache: false })
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
