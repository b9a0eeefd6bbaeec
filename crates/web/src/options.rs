//! The options objects of the JS API. Decoding options are the core's
//! [`TranscribeOptions`] in camelCase (parsed by serde, so a misspelt option is an error
//! naming the valid ones); the callbacks and the `AbortSignal` ride in the same object and
//! are taken out first.

use js_sys::{Function, Object, Reflect};
use susurrus_whisper::TranscribeOptions;
use susurrus_whisper::live::LiveOptions;
use wasm_bindgen::prelude::*;
use web_sys::AbortSignal;

use crate::backend::BackendChoice;
use crate::error::{from_core, js_error};
use crate::live::LiveCallbacks;

/// The non-decoding parts of `transcribe`'s options.
#[derive(Default)]
pub struct Callbacks {
    pub on_segment: Option<Function>,
    pub on_progress: Option<Function>,
    pub on_device_lost: Option<Function>,
    pub signal: Option<AbortSignal>,
}

/// `load`'s options: `{ backend, cache, onProgress, vad }`.
pub struct LoadOptions {
    pub backend: BackendChoice,
    pub cache: bool,
    pub on_progress: Option<Function>,
    /// The URL of the Silero VAD network (`silero_vad_v6.onnx`), for `vad: true`.
    pub vad: Option<String>,
    /// The Hugging Face hub (or a mirror) a model given by name comes from.
    pub hub: String,
}

/// The hub models given by name come from, unless the load options name another.
pub const DEFAULT_HUB: &str = "https://huggingface.co";

/// The own enumerable properties of an options object (`undefined`/`null`: none), without
/// those whose value is `undefined` (as if they were left out).
fn entries(value: &JsValue, what: &str) -> Result<Vec<(String, JsValue)>, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(Vec::new());
    }
    if !value.is_object() || value.is_function() || js_sys::Array::is_array(value) {
        return Err(js_error(format!("{what} must be an object")));
    }
    let mut out = Vec::new();
    for entry in Object::entries(value.unchecked_ref()).iter() {
        let pair = js_sys::Array::from(&entry);
        let (key, value) = (pair.get(0).as_string().unwrap_or_default(), pair.get(1));
        if !value.is_undefined() {
            out.push((key, value));
        }
    }
    Ok(out)
}

fn function(name: &str, value: JsValue) -> Result<Function, JsValue> {
    value.dyn_into::<Function>().map_err(|_| js_error(format!("{name} must be a function")))
}

/// Splits `transcribe`'s options into decoding options (validated) and callbacks.
pub fn transcribe_options(value: &JsValue) -> Result<(TranscribeOptions, Callbacks), JsValue> {
    let rest = Object::new();
    let mut callbacks = Callbacks::default();
    for (key, value) in entries(value, "the transcribe options")? {
        match key.as_str() {
            "onSegment" => callbacks.on_segment = Some(function("onSegment", value)?),
            "onProgress" => callbacks.on_progress = Some(function("onProgress", value)?),
            "onDeviceLost" => callbacks.on_device_lost = Some(function("onDeviceLost", value)?),
            "signal" => {
                let signal = value.dyn_into::<AbortSignal>().map_err(|_| js_error("signal must be an AbortSignal"))?;
                callbacks.signal = Some(signal);
            }
            _ => {
                Reflect::set(&rest, &JsValue::from_str(&key), &value)?;
            }
        }
    }
    // Through a JSON value: serde-wasm-bindgen reads only the fields a struct names, so
    // serde_json does the struct, and rejects unknown (misspelt) options.
    let invalid = |e: &dyn std::fmt::Display| js_error(format!("invalid option: {e}"));
    let json: serde_json::Value = serde_wasm_bindgen::from_value(rest.into()).map_err(|e| invalid(&e))?;
    let options: TranscribeOptions = serde_json::from_value(json).map_err(|e| invalid(&e))?;
    options.validate().map_err(from_core)?;
    Ok((options, callbacks))
}

/// The stream's own options in `stream`'s options object; every other key is a decoding option.
const LIVE_KEYS: [&str; 6] = ["hop", "vad", "minSilence", "speechPad", "trimAfter", "maxBuffer"];

