//! Which backend a model runs on: WebGPU when the browser has a hardware adapter, else the
//! fast CPU backend (`susurrus-cpu`) compiled to WebAssembly with SIMD128, on one thread.
//! `auto` falls back to the CPU and says why; asking for `webgpu` where there is none is an
//! error.
//!
//! A software adapter (`isFallbackAdapter`, e.g. Chromium's SwiftShader without a GPU) counts
//! as none for `auto`: it emulates the GPU on the CPU and is far slower than the CPU backend
//! (the tiny.en model on a 5 s clip, headless Chromium on 2 cores: 140-232 s on SwiftShader,
//! seconds on the CPU). `webgpu` still runs on it.

use std::rc::Rc;

use js_sys::{Function, Reflect};
use susurrus_core::exec::Backend;
use susurrus_cpu::FastCpuBackend;
use susurrus_wgpu::WgpuBackend;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::error::{describe, js_error};
use crate::global;
use crate::pace::{Pace, Paced};

/// The `backend` load option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    WebGpu,
    Cpu,
}

impl BackendChoice {
    pub fn parse(name: &str) -> Result<BackendChoice, JsValue> {
        match name {
            "auto" => Ok(BackendChoice::Auto),
            "webgpu" => Ok(BackendChoice::WebGpu),
            "cpu" => Ok(BackendChoice::Cpu),
            other => Err(js_error(format!("backend '{other}' is not one of \"auto\", \"webgpu\", \"cpu\""))),
        }
    }
}

/// An opened backend, paced (see [`crate::pace`]), with what the result reports about it.
pub struct Opened {
    pub backend: Box<dyn Backend>,
    pub pace: Rc<Pace>,
    /// `"webgpu"` or `"cpu"`.
    pub kind: &'static str,
    /// The GPU adapter's name, or a description of the CPU backend.
    pub adapter: String,
    /// Why `auto` chose the CPU, when it did.
    pub fallback_reason: Option<String>,
    /// The CPU backend's threads (`None` on WebGPU).
    pub threads: Option<usize>,
}

/// What the browser says of its default WebGPU adapter (`GPUAdapterInfo`).
struct AdapterInfo {
    description: String,
    fallback: bool,
}

/// Asks `navigator.gpu` for its adapter's info; `Err` says why there is none.
async fn adapter_info() -> Result<AdapterInfo, String> {
    let gpu = global::webgpu().ok_or("this browser has no WebGPU (navigator.gpu is missing)")?;
    let request = Reflect::get(&gpu, &"requestAdapter".into())
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or("navigator.gpu has no requestAdapter")?;
    let promise = request.call0(&gpu).map_err(|e| format!("requestAdapter failed: {}", describe(&e)))?;
    let adapter = JsFuture::from(js_sys::Promise::from(promise))
        .await
        .map_err(|e| format!("requestAdapter failed: {}", describe(&e)))?;
    if adapter.is_null() || adapter.is_undefined() {
        return Err("WebGPU has no adapter here".into());
    }
    let info = Reflect::get(&adapter, &"info".into()).unwrap_or(JsValue::UNDEFINED);
    let text = |key: &str| Reflect::get(&info, &key.into()).ok().and_then(|v| v.as_string()).unwrap_or_default();
    let words: Vec<String> =
        [text("vendor"), text("architecture"), text("description")].into_iter().filter(|w| !w.is_empty()).collect();
    let fallback = Reflect::get(&info, &"isFallbackAdapter".into()).ok().and_then(|v| v.as_bool()).unwrap_or(false);
    let mut description = if words.is_empty() { "unnamed adapter".to_string() } else { words.join(" ") };
    if fallback {
        description.push_str(" (software fallback adapter)");
    }
    Ok(AdapterInfo { description, fallback })
}

/// Opens the backend `choice` names.
pub async fn open(choice: BackendChoice) -> Result<Opened, JsValue> {
    let webgpu = |info: AdapterInfo| async move {
        let backend = WgpuBackend::new().await.map_err(|e| format!("WebGPU is unavailable: {e}"))?;
        Ok::<_, String>(gpu(backend, info.description))
    };
    match choice {
        BackendChoice::Cpu => cpu(None),
        BackendChoice::WebGpu => match adapter_info().await {
            Ok(info) => webgpu(info).await.map_err(js_error),
            Err(why) => Err(js_error(why)),
        },
        BackendChoice::Auto => match adapter_info().await {
            Ok(info) if info.fallback => cpu(Some(format!(
                "the only WebGPU adapter, {}, emulates a GPU in software, slower than the CPU backend",
                info.description
            ))),
            Ok(info) => match webgpu(info).await {
                Ok(opened) => Ok(opened),
                Err(why) => cpu(Some(why)),
            },
            Err(why) => cpu(Some(why)),
        },
    }
}

fn gpu(backend: WgpuBackend, adapter: String) -> Opened {
    let pace = Pace::new(false);
    Opened {
        backend: Box::new(Paced::new(Box::new(backend), pace.clone())),
        pace,
        kind: "webgpu",
        adapter,
        fallback_reason: None,
        threads: None,
    }
}

/// The fast CPU backend: on the calling thread, or with the threaded build on the workers
/// the page started for it ([`crate::init_thread_pool`]).
fn cpu(fallback_reason: Option<String>) -> Result<Opened, JsValue> {
    let pace = Pace::new(true);
    let backend = FastCpuBackend::new(None).map_err(|e| js_error(e.to_string()))?;
    let threads = backend.threads();
    Ok(Opened {
        backend: Box::new(Paced::new(Box::new(backend), pace.clone())),
        pace,
        kind: "cpu",
        adapter: match threads {
            1 => "CPU (WebAssembly, one thread)".to_string(),
            n => format!("CPU (WebAssembly, {n} threads)"),
        },
        fallback_reason,
        threads: Some(threads),
    })
}
