//! Cooperative pacing in the browser. At each checkpoint the work stops with
//! [`Error::Cancelled`] when the caller's `AbortSignal` has fired and, on the CPU backend,
//! the event loop gets a turn once the thread has been busy for [`BUSY_MS`]. Executables pass
//! a checkpoint before every run (and every chain of decoder steps): [`Paced`].
//!
//! Why: WebAssembly runs on one thread and the CPU backend's runs never wait, so without
//! these turns a worker would not see an abort message until the whole transcription ended,
//! and a page using the direct API would freeze. WebGPU runs wait for the GPU already (each
//! readback is a promise), so there only the signal is checked.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use susurrus_core::error::{Error, Result};
use susurrus_core::exec::{Backend, Call, Wrap, Wrapped};
use web_sys::AbortSignal;

use crate::global;

/// Milliseconds of CPU work between two turns of the event loop.
const BUSY_MS: f64 = 50.0;

/// The state shared by a paced backend and its executables.
pub struct Pace {
    /// Give the event loop turns (CPU backend).
    yields: bool,
    signal: RefCell<Option<AbortSignal>>,
    last_turn: Cell<f64>,
}

impl Pace {
    pub fn new(yields: bool) -> Rc<Pace> {
        Rc::new(Pace { yields, signal: RefCell::new(None), last_turn: Cell::new(global::now_ms()) })
    }

    /// The signal that cancels the runs from now on (`None`: nothing cancels them).
    pub fn set_signal(&self, signal: Option<AbortSignal>) {
        *self.signal.borrow_mut() = signal;
        self.last_turn.set(global::now_ms());
    }

    /// Whether the current signal has fired.
    pub fn aborted(&self) -> bool {
        self.signal.borrow().as_ref().is_some_and(AbortSignal::aborted)
    }

    /// Where work may be cancelled or paused.
    async fn checkpoint(&self) -> Result<()> {
        if self.yields && global::now_ms() - self.last_turn.get() >= BUSY_MS {
            global::next_task().await;
            self.last_turn.set(global::now_ms());
        }
        if self.aborted() { Err(Error::Cancelled) } else { Ok(()) }
    }
}

/// What [`Wrapped`] changes for the browser: every run (and chain of runs) of an executable
/// passes a [`Pace`] checkpoint first; everything else is the inner backend's, and a device
/// opened again is paced by the same [`Pace`].
#[derive(Clone)]
pub struct Paced(Rc<Pace>);

impl Paced {
    /// `inner` paced by `pace`.
    pub fn new(inner: Box<dyn Backend>, pace: Rc<Pace>) -> Wrapped<Paced> {
        Wrapped::new(inner, Paced(pace))
    }
}

impl Wrap for Paced {
    async fn before(&self, call: Call) -> Result<()> {
        match call {
            Call::Run | Call::RunRepeatedly | Call::RunChain => self.0.checkpoint().await,
            Call::ReadState => Ok(()),
        }
    }
}
