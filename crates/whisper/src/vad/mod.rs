//! Voice activity detection with the Silero VAD v6 network, as faster-whisper's
//! `vad_filter`: the network's weights read from its ONNX file ([`weights`], [`onnx`]),
//! built as a graph of the core's ops ([`network`]) so it runs on every backend, and the
//! speech stretches found from its probabilities and mapped back ([`speech`]).

pub mod network;
pub mod onnx;
pub mod speech;
pub mod weights;

use std::collections::HashMap;

use crate::audio::Audio;
use crate::error::{Error, Result};
use network::{AUDIO, BLOCK, CARRY, CONTEXT, PROBABILITIES, ROW, WINDOW, block_graph};
use susurrus_core::exec::{Backend, Executable};
use susurrus_core::passes::optimize;
use susurrus_core::plan::{Plan, plan};
use susurrus_core::tensor::Tensor;

pub use speech::{SpeechChunk, TimeMap, VadOptions, collect, speech_chunks};
pub use weights::VadWeights;

/// The network planned on the host (no backend needed), for blocks of some number of
/// windows.
#[derive(Clone)]
pub struct VadPlan {
    plan: Plan,
    weights: VadWeights,
    windows: usize,
}

impl VadPlan {
    /// The network over blocks of [`BLOCK`] windows (a recording's).
    pub fn new(weights: VadWeights) -> Result<VadPlan> {
        VadPlan::with_windows(weights, BLOCK)
    }

    /// The network over blocks of `windows` windows.
    pub fn with_windows(weights: VadWeights, windows: usize) -> Result<VadPlan> {
        let mut g = block_graph(&weights.weights, windows)?;
        optimize(&mut g)?;
        Ok(VadPlan { plan: plan(g)?, weights, windows })
    }
}

/// The network compiled on a backend.
pub struct Vad {
    exe: Box<dyn Executable>,
    /// Kept to compile the network again on a new device after a loss.
    plan: VadPlan,
}

impl Vad {
    /// Compiles the network on `backend`, or on its variant with f32 products where its
    /// products round to f16 ([`Backend::with_f32_products`]).
    pub async fn compile(backend: &dyn Backend, plan: &VadPlan) -> Result<Vad> {
        let exact = backend.with_f32_products();
        let backend = exact.as_deref().unwrap_or(backend);
        Ok(Vad { exe: backend.compile(&plan.plan, &plan.weights.weights).await?, plan: plan.clone() })
    }

    /// The network compiled again on `backend` (a device opened after this one's was lost).
    pub async fn recompile(&self, backend: &dyn Backend) -> Result<Vad> {
        Vad::compile(backend, &self.plan).await
    }

    /// The same network for blocks of `windows` windows, compiled on `backend`, with states of
    /// its own.
    pub async fn with_windows(&self, backend: &dyn Backend, windows: usize) -> Result<Vad> {
        Vad::compile(backend, &VadPlan::with_windows(self.plan.weights.clone(), windows)?).await
    }

    /// Windows per block.
    pub fn windows(&self) -> usize {
        self.plan.windows
    }

    /// The speech probability of every [`WINDOW`] samples of `audio` (16 kHz), as faster-whisper
    /// computes them: the audio zero-padded to whole windows (a whole window of zeros
    /// added when it already is), each window seen after the last [`CONTEXT`] samples of the
    /// one before (zeros for the first), the LSTM's state carried from window to window.
    /// `on_block` sees the samples done after each block; breaking stops with
    /// [`Error::CANCELLED`].
    pub async fn probabilities(
        &mut self,
        audio: &dyn Audio,
        on_block: &mut dyn FnMut(usize) -> std::ops::ControlFlow<()>,
    ) -> Result<Vec<f32>> {
        let windows = audio.len() / WINDOW + 1;
        let block = self.windows();
        let mut out = Vec::with_capacity(windows);
        let mut rows = vec![0.0f32; block * ROW];
        for first in (0..windows).step_by(block) {
            // The block's samples, from the context before its first window on (zeros before
            // the recording and past its end).
            let from = (first * WINDOW).saturating_sub(CONTEXT);
            let samples = audio.read_range(from, (first + block) * WINDOW)?;
            let sample = |i: usize| samples[i - from];
            rows.fill(0.0);
            for (k, row) in rows.chunks_exact_mut(ROW).enumerate().take(windows - first) {
                let start = (first + k) * WINDOW;
                if start >= WINDOW {
                    for (j, v) in row[..CONTEXT].iter_mut().enumerate() {
                        *v = sample(start - CONTEXT + j);
                    }
                }
                for (j, v) in row[CONTEXT..].iter_mut().enumerate() {
                    *v = sample(start + j);
                }
            }
            let probabilities = self.block(&rows, first > 0).await?;
            out.extend_from_slice(&probabilities[..block.min(windows - first)]);
            if on_block(((first + block) * WINDOW).min(audio.len())).is_break() {
                return Err(Error::CANCELLED);
            }
        }
        Ok(out)
    }

    /// The speech probabilities of one block's rows (`[windows, ROW]`: each window after the
    /// [`CONTEXT`] samples before it), the LSTM going on from the last block's state when
    /// `carry`, else from zeros.
    pub async fn block(&mut self, rows: &[f32], carry: bool) -> Result<Vec<f32>> {
        let inputs = HashMap::from([(AUDIO.to_string(), Tensor::f32([self.windows(), ROW], rows.to_vec())?)]);
        let scalars = HashMap::from([(CARRY.to_string(), u32::from(carry))]);
        let mut result = self.exe.run(&inputs, &scalars, &[PROBABILITIES]).await?;
        let probabilities =
            result.remove(PROBABILITIES).ok_or_else(|| Error::backend("the VAD network returned no probabilities"))?;
        Ok(probabilities.to_f32_cow().into_owned())
    }
}
