//! The Silero VAD v6 network's weights, read from its ONNX file (`silero_vad_v6.onnx`, as
//! faster-whisper ships it). The file's graph is checked node by node against the network
//! [`super::network`] builds — operators, strides, paddings, the reflection pad, the dropped
//! first STFT frame, the LSTM's size — so another network is refused with the first
//! difference named, instead of giving wrong probabilities. Weights must be finite.

#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;

use super::network::{CONV_LAYERS, HIDDEN, STFT_BINS, STFT_HOP, STFT_WINDOW};
use super::onnx::{self, Node};
use crate::error::{Error, Result};
use susurrus_core::exec::Weights;
use susurrus_core::tensor::Tensor;

/// Weight names the network's graph declares as params.
pub const STFT: &str = "vad.stft";
pub const LSTM_INPUT: &str = "vad.lstm.input";
pub const LSTM_HIDDEN: &str = "vad.lstm.hidden";
pub const LSTM_BIAS: &str = "vad.lstm.bias";
pub const OUT_WEIGHT: &str = "vad.out.weight";
pub const OUT_BIAS: &str = "vad.out.bias";

/// The weight and bias names of encoder convolution `i`.
pub fn conv(i: usize) -> (String, String) {
    (format!("vad.conv{i}.weight"), format!("vad.conv{i}.bias"))
}

/// The operators of the Silero VAD v6 graph, in its order.
const OPERATORS: [&str; 25] = [
    "Pad",
    "Unsqueeze",
    "Conv",
    "Slice",
    "Slice",
    "Pow",
    "Pow",
    "Add",
    "Sqrt",
    "Conv",
    "Relu",
    "Conv",
    "Relu",
    "Conv",
    "Relu",
    "Conv",
    "Relu",
    "Transpose",
    "LSTM",
    "Squeeze",
    "Relu",
    "Transpose",
    "Conv",
    "Sigmoid",
    "Reshape",
];

/// The network's weights, under the names above.
#[derive(Clone, Debug)]
pub struct VadWeights {
    pub weights: Weights,
}

impl VadWeights {
    /// Reads the network from an ONNX file's bytes; `file` names it in errors.
    pub fn from_onnx(bytes: &[u8], file: &str) -> Result<VadWeights> {
        let err = |msg: String| Error::Model { file: file.to_string(), msg };
        let model = onnx::Model::decode_file(bytes).map_err(err)?;
        let graph = model.graph.ok_or_else(|| err("the ONNX model has no graph".into()))?;
        let ops: Vec<&str> = graph.node.iter().map(|n| n.op_type.as_str()).collect();
        if ops != OPERATORS {
            let at = ops.iter().zip(OPERATORS).position(|(a, b)| *a != b).unwrap_or(ops.len().min(OPERATORS.len()));
            return Err(err(format!(
                "not the Silero VAD v6 network: node {at} is {}, expected {} ({} nodes, expected {})",
                ops.get(at).copied().unwrap_or("missing"),
                OPERATORS.get(at).copied().unwrap_or("none"),
                ops.len(),
                OPERATORS.len()
            )));
        }
        let init = |name: &str| {
            graph.initializer.iter().find(|t| t.name == name).ok_or_else(|| err(format!("no initializer {name}")))
        };
        let floats = |name: &str, dims: &[usize]| -> Result<Vec<f32>> {
            let t = init(name)?;
            let have: Vec<i64> = t.dims.clone();
            if have.len() != dims.len() || have.iter().zip(dims).any(|(&a, &b)| a != b as i64) {
                return Err(err(format!("{name} has dims {have:?}, expected {dims:?}")));
            }
            let values = t.floats().map_err(err)?;
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(err(format!("{name} holds a non-finite value ({}) at element {i}", values[i])));
            }
            Ok(values)
        };
        let ints = |name: &str| init(name)?.int64s().map_err(err);
        let input = |node: &Node, i: usize| {
            node.input
                .get(i)
                .filter(|s| !s.is_empty())
                .cloned()
                .ok_or_else(|| err(format!("{} node lacks input {i}", node.op_type)))
        };
        let n = &graph.node;