/// Splits `stream`'s options into the live options (validated) and the callbacks. Decoding
/// options left out keep the live defaults ([`LiveOptions::default`]: greedy, one
/// temperature, word timestamps), not `transcribe`'s.
pub fn stream_options(value: &JsValue) -> Result<(LiveOptions, LiveCallbacks), JsValue> {
    let (live, decoding) = (Object::new(), Object::new());
    let mut callbacks = LiveCallbacks::default();
    let mut given = Vec::new();
    for (key, value) in entries(value, "the stream options")? {
        match key.as_str() {
            "onPartial" => callbacks.on_partial = Some(function("onPartial", value)?),
            "onCommitted" => callbacks.on_committed = Some(function("onCommitted", value)?),
            "onError" => callbacks.on_error = Some(function("onError", value)?),
            "signal" => {
                let signal = value.dyn_into::<AbortSignal>().map_err(|_| js_error("signal must be an AbortSignal"))?;
                callbacks.signal = Some(signal);
            }
            k if LIVE_KEYS.contains(&k) => {
                Reflect::set(&live, &JsValue::from_str(k), &value)?;
            }
            _ => {
                Reflect::set(&decoding, &JsValue::from_str(&key), &value)?;
                given.push(key);
            }
        }
    }
    let invalid = |e: &dyn std::fmt::Display| js_error(format!("invalid option: {e}"));
    let json = |object: Object| -> Result<serde_json::Value, JsValue> {
        serde_wasm_bindgen::from_value(object.into()).map_err(|e| invalid(&e))
    };
    let mut options: LiveOptions = serde_json::from_value(json(live)?).map_err(|e| invalid(&e))?;
    let mut decoding: TranscribeOptions = serde_json::from_value(json(decoding)?).map_err(|e| {
        // serde names the decoding options only; a misspelt stream option is as likely.
        let also = if e.to_string().starts_with("unknown field") {
            format!("; or one of the stream's own: {}, onPartial, onCommitted, onError, signal", LIVE_KEYS.join(", "))
        } else {
            String::new()
        };
        js_error(format!("invalid option: {e}{also}"))
    })?;
    let defaults = &options.transcribe;
    let left_out = |key: &str| !given.iter().any(|k| k == key);
    if left_out("beamSize") {
        decoding.beam_size = defaults.beam_size;
    }
    if left_out("temperatures") {
        decoding.temperatures = defaults.temperatures.clone();
    }
    if left_out("wordTimestamps") {
        decoding.word_timestamps = defaults.word_timestamps;
    }
    options.transcribe = decoding;
    options.validate().map_err(from_core)?;
    Ok((options, callbacks))
}

/// Parses `load`'s options; an unknown key is an error.
pub fn load_options(value: &JsValue) -> Result<LoadOptions, JsValue> {
    let mut out = LoadOptions {
        backend: BackendChoice::Auto,
        cache: true,
        on_progress: None,
        vad: None,
        hub: DEFAULT_HUB.into(),
    };
    for (key, value) in entries(value, "the load options")? {
        match key.as_str() {
            "backend" => {
                let name = value.as_string().ok_or_else(|| js_error("backend must be a string"))?;
                out.backend = BackendChoice::parse(&name)?;
            }
            "cache" => out.cache = value.as_bool().ok_or_else(|| js_error("cache must be true or false"))?,
            "onProgress" => out.on_progress = Some(function("onProgress", value)?),
            "vad" => {
                let url = value.as_string().ok_or_else(|| js_error("vad must be the URL of silero_vad_v6.onnx"))?;
                out.vad = Some(url);
            }
            "hub" => {
                out.hub = value.as_string().ok_or_else(|| js_error("hub must be the URL of a Hugging Face hub"))?;
            }
            other => {
                return Err(js_error(format!(
                    "unknown load option '{other}'; the options are backend, cache, onProgress, vad, hub"
                )));
            }
        }
    }
    Ok(out)
}

/// `bench`'s options: `{ runs, tokens }`.
pub struct BenchOptions {
    pub runs: usize,
    pub tokens: usize,
}

/// Parses `bench`'s options (defaults: 5 runs, 64 tokens, as `susurrus bench`); an unknown
/// key or a count out of range is an error.
pub fn bench_options(value: &JsValue) -> Result<BenchOptions, JsValue> {
    let mut out = BenchOptions { runs: 5, tokens: 64 };
    let count = |name: &str, value: &JsValue, max: usize| -> Result<usize, JsValue> {
        match value.as_f64() {
            Some(n) if n.fract() == 0.0 && n >= 1.0 && n <= max as f64 => Ok(n as usize),
            _ => Err(js_error(format!("{name} must be a whole number from 1 to {max}"))),
        }
    };
    for (key, value) in entries(value, "the bench options")? {
        match key.as_str() {
            "runs" => out.runs = count("runs", &value, 1000)?,
            "tokens" => out.tokens = count("tokens", &value, 200)?,
            other => return Err(js_error(format!("unknown bench option '{other}'; the options are runs, tokens"))),
        }
    }
    Ok(out)
}
