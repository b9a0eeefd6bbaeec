//! `Model`: a Whisper model loaded in this page or worker, and its `transcribe`.

use std::cell::{RefCell, RefMut};
use std::ops::ControlFlow;
use std::rc::Rc;

use js_sys::Function;
use serde::Serialize;
use susurrus_whisper::bench::{time_pieces, time_transcriptions};
use susurrus_whisper::load::catalog;
use susurrus_whisper::load::files::{load_files, load_files_with_parsed};
use susurrus_whisper::load::weights::WhisperWeights;
use susurrus_whisper::text::tokenizer::Tokenizer;
use susurrus_whisper::vad::{VadPlan, VadWeights};
use susurrus_whisper::{Event, Whisper};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::audio;
use crate::backend::{self, BackendChoice, Opened};
use crate::download::{self, ModelBytes};
use crate::error::{from_core, js_error};
use crate::global::now_ms;
use crate::live::LiveStream;
use crate::options::{bench_options, load_options, stream_options, transcribe_options};
use crate::pace::Pace;
use crate::result::{JsTranscript, js_segment, to_js};

/// What `Model.info` reports.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelInfo {
    backend: &'static str,
    adapter: String,
    /// Why `auto` runs on the CPU, when it does.
    fallback_reason: Option<String>,
    /// The CPU backend's threads (`None` on WebGPU).
    threads: Option<usize>,
    from_cache: bool,
    load_ms: f64,
    bytes: f64,
    /// Whether the model knows many languages (detection, translation) or English only.
    multilingual: bool,
    /// The language codes the model knows, in its vocabulary's order (`["en"]` for an
    /// English-only model).
    languages: Vec<String>,
    /// Whether the VAD network is loaded (`vad: true` transcriptions).
    vad: bool,
}

pub(crate) struct Loaded {
    pub whisper: Whisper,
    pub pace: Rc<Pace>,
    /// Whether a live stream holds the model ([`crate::live`]).
    pub stream_open: bool,
}

/// The model for one piece of work: refused while another transcription, bench or stream has
/// it. The mutable borrow is the lock: it is held across the work's awaits.
pub(crate) fn lock(loaded: &RefCell<Loaded>) -> Result<RefMut<'_, Loaded>, JsValue> {
    let loaded =
        loaded.try_borrow_mut().map_err(|_| js_error("this model is already transcribing; wait for that to finish"))?;
    if loaded.stream_open {
        return Err(js_error("this model has a live stream open; finish or abort the stream first"));
    }
    Ok(loaded)
}

/// Whether `name` is a model's name that `Model.load` fetches from the hub (faster-whisper's:
/// "tiny.en", "base", ... "large-v3-turbo") rather than a folder's URL.
#[wasm_bindgen(js_name = isModelName)]
pub fn is_model_name(name: &str) -> bool {
    catalog::repository(name).is_some()
}

/// A Whisper model compiled on WebGPU or the CPU, ready to transcribe.
#[wasm_bindgen]
pub struct Model {
    loaded: Rc<RefCell<Loaded>>,
    info: ModelInfo,
}

