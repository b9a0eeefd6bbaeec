//! `Model.stream`: live transcription in the browser, on whisper's [`LiveTranscriber`].
//!
//! The caller pushes audio as it is recorded (a microphone's AudioWorklet sends a chunk every
//! 100 ms); each push only queues the chunk (resampled to 16 kHz when it comes at another rate)
//! and, when no look is running, starts the *pump*: a task that moves the queue into the
//! transcriber and looks whenever a hop of audio has come, until it has caught up. So pushes
//! never wait for the model, and a slow device looks at more audio at a time instead of
//! falling behind look by look. Each look's events reach `onPartial` and `onCommitted`.
//!
//! A stream holds its model while it is open (a `transcribe` or a second stream is refused
//! with an error saying so) and lets it go when it finishes, fails or is aborted.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use js_sys::Function;
use serde::Serialize;
use susurrus_whisper::audio::{MAX_RATE, MIN_RATE, SampleSink, To16k};
use susurrus_whisper::live::{LiveEvent, LiveOptions, LiveTranscriber, check_samples};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, future_to_promise};
use web_sys::AbortSignal;

use crate::error::{ABORT_ERROR, from_core, js_error};
use crate::global::now_ms;
use crate::model::Loaded;
use crate::result::to_js;

/// The rate whisper hears; chunks at another rate are resampled.
const SAMPLE_RATE: u32 = 16_000;

/// The non-decoding parts of `stream`'s options.
#[derive(Default)]
pub struct LiveCallbacks {
    pub on_partial: Option<Function>,
    pub on_committed: Option<Function>,
    pub on_error: Option<Function>,
    pub signal: Option<AbortSignal>,
}

/// What `finish` resolves to.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveSummary {
    /// Seconds of audio the stream heard.
    audio_seconds: f64,
    /// Milliseconds the model spent looking at it, and that over the audio's length (below 1:
    /// the device keeps up).
    busy_ms: f64,
    real_time_factor: f64,
}

/// A live transcription: push audio with `push`, end it with `finish`.
#[wasm_bindgen]
pub struct LiveStream {
    state: Rc<State>,
}

struct State {
    loaded: Rc<RefCell<Loaded>>,
    live: RefCell<LiveTranscriber>,
    input: RefCell<Input>,
    callbacks: LiveCallbacks,
    /// The pump while it runs: a promise that resolves once it stopped.
    pump: RefCell<Option<js_sys::Promise>>,
    /// What ended the stream early (thrown again by `push` and `finish`).
    failed: RefCell<Option<JsValue>>,
    finishing: Cell<bool>,
    /// Whether a look holds the model, and whether the stream let it go.
    looking: Cell<bool>,
    released: Cell<bool>,
    busy_ms: Cell<f64>,
    /// The signal's "abort" listener, removed when the model is let go.
    on_abort: RefCell<Option<Closure<dyn FnMut()>>>,
}

/// Audio pushed and not yet taken by the transcriber.
struct Input {
    /// The resampler from the rate of the stream's first chunk (it passes 16 kHz through).
    resampler: Option<To16k<Queue>>,
    rate: u32,
    /// Frames pushed at that rate, for the positions in errors.
    frames: u64,
    queue: Rc<RefCell<Vec<f32>>>,
}

/// The resampler's output: 16 kHz samples the pump moves into the transcriber.
struct Queue {
    samples: Rc<RefCell<Vec<f32>>>,
    count: usize,
}

impl SampleSink for Queue {
    fn push(&mut self, samples: &[f32]) -> Result<(), String> {
        self.samples.borrow_mut().extend_from_slice(samples);
        self.count += samples.len();
        Ok(())
    }

    fn count(&self) -> usize {
        self.count
    }

    /// Drops the last samples (the resampler's padding at the end), as far as they wait here.
    fn truncate(&mut self, len: usize) {
        let extra = self.count.saturating_sub(len);
        let mut samples = self.samples.borrow_mut();
        let keep = samples.len().saturating_sub(extra);
        samples.truncate(keep);
        self.count = self.count.min(len);
    }

    fn reserve(&mut self, _additional: usize) {}

    fn finish(self) -> Result<Self, String> {
        Ok(self)
    }
}

