//! The Silero VAD v6 network as one graph over a block of windows ([`BLOCK`] over a
//! recording, fewer in a live stream, which cannot wait a second) of [`WINDOW`] samples: each window (after the last [`CONTEXT`] samples of the one before)
//! goes through an STFT written as a strided convolution with the network's basis, the
//! magnitude, four convolutions with ReLU; then an LSTM cell steps over the block's windows
//! in order, and a linear layer with a sigmoid turns each hidden state into the window's
//! speech probability.
//!
//! The LSTM's hidden and cell states live in persistent buffers ([`STATE_H`], [`STATE_C`]),
//! so a recording is any number of runs of one compiled block; the runtime scalar [`CARRY`]
//! is 0 on a recording's first block, which then starts from zero states.

use super::weights::{LSTM_BIAS, LSTM_HIDDEN, LSTM_INPUT, OUT_BIAS, OUT_WEIGHT, STFT, conv};
use crate::error::{Error, Result};
use crate::graphs::layers::{concat_few_at_a_time, f32_type};
use susurrus_core::exec::Weights;
use susurrus_core::ir::{Graph, NodeId};
use susurrus_core::tensor::Tensor;

/// Samples per speech probability.
pub const WINDOW: usize = 512;
/// Samples of the previous window each window's row starts with.
pub const CONTEXT: usize = 64;
/// Samples in one row of the block's input: the context, then the window.
pub const ROW: usize = CONTEXT + WINDOW;
/// Windows per run over a recording: one second of audio (32 × 512 samples).
pub const BLOCK: usize = 32;
/// The STFT's frame length and hop, and its frequency bins (real and imaginary parts are
/// the basis's first and second halves).
pub const STFT_WINDOW: usize = 256;
pub const STFT_HOP: usize = 128;
pub const STFT_BINS: usize = STFT_WINDOW / 2 + 1;
/// Reflected samples after each row: the network pads 128 on both sides and drops its first
/// STFT frame, which leaves the frames a right pad of 64 gives.
const REFLECT: usize = 64;
/// The LSTM's units.
pub const HIDDEN: usize = 128;
/// The encoder's convolutions (kernel 3, padding 1): input channels, output channels, stride.
pub const CONV_LAYERS: [(usize, usize, usize); 4] = [(STFT_BINS, 128, 1), (128, 64, 2), (64, 64, 2), (64, HIDDEN, 1)];

/// The block's input `[windows, ROW]`, its output `[windows]`, the states and the scalar.
pub const AUDIO: &str = "audio";
pub const PROBABILITIES: &str = "probabilities";
pub const STATE_H: &str = "vad.h";
pub const STATE_C: &str = "vad.c";
pub const CARRY: &str = "carry";

/// The network over one block of `windows` windows.
pub fn block_graph(weights: &Weights, windows: usize) -> Result<Graph> {
    let mut g = Graph::new("silero_vad");
    let param = |g: &mut Graph, name: &str| -> Result<NodeId> {
        let t =
            weights.get(name).ok_or_else(|| Error::bad_argument(format!("the VAD network has no tensor {name}")))?;
        Ok(g.param(name, t.ty())?)
    };
    let audio = g.input(AUDIO, f32_type(&[windows, ROW]))?;

    // Reflection on the right (sample ROW + j is sample ROW - 2 - j), as a gather of the
    // transposed rows.
    let columns = g.permute(audio, &[1, 0])?;
    let reflected: Vec<u32> = (0..ROW).chain((0..REFLECT).map(|j| ROW - 2 - j)).map(|i| i as u32).collect();
    let reflected = g.constant(Tensor::u32([ROW + REFLECT], reflected)?);
    let padded = g.gather(columns, reflected)?;
    let padded = g.permute(padded, &[1, 0])?;
    let padded = g.reshape(padded, [windows, 1, ROW + REFLECT])?;

    // STFT magnitude [windows, STFT_BINS, frames].
    let basis = param(&mut g, STFT)?;
    let spectrum = g.conv1d(padded, basis, None, STFT_HOP, 0, 1)?;
    let real = g.slice(spectrum, 1, 0, STFT_BINS)?;
    let imaginary = g.slice(spectrum, 1, STFT_BINS, 2 * STFT_BINS)?;
    let (rr, ii) = (g.mul(real, real)?, g.mul(imaginary, imaginary)?);
    let power = g.add(rr, ii)?;
    let mut x = g.sqrt(power)?;
    for (i, &(_, _, stride)) in CONV_LAYERS.iter().enumerate() {
        let (w, b) = conv(i);
        let (w, b) = (param(&mut g, &w)?, param(&mut g, &b)?);
        let y = g.conv1d(x, w, Some(b), stride, 1, 1)?;
        x = g.relu(y)?;
    }
    // One position is left per window: [windows, HIDDEN, 1].
    let features = g.reshape(x, [windows, HIDDEN])?;

    // The LSTM (ONNX's gate order: input, output, forget, cell), every window's input
    // projection in one product, then one step per window.
    let (w, r, bias) = (param(&mut g, LSTM_INPUT)?, param(&mut g, LSTM_HIDDEN)?, param(&mut g, LSTM_BIAS)?);
    let projected = g.matmul_t(features, w)?;
    let projected = g.add(projected, bias)?;
    let carry = g.scalar(CARRY);
    let carry = g.read_scalar(carry)?;
    let zeros = g.constant(Tensor::f32([1, HIDDEN], vec![0.0; HIDDEN])?);
    let h_state = g.state(STATE_H, f32_type(&[1, HIDDEN]))?;
    let c_state = g.state(STATE_C, f32_type(&[1, HIDDEN]))?;
    let mut h = g.select(carry, h_state, zeros)?;
    let mut c = g.select(carry, c_state, zeros)?;
    let mut hidden = Vec::with_capacity(windows);
    for t in 0..windows {
        let input = g.slice(projected, 0, t, t + 1)?;
        let recurrent = g.matmul_t(h, r)?;
        let gates = g.add(input, recurrent)?;
        let mut gate = |k: usize| g.slice(gates, 1, k * HIDDEN, (k + 1) * HIDDEN);
        let (i, o, f, cell) = (gate(0)?, gate(1)?, gate(2)?, gate(3)?);
        let (i, o, f, cell) = (g.sigmoid(i)?, g.sigmoid(o)?, g.sigmoid(f)?, g.tanh(cell)?);
        let (kept, added) = (g.mul(f, c)?, g.mul(i, cell)?);
        c = g.add(kept, added)?;
        let squashed = g.tanh(c)?;
        h = g.mul(o, squashed)?;
        hidden.push(h);
    }
    g.write_state(h_state, h)?;
    g.write_state(c_state, c)?;

    // The decoder: ReLU, a linear layer to one logit, the sigmoid.
    let hidden = concat_few_at_a_time(&mut g, &hidden)?;
    let hidden = g.relu(hidden)?;
    let (out_w, out_b) = (param(&mut g, OUT_WEIGHT)?, param(&mut g, OUT_BIAS)?);
    let logit = g.matmul_t(hidden, out_w)?;
    let logit = g.add(logit, out_b)?;
    let probability = g.sigmoid(logit)?;
    let probability = g.reshape(probability, [windows])?;
    g.output(PROBABILITIES, probability)?;
    Ok(g)
}