#[wasm_bindgen]
impl Model {
    /// Loads a model by name (faster-whisper's: "tiny.en", "base", "small", ... "large-v3-turbo",
    /// fetched from the Hugging Face hub, or the `hub` option's mirror), from the URL of its
    /// folder (`model.bin`, `config.json`, `vocabulary.txt`, ... are fetched from there, through
    /// the model cache) or from the files a user picked, and compiles it on the chosen backend.
    pub async fn load(
        #[wasm_bindgen(unchecked_param_type = "ModelSource")] source: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "LoadOptions")] options: Option<js_sys::Object>,
    ) -> Result<Model, JsValue> {
        let start = now_ms();
        let options = load_options(&options.map(JsValue::from).unwrap_or(JsValue::UNDEFINED))?;
        let model: ModelBytes = match source.as_string() {
            Some(source) => {
                let url = match catalog::repository(&source) {
                    Some(repo) => catalog::folder_url(&options.hub, repo),
                    None => source,
                };
                download::fetch_folder(&url, options.cache, options.on_progress.as_ref()).await?
            }
            None => download::read_files(&source, options.on_progress.as_ref()).await?,
        };
        let bytes = model.bytes;
        let (weights, tokenizer) = match model.weights {
            Some(parsed) => load_files_with_parsed(parsed, &model.files),
            None => load_files(&model.files),
        }
        .map_err(from_core)?;
        drop(model.files);
        let vad = match &options.vad {
            Some(url) => {
                let (bytes, _) = download::fetch_single(url, options.cache, options.on_progress.as_ref()).await?;
                Some(VadWeights::from_onnx(&bytes, url).and_then(VadPlan::new).map_err(from_core)?)
            }
            None => None,
        };
        let (mut whisper, placed) = compile(options.backend, &weights, tokenizer).await?;
        if let Some(vad) = &vad {
            whisper.load_vad(vad).await.map_err(from_core)?;
        }
        let multilingual = whisper.config().is_multilingual();
        let languages = if multilingual {
            whisper.tokenizer().languages().iter().map(|(code, _)| code.clone()).collect()
        } else {
            vec!["en".to_string()]
        };
        let info = ModelInfo {
            backend: placed.kind,
            adapter: placed.adapter,
            fallback_reason: placed.fallback_reason,
            threads: placed.threads,
            from_cache: model.from_cache,
            load_ms: now_ms() - start,
            bytes: bytes as f64,
            multilingual,
            languages,
            vad: whisper.has_vad(),
        };
        Ok(Model { loaded: Rc::new(RefCell::new(Loaded { whisper, pace: placed.pace, stream_open: false })), info })
    }

    /// Where the model runs and how it was loaded.
    #[wasm_bindgen(getter, unchecked_return_type = "ModelInfo")]
    pub fn info(&self) -> Result<JsValue, JsValue> {
        to_js(&self.info)
    }

    /// Transcribes `audio` (16 kHz mono samples, an `AudioBuffer`, or an encoded file's bytes
    /// or `Blob`, decoded as it is read; see `audio::to_audio`). Segments reach `onSegment` as they
    /// are decoded; an aborted `signal` rejects with an `AbortError` and leaves the model
    /// usable. One transcription at a time per model.
    #[wasm_bindgen(unchecked_return_type = "Promise<TranscribeResult>")]
    pub fn transcribe(
        &self,
        #[wasm_bindgen(unchecked_param_type = "AudioInput")] audio: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "TranscribeOptions")] options: Option<js_sys::Object>,
    ) -> js_sys::Promise {
        let loaded = self.loaded.clone();
        let (backend, adapter) = (self.info.backend, self.info.adapter.clone());
        // The mutable borrow is held across the transcription's awaits on purpose: it is the
        // model's lock, so a second call while one runs gets a clear error instead of sharing
        // the decoder's state.
        #[allow(clippy::await_holding_refcell_ref)]
        future_to_promise(async move {
            let (options, callbacks) = transcribe_options(&options.map(JsValue::from).unwrap_or(JsValue::UNDEFINED))?;
            let start = now_ms();
            let input = audio::to_audio(&audio).await?;
            let decode_ms = now_ms() - start;
            let mut loaded = lock(&loaded)?;
            let Loaded { whisper, pace, .. } = &mut *loaded;
            pace.set_signal(callbacks.signal.clone());
            if pace.aborted() {
                pace.set_signal(None);
                return Err(from_core(susurrus_whisper::Error::CANCELLED));
            }
            let mut callback_error: Option<JsValue> = None;
            let mut on_event = |event: Event| {
                let called = match event {
                    Event::Segment(s) => call(&callbacks.on_segment, to_js(&js_segment(s))),
                    Event::Progress { done, total } => call(&callbacks.on_progress, to_js(&Progress { done, total })),
                    Event::DeviceLost { reason, resume_at } => {
                        call(&callbacks.on_device_lost, to_js(&DeviceLost { reason, resume_at }))
                    }
                    // A browser's lost device is opened again in the page; nothing resumes elsewhere.
                    Event::Checkpoint(_) => Ok(()),
                };
                if let Err(e) = called {
                    callback_error.get_or_insert(e);
                }
                if callback_error.is_some() || pace.aborted() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            };
            let started = now_ms();
            let transcript = whisper.transcribe_audio(&*input.audio, &options, &mut on_event).await;
            pace.set_signal(None);
            let transcript = match (transcript, callback_error) {
                (_, Some(e)) => return Err(e),
                (result, None) => result.map_err(from_core)?,
            };
            to_js(&JsTranscript::new(&transcript, backend, &adapter, decode_ms, now_ms() - started, input.warnings))
        })
    }
}