impl Input {
    /// Queues `samples` at `rate` Hz (the rate of the stream's first chunk; every chunk must
    /// have it); a chunk with a sample that is not a finite number is refused whole.
    fn push(&mut self, samples: &[f32], rate: u32) -> Result<(), JsValue> {
        if !(MIN_RATE..=MAX_RATE).contains(&rate) {
            return Err(js_error(format!("sampleRate must be from {MIN_RATE} to {MAX_RATE} Hz, not {rate}")));
        }
        if self.resampler.is_some() && self.rate != rate {
            return Err(js_error(format!(
                "this chunk's sample rate is {rate} Hz, the stream's {} Hz: a stream keeps the rate of its first chunk",
                self.rate
            )));
        }
        check_samples(samples, self.frames, rate).map_err(from_core)?;
        let resampler = match &mut self.resampler {
            Some(r) => r,
            None => {
                let queue = Queue { samples: self.queue.clone(), count: 0 };
                self.rate = rate;
                self.resampler.insert(To16k::into_store(rate, None, queue).map_err(js_error)?)
            }
        };
        resampler.push(samples).map_err(js_error)?;
        self.frames += samples.len() as u64;
        Ok(())
    }

    /// The resampler's last output (its delayed tail), once nothing more comes.
    fn close(&mut self) -> Result<(), JsValue> {
        match self.resampler.take() {
            Some(r) => r.finish().map(drop).map_err(js_error),
            None => Ok(()),
        }
    }
}

impl State {
    /// Moves the queued audio into the transcriber.
    fn feed(&self) -> Result<(), JsValue> {
        let queued = std::mem::take(&mut *self.input.borrow().queue.borrow_mut());
        self.live.borrow_mut().push(&queued).map_err(from_core)
    }

    fn aborted(&self) -> bool {
        self.callbacks.signal.as_ref().is_some_and(AbortSignal::aborted)
    }

    /// One look (or, `last`, the stream's end) on the model, its events passed to the
    /// callbacks.
    // The borrows are held across the look's awaits on purpose: the model's is its lock (as in
    // `transcribe`), and nothing else uses the transcriber while the pump runs.
    #[allow(clippy::await_holding_refcell_ref)]
    async fn look(&self, last: bool) -> Result<(), JsValue> {
        let started = now_ms();
        self.looking.set(true);
        let events = async {
            let mut loaded = self.loaded.try_borrow_mut().map_err(|_| js_error("the model is in use"))?;
            let Loaded { whisper, pace, .. } = &mut *loaded;
            let mut live = self.live.borrow_mut();
            pace.set_signal(self.callbacks.signal.clone());
            let events = if last { live.finish(whisper).await } else { live.process(whisper).await };
            pace.set_signal(None);
            events.map_err(stream_error)
        }
        .await;
        self.looking.set(false);
        self.busy_ms.set(self.busy_ms.get() + now_ms() - started);
        // An abort while the look ran ended the stream; the model is free now.
        if self.failed.borrow().is_some() {
            self.release();
        }
        let events = events?;
        for event in events {
            let (callback, text) = match &event {
                LiveEvent::Partial(text) => (&self.callbacks.on_partial, text),
                LiveEvent::Committed(text) => (&self.callbacks.on_committed, text),
            };
            if let Some(f) = callback {
                f.call1(&JsValue::NULL, &to_js(text)?)?;
            }
        }
        Ok(())
    }

    /// Looks while a hop of audio is waiting.
    async fn pump(&self) -> Result<(), JsValue> {
        loop {
            if self.aborted() {
                return Err(abort_error());
            }
            self.feed()?;
            if !self.live.borrow().ready() {
                return Ok(());
            }
            self.look(false).await?;
        }
    }

    /// Ends the stream with `error`: kept for `push` and `finish`, passed to `onError`; the
    /// model is let go once no look holds it.
    fn fail(&self, error: JsValue) {
        if self.failed.borrow().is_some() || self.released.get() {
            return;
        }
        *self.failed.borrow_mut() = Some(error.clone());
        if let Some(f) = &self.callbacks.on_error {
            // The caller's handler failing leaves nothing to report it to but the console.
            if let Err(e) = f.call1(&JsValue::NULL, &error) {
                web_sys::console::error_2(&JsValue::from_str("susurrus: onError threw"), &e);
            }
        }
        if !self.looking.get() {
            self.release();
        }
    }

    /// Lets the model go (a transcription or another stream may start) and stops listening
    /// to the signal.
    fn release(&self) {
        if self.released.replace(true) {
            return;
        }
        if let Ok(mut loaded) = self.loaded.try_borrow_mut() {
            loaded.stream_open = false;
        }
        if let (Some(signal), Some(listener)) = (&self.callbacks.signal, self.on_abort.borrow_mut().take()) {
            let _ = signal.remove_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
        }
    }
}

/// Starts the pump unless it runs.
fn kick(state: &Rc<State>) {
    if state.pump.borrow().is_some() {
        return;
    }
    let s = state.clone();
    // The future first runs on a later microtask, after the promise is stored.
    let promise = future_to_promise(async move {
        if let Err(e) = s.pump().await {
            s.fail(e);
        }
        *s.pump.borrow_mut() = None;
        Ok(JsValue::UNDEFINED)
    });
    *state.pump.borrow_mut() = Some(promise);
}

