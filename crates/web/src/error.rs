//! Failures as JS `Error`s: every exported function rejects or throws one of these, with the
//! message a user can act on. A cancelled transcription is an `Error` named `AbortError`, as
//! `fetch` reports an aborted request, so callers tell it apart with `e.name`.

use susurrus_whisper::Error;
use wasm_bindgen::JsValue;

/// Name of the error a cancelled transcription rejects with.
pub const ABORT_ERROR: &str = "AbortError";

/// A JS `Error` with `message`.
pub fn js_error(message: impl AsRef<str>) -> JsValue {
    js_sys::Error::new(message.as_ref()).into()
}

/// A model or core error as a JS `Error` (named `AbortError` when the work was cancelled).
pub fn from_core(e: impl Into<Error>) -> JsValue {
    let e = e.into();
    let error = js_sys::Error::new(&e.to_string());
    if e.is_cancelled() {
        error.set_name(ABORT_ERROR);
        error.set_message("the transcription was aborted");
    }
    error.into()
}

/// The message of a value a JS API threw: an `Error`'s name and message, a string, or its
/// printed form (worded by the audio front end, whose browser store reports such values too).
pub use susurrus_audio::describe;