#[wasm_bindgen]
impl Model {
    /// Opens a live transcription (see [`LiveStream`]): the options are `transcribe`'s
    /// decoding options (greedy, one temperature and word timestamps by default here) with
    /// the stream's own (`hop`, `vad`, `minSilence`, `speechPad`, `trimAfter`, `maxBuffer`),
    /// `onPartial` and `onCommitted` (each called with the words, their text and times),
    /// `onError` and `signal`. Options are checked now; the stream holds the model until it
    /// finishes, fails or is aborted.
    pub fn stream(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "StreamOptions")] options: Option<js_sys::Object>,
    ) -> Result<LiveStream, JsValue> {
        let (options, callbacks) = stream_options(&options.map(JsValue::from).unwrap_or(JsValue::UNDEFINED))?;
        LiveStream::open(self.loaded.clone(), options, callbacks)
    }
}

/// What `Model.bench` measured (medians in milliseconds, as `susurrus bench` reports them).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BenchResult {
    /// The backend as the program names it (`wgpu`, `wgpu-f16`, ..., `cpu`).
    backend: String,
    adapter: String,
    encoder_ms: f64,
    ms_per_token: f64,
    ms_per_token_single: f64,
    device_ms_per_step: f64,
    /// Kernel launches of one encoder window and of one decoder step (WebGPU's dispatches).
    encoder_kernels: Option<usize>,
    step_kernels: Option<usize>,
    /// One step of `beams` beams, a round trip each (`None` without beam graphs).
    beam_ms_per_step: Option<f64>,
    beams: usize,
    /// Greedy transcriptions.
    transcribe_ms: f64,
    audio_duration_s: f64,
    rtf: f64,
    /// Transcriptions with the default beam search.
    transcribe_beam_ms: f64,
    beam_rtf: f64,
}