/// The error a cancelled look or an aborted signal ends the stream with.
fn abort_error() -> JsValue {
    let error = js_sys::Error::new("the live stream was aborted");
    error.set_name(ABORT_ERROR);
    error.into()
}

fn stream_error(e: susurrus_whisper::Error) -> JsValue {
    if e.is_cancelled() { abort_error() } else { from_core(e) }
}

impl LiveStream {
    /// A stream on the model in `loaded`, which it holds from now on; refused while the model
    /// transcribes or streams.
    pub(crate) fn open(
        loaded: Rc<RefCell<Loaded>>,
        options: LiveOptions,
        callbacks: LiveCallbacks,
    ) -> Result<LiveStream, JsValue> {
        if callbacks.signal.as_ref().is_some_and(AbortSignal::aborted) {
            return Err(abort_error());
        }
        let live = {
            let mut model = crate::model::lock(&loaded)?;
            let live = LiveTranscriber::new(&model.whisper, options).map_err(from_core)?;
            model.stream_open = true;
            live
        };
        let input = Input { resampler: None, rate: SAMPLE_RATE, frames: 0, queue: Rc::new(RefCell::new(Vec::new())) };
        let state = Rc::new(State {
            loaded,
            live: RefCell::new(live),
            input: RefCell::new(input),
            callbacks,
            pump: RefCell::new(None),
            failed: RefCell::new(None),
            finishing: Cell::new(false),
            looking: Cell::new(false),
            released: Cell::new(false),
            busy_ms: Cell::new(0.0),
            on_abort: RefCell::new(None),
        });
        if let Some(signal) = &state.callbacks.signal {
            let weak: Weak<State> = Rc::downgrade(&state);
            let listener = Closure::<dyn FnMut()>::new(move || {
                if let Some(s) = weak.upgrade() {
                    s.fail(abort_error());
                }
            });
            signal.add_event_listener_with_callback("abort", listener.as_ref().unchecked_ref())?;
            *state.on_abort.borrow_mut() = Some(listener);
        }
        Ok(LiveStream { state })
    }
}

#[wasm_bindgen]
impl LiveStream {
    /// Takes the next chunk of audio: mono samples at `sampleRate` Hz (default 16000; every
    /// chunk of a stream at the rate of its first). Returns at once; the model looks at the
    /// audio in the background. A chunk with a sample that is not a finite number, or at
    /// another rate, is refused whole with an error, and the stream goes on; after the stream
    /// ended (finished, failed, aborted) every push throws why.
    pub fn push(
        &self,
        samples: &[f32],
        #[wasm_bindgen(js_name = sampleRate)] sample_rate: Option<u32>,
    ) -> Result<(), JsValue> {
        let s = &self.state;
        if let Some(error) = s.failed.borrow().clone() {
            return Err(error);
        }
        if s.aborted() {
            s.fail(abort_error());
            return Err(abort_error());
        }
        if s.finishing.get() {
            return Err(js_error("the live stream is finished; open another to go on"));
        }
        s.input.borrow_mut().push(samples, sample_rate.unwrap_or(SAMPLE_RATE))?;
        kick(s);
        Ok(())
    }

    /// Ends the stream: waits for the look in progress, looks at what is left and commits all
    /// of it (the last `onCommitted` comes before this resolves), and lets the model go.
    /// Resolves to the seconds heard and the time the model spent; rejects with what ended
    /// the stream early (an `AbortError` when it was aborted).
    #[wasm_bindgen(unchecked_return_type = "Promise<LiveSummary>")]
    pub fn finish(&self) -> js_sys::Promise {
        let s = self.state.clone();
        future_to_promise(async move {
            if s.finishing.replace(true) {
                return Err(js_error("finish was called already"));
            }
            loop {
                let pump = s.pump.borrow().clone();
                match pump {
                    Some(p) => drop(JsFuture::from(p).await),
                    None => break,
                }
            }
            if let Some(error) = s.failed.borrow().clone() {
                return Err(error);
            }
            let ended = async {
                s.input.borrow_mut().close()?;
                s.feed()?;
                s.look(true).await
            };
            if let Err(e) = ended.await {
                s.fail(e.clone());
                return Err(e);
            }
            s.release();
            let audio_seconds = s.live.borrow().pushed_seconds();
            let busy_ms = s.busy_ms.get();
            to_js(&LiveSummary {
                audio_seconds,
                busy_ms,
                real_time_factor: busy_ms / 1e3 / audio_seconds.max(f64::MIN_POSITIVE),
            })
        })
    }
}