        // The STFT: a reflection pad of 128 on each side, a convolution with the basis,
        // then its first frame dropped (what the network keeps is equal to a right pad of
        // 64, which is what the graph here builds).
        if n[0].string("mode") != Some(b"reflect") || ints(&input(&n[0], 1)?)? != [0, 128, 0, 128] {
            return Err(err("not the Silero VAD v6 network: its input is not reflection-padded by 128".into()));
        }
        let (stft_conv, conv_nodes, out_conv) = (&n[2], [&n[9], &n[11], &n[13], &n[15]], &n[22]);
        check_conv(stft_conv, STFT_HOP, 0).map_err(err)?;
        for (slice, start) in [(&n[3], 0), (&n[4], STFT_BINS as i64)] {
            if ints(&input(slice, 1)?)? != [start, 1] || ints(&input(slice, 3)?)? != [1, 2] {
                return Err(err("not the Silero VAD v6 network: the STFT's slices differ".into()));
            }
        }
        let mut weights = Weights::new();
        let mut put = |name: &str, dims: &[usize], values: Vec<f32>| -> Result<()> {
            weights.insert(name.to_string(), Tensor::f32(dims.to_vec(), values)?);
            Ok(())
        };
        let stft_dims = [2 * STFT_BINS, 1, STFT_WINDOW];
        put(STFT, &stft_dims, floats(&input(stft_conv, 1)?, &stft_dims)?)?;
        for (i, (node, &(c_in, c_out, stride))) in conv_nodes.iter().zip(&CONV_LAYERS).enumerate() {
            check_conv(node, stride, 1).map_err(err)?;
            let (w, b) = conv(i);
            put(&w, &[c_out, c_in, 3], floats(&input(node, 1)?, &[c_out, c_in, 3])?)?;
            put(&b, &[c_out], floats(&input(node, 2)?, &[c_out])?)?;
        }
        let lstm = &n[18];
        if lstm.int("hidden_size") != Some(HIDDEN as i64) || lstm.input.get(4).is_some_and(|s| !s.is_empty()) {
            return Err(err(format!("not the Silero VAD v6 network: its LSTM is not one of {HIDDEN} units")));
        }
        let gates = 4 * HIDDEN;
        put(LSTM_INPUT, &[gates, HIDDEN], floats(&input(lstm, 1)?, &[1, gates, HIDDEN])?)?;
        put(LSTM_HIDDEN, &[gates, HIDDEN], floats(&input(lstm, 2)?, &[1, gates, HIDDEN])?)?;
        // ONNX keeps the input and the recurrent biases apart; they are always added.
        let bias = floats(&input(lstm, 3)?, &[1, 2 * gates])?;
        put(LSTM_BIAS, &[gates], (0..gates).map(|i| bias[i] + bias[gates + i]).collect())?;
        check_conv(out_conv, 1, 0).map_err(err)?;
        put(OUT_WEIGHT, &[1, HIDDEN], floats(&input(out_conv, 1)?, &[1, HIDDEN, 1])?)?;
        put(OUT_BIAS, &[1], floats(&input(out_conv, 2)?, &[1])?)?;
        Ok(VadWeights { weights })
    }

    /// Reads the network from an ONNX file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(path: &Path) -> Result<VadWeights> {
        let file = path.display().to_string();
        let bytes = crate::files::read_small(path, &file)?;
        VadWeights::from_onnx(&bytes, &file)
    }
}

/// Checks a `Conv` node's stride and padding (dilation 1, one group).
fn check_conv(node: &Node, stride: usize, padding: usize) -> std::result::Result<(), String> {
    let ok = node.ints("strides") == Some(&[stride as i64])
        && node.ints("pads").unwrap_or(&[0, 0]) == [padding as i64, padding as i64]
        && node.ints("dilations").is_none_or(|d| d == [1])
        && node.int("group").is_none_or(|g| g == 1);
    match ok {
        true => Ok(()),
        false => Err(format!(
            "not the Silero VAD v6 network: a convolution has strides {:?} and pads {:?}, expected [{stride}] and [{padding}, {padding}]",
            node.ints("strides"),
            node.ints("pads")
        )),
    }
}