#[wasm_bindgen]
impl Model {
    /// Times the model's pieces on `audio` as `susurrus bench` does: the encoder on its first
    /// 30 s window, decoder tokens chained as transcription runs them and one per submission,
    /// a step replayed on the device, beam steps, and whole transcriptions of `audio`
    /// greedy and with the default beam search (no fallback: the same work every run). Each measure once to warm up, then `runs` times
    /// (default 5), medians; `tokens` decoder steps per run (default 64).
    #[wasm_bindgen(unchecked_return_type = "Promise<BenchResult>")]
    pub fn bench(
        &self,
        #[wasm_bindgen(unchecked_param_type = "AudioInput")] audio: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "BenchOptions")] options: Option<js_sys::Object>,
    ) -> js_sys::Promise {
        let loaded = self.loaded.clone();
        let adapter = self.info.adapter.clone();
        // The borrow is the model's lock, as in `transcribe`.
        #[allow(clippy::await_holding_refcell_ref)]
        future_to_promise(async move {
            let options = bench_options(&options.map(JsValue::from).unwrap_or(JsValue::UNDEFINED))?;
            // The bench repeats short clips: in the module's memory.
            let samples = audio::to_samples(&audio).await?.to_vec();
            let mut loaded = lock(&loaded)?;
            let whisper = &mut loaded.whisper;
            let clock = || now_ms();
            let pieces =
                time_pieces(whisper, &samples, options.runs, options.tokens, &clock).await.map_err(from_core)?;
            let (encoder_kernels, step_kernels) = whisper.program_mut().launches();
            let beam = susurrus_whisper::TranscribeOptions { temperatures: vec![0.0], ..Default::default() };
            let greedy = susurrus_whisper::TranscribeOptions { beam_size: 1, ..beam.clone() };
            let transcribe_ms =
                time_transcriptions(whisper, &samples, &greedy, options.runs, &clock).await.map_err(from_core)?;
            let transcribe_beam_ms =
                time_transcriptions(whisper, &samples, &beam, options.runs, &clock).await.map_err(from_core)?;
            let audio_duration_s = samples.len() as f64 / f64::from(audio::SAMPLE_RATE);
            let rtf = |ms: f64| ms / 1e3 / audio_duration_s.max(f64::MIN_POSITIVE);
            to_js(&BenchResult {
                backend: whisper.backend_name().to_string(),
                adapter,
                encoder_ms: pieces.encoder_ms,
                ms_per_token: pieces.decoder_ms_per_token,
                ms_per_token_single: pieces.decoder_ms_per_token_single,
                device_ms_per_step: pieces.device_ms_per_step,
                encoder_kernels,
                step_kernels,
                beam_ms_per_step: pieces.beam_ms_per_step,
                beams: pieces.beams,
                transcribe_ms,
                audio_duration_s,
                rtf: rtf(transcribe_ms),
                transcribe_beam_ms,
                beam_rtf: rtf(transcribe_beam_ms),
            })
        })
    }
}

/// Where a compiled model runs: an [`Opened`] backend without the backend itself, which the
/// model now owns.
struct Placed {
    kind: &'static str,
    adapter: String,
    fallback_reason: Option<String>,
    pace: Rc<Pace>,
    threads: Option<usize>,
}

/// Compiles the model on the backend `choice` names. `auto` moves to the CPU when WebGPU
/// cannot hold the model (one more reason it gives).
async fn compile(
    choice: BackendChoice,
    weights: &WhisperWeights,
    tokenizer: Tokenizer,
) -> Result<(Whisper, Placed), JsValue> {
    let Opened { backend, pace, kind, adapter, fallback_reason, threads } = backend::open(choice).await?;
    match Whisper::new(backend, weights, tokenizer.clone()).await {
        Ok(w) => Ok((w, Placed { kind, adapter, fallback_reason, pace, threads })),
        Err(e) if choice == BackendChoice::Auto && kind == "webgpu" => {
            let Opened { backend, pace, kind, adapter, threads, .. } = backend::open(BackendChoice::Cpu).await?;
            let w = Whisper::new(backend, weights, tokenizer).await.map_err(from_core)?;
            let fallback_reason = Some(format!("WebGPU could not run the model: {e}"));
            Ok((w, Placed { kind, adapter, fallback_reason, pace, threads }))
        }
        Err(e) => Err(from_core(e)),
    }
}

/// What `onProgress` receives during a transcription: seconds of audio done and in all.
#[derive(Serialize)]
struct Progress {
    done: f64,
    total: f64,
}

/// What `onDeviceLost` receives: why the device was lost and where the transcription goes on
/// (seconds of the recording) on the new one.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeviceLost<'a> {
    reason: &'a str,
    resume_at: f64,
}

/// Calls a caller's callback with one argument; its exception is the error.
fn call(callback: &Option<Function>, arg: Result<JsValue, JsValue>) -> Result<(), JsValue> {
    match callback {
        Some(f) => f.call1(&JsValue::NULL, &arg?).map(|_| ()),
        None => Ok(()),
    }
}
