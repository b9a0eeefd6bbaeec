//! A browser without WebGPU (its `navigator.gpu` removed before anything asks for it): `auto`
//! runs on the CPU backend and says why, `webgpu` is an error that says what is missing.
//! A file of its own: each test file gets a fresh page, so no other test sees the removal.
#![cfg(target_arch = "wasm32")]

mod support;

use js_sys::Reflect;
use support::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn remove_webgpu() {
    let navigator = Reflect::get(&js_sys::global(), &"Navigator".into()).expect("Navigator");
    let prototype = Reflect::get(&navigator, &"prototype".into()).expect("Navigator.prototype");
    Reflect::delete_property(prototype.unchecked_ref::<js_sys::Object>(), &"gpu".into()).expect("delete");
    let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).expect("navigator");
    assert!(Reflect::get(&navigator, &"gpu".into()).unwrap().is_undefined(), "navigator.gpu is still there");
}

#[wasm_bindgen_test]
async fn without_webgpu_auto_runs_on_the_cpu_and_webgpu_is_an_error() {
    remove_webgpu();
    let model = load_small("auto").await.unwrap_or_else(|e| panic!("{}", error_message(&e)));
    let info = model.info().unwrap();
    assert_eq!(get(&info, "backend"), "cpu");
    assert_eq!(get(&info, "fallbackReason"), "this browser has no WebGPU (navigator.gpu is missing)");
    let result = settle(model.transcribe(test_audio().into(), None)).await.unwrap();
    assert_eq!(get(&result, "backend"), "cpu");
    assert_eq!(get(&result, "adapter"), "CPU (WebAssembly, one thread)");

    let err = load_small("webgpu").await.err().expect("no WebGPU to run on");
    assert_eq!(error_message(&err), "this browser has no WebGPU (navigator.gpu is missing)");
}
