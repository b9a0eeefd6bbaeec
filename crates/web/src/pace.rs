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
use std::collections::HashMap;
use std::rc::Rc;

use susurrus_core::error::{Error, Result};
use susurrus_core::exec::{Backend, BoxFuture, Chain, Executable, Weights};
use susurrus_core::plan::Plan;
use susurrus_core::tensor::Tensor;
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

/// A backend whose executables pass a [`Pace`] checkpoint before every run.
pub struct Paced {
    inner: Box<dyn Backend>,
    pace: Rc<Pace>,
}

impl Paced {
    pub fn new(inner: Box<dyn Backend>, pace: Rc<Pace>) -> Paced {
        Paced { inner, pace }
    }
}

impl Backend for Paced {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn compile_linked<'a>(
        &'a self,
        plans: Vec<&'a Plan>,
        weights: &'a Weights,
    ) -> BoxFuture<'a, Vec<Box<dyn Executable>>> {
        Box::pin(async move {
            let executables = self.inner.compile_linked(plans, weights).await?;
            Ok(executables
                .into_iter()
                .map(|inner| Box::new(PacedExecutable { inner, pace: self.pace.clone() }) as Box<dyn Executable>)
                .collect())
        })
    }

    /// The inner backend's new device, paced by the same [`Pace`].
    fn reopen(&self) -> BoxFuture<'_, Box<dyn Backend>> {
        Box::pin(
            async move { Ok(Box::new(Paced::new(self.inner.reopen().await?, self.pace.clone())) as Box<dyn Backend>) },
        )
    }

    fn lose_device(&self) -> Result<()> {
        self.inner.lose_device()
    }
}

struct PacedExecutable {
    inner: Box<dyn Executable>,
    pace: Rc<Pace>,
}

impl Executable for PacedExecutable {
    fn launches(&self) -> Option<usize> {
        self.inner.launches()
    }

    fn feeds_on_device(&self) -> bool {
        self.inner.feeds_on_device()
    }

    fn run<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        outputs: &'a [&'a str],
    ) -> BoxFuture<'a, HashMap<String, Tensor>> {
        Box::pin(async move {
            self.pace.checkpoint().await?;
            self.inner.run(inputs, scalars, outputs).await
        })
    }

    fn read_state<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Tensor> {
        self.inner.read_state(name)
    }

    fn run_repeatedly<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        times: usize,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.pace.checkpoint().await?;
            self.inner.run_repeatedly(inputs, scalars, times).await
        })
    }

    fn run_chain<'a>(&'a mut self, chain: Chain<'a>) -> BoxFuture<'a, Vec<HashMap<String, Tensor>>> {
        Box::pin(async move {
            self.pace.checkpoint().await?;
            self.inner.run_chain(chain).await
        })
    }
}
