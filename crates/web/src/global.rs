//! The globals the package uses, looked up on `globalThis` so one build runs on a page and in
//! a worker (where there is no `window`).

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{CacheStorage, Response};

use crate::error::{describe, js_error};

#[wasm_bindgen]
extern "C" {
    /// `globalThis.fetch`, which pages and workers both have.
    #[wasm_bindgen(js_name = fetch, catch)]
    fn global_fetch(input: &str) -> Result<js_sys::Promise, JsValue>;
}

fn global() -> Object {
    js_sys::global()
}

/// `globalThis[name]`, or `undefined`.
fn get(target: &JsValue, name: &str) -> JsValue {
    Reflect::get(target, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED)
}

thread_local! {
    /// `performance`, looked up once: the pacing reads the clock before every run.
    static PERFORMANCE: Option<web_sys::Performance> = get(&global(), "performance").dyn_into().ok();
}

/// Milliseconds from `performance.now()` (`Date.now()` where there is no `performance`).
pub fn now_ms() -> f64 {
    PERFORMANCE.with(|p| p.as_ref().map_or_else(js_sys::Date::now, web_sys::Performance::now))
}

/// `navigator.gpu`, where WebGPU is exposed (an adapter may still be missing).
pub fn webgpu() -> Option<JsValue> {
    let navigator = get(&global(), "navigator");
    let gpu = if navigator.is_object() { get(&navigator, "gpu") } else { JsValue::UNDEFINED };
    gpu.is_object().then_some(gpu)
}

/// `url` made absolute against the page's (or worker's) address.
pub fn absolute_url(url: &str) -> Result<String, JsValue> {
    let location = get(&get(&global(), "location"), "href");
    let parsed = match location.as_string() {
        Some(base) => web_sys::Url::new_with_base(url, &base),
        None => web_sys::Url::new(url),
    };
    parsed.map(|u| u.href()).map_err(|e| js_error(format!("'{url}' is not a URL: {}", describe(&e))))
}

/// The Cache API, where this context has it (secure contexts only: https or localhost).
pub fn caches() -> Option<CacheStorage> {
    get(&global(), "caches").dyn_into::<CacheStorage>().ok()
}

/// Fetches `url`; a network failure is an error naming the URL (HTTP statuses are the
/// caller's to check).
pub async fn fetch(url: &str) -> Result<Response, JsValue> {
    let failed = |e: JsValue| js_error(format!("cannot fetch {url}: {}", describe(&e)));
    let promise = global_fetch(url).map_err(failed)?;
    let response = wasm_bindgen_futures::JsFuture::from(promise).await.map_err(failed)?;
    response.dyn_into::<Response>().map_err(|_| js_error(format!("fetch of {url} returned no Response")))
}

/// Resolves on a later task, so the event loop runs: a worker's message handler (an abort)
/// and a page's rendering get their turn during long CPU work.
pub async fn next_task() {
    gloo_timers::future::TimeoutFuture::new(0).await;
}
