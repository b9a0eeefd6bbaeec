//! What the browser tests share: the small random-weight model as `File`s, test audio, and
//! awaiting the package's promises.

use js_sys::{Array, Float32Array, Object, Reflect, Uint8Array};
use susurrus_testkit::whisper::small_model_files;
use susurrus_web::Model;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// `files` as `File` objects, as an `<input type="file" multiple>` gives them.
pub fn as_files(files: &[(&str, &[u8])]) -> JsValue {
    let list = Array::new();
    for (name, bytes) in files {
        let parts = Array::of1(&Uint8Array::from(*bytes));
        list.push(&web_sys::File::new_with_u8_array_sequence(&parts, name).expect("File"));
    }
    list.into()
}

/// The small random-weight Whisper of the core's harness (seed 5) as picked files.
pub fn small_model() -> JsValue {
    let files = small_model_files(5).expect("the small model");
    let named: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    as_files(&named)
}

/// A JS object from `(key, value)` pairs.
pub fn object(pairs: &[(&str, JsValue)]) -> Object {
    let o = Object::new();
    for (k, v) in pairs {
        Reflect::set(&o, &JsValue::from_str(k), v).expect("set");
    }
    o
}

/// Loads the small model on `backend`.
pub async fn load_small(backend: &str) -> Result<Model, JsValue> {
    Model::load(small_model(), Some(object(&[("backend", backend.into())]))).await
}

/// Three seconds of tones and seeded noise at 16 kHz: something for the encoder to look at.
pub fn test_audio() -> Float32Array {
    let mut state = 12345u32;
    let samples: Vec<f32> = (0..48000)
        .map(|i| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let noise = (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
            let t = i as f32 / 16000.0;
            0.3 * (2.0 * std::f32::consts::PI * 220.0 * t).sin()
                + 0.2 * (2.0 * std::f32::consts::PI * 1375.0 * t * t).sin()
                + 0.1 * noise
        })
        .collect();
    Float32Array::from(samples.as_slice())
}

/// Awaits a promise the package returned.
pub async fn settle(promise: js_sys::Promise) -> Result<JsValue, JsValue> {
    JsFuture::from(promise).await
}

/// The message of a JS `Error` (panics, failing the test, when the value is not an `Error`).
pub fn error_message(e: &JsValue) -> String {
    let error = e.dyn_ref::<js_sys::Error>().unwrap_or_else(|| panic!("not a JS Error: {e:?}"));
    String::from(error.message())
}

/// `object[key]`.
pub fn get(object: &JsValue, key: &str) -> JsValue {
    Reflect::get(object, &JsValue::from_str(key)).expect("get")
}
