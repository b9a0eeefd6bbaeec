#!/usr/bin/env python3
"""Export a Whisper model in CTranslate2 format as the ONNX folder transformers.js loads.

    python3 scripts/models/onnx_export.py [CT2_DIR] [OUT_DIR]

CT2_DIR defaults to ~/.cache/susurrus/models/whisper-tiny.en-ct2 (model.bin, config.json,
tokenizer.json); OUT_DIR defaults to ~/.cache/susurrus/models/whisper-tiny.en-onnx. Needs numpy and onnx;
onnxruntime for the 8-bit files. Written for English-only models (tiny.en's special-token ids
are read from tokenizer.json; a multilingual model is refused).

What it writes, the layout transformers.js 4 (`@huggingface/transformers` 4.3.2) reads for
`pipeline('automatic-speech-recognition', ...)` / `WhisperForConditionalGeneration`:

  config.json                 Hugging Face WhisperConfig (model_type "whisper",
                              is_encoder_decoder true: transformers.js names the cache inputs
                              past_key_values.{i}.{decoder,encoder}.{key,value} from it)
  generation_config.json      decoder_start_token_id, no_timestamps_token_id, is_multilingual
                              false, suppress_tokens / begin_suppress_tokens (the CTranslate2
                              config's suppress_ids / suppress_ids_begin), alignment_heads,
                              max_length 448, ...
  preprocessor_config.json    WhisperFeatureExtractor settings and its mel filterbank
                              ([80][201], the filters scripts/models/ggml_convert.py computes)
  tokenizer.json              copied; tokenizer_config.json: WhisperTokenizer, <|endoftext|>
                              as bos/eos/pad/unk (the special ids come from tokenizer.json)
  onnx/encoder_model.onnx     input_features f32 [batch_size, 80, 3000] ->
                              last_hidden_state f32 [batch_size, 1500, d_model]
  onnx/decoder_model_merged.onnx
                              the layout of Hugging Face optimum's merged decoder: inputs
                              input_ids i64 [batch_size, decoder_sequence_length],
                              encoder_hidden_states, past_key_values.{i}.decoder.{key,value}
                              [batch_size, heads, past_decoder_sequence_length, 64],
                              past_key_values.{i}.encoder.{key,value} [batch_size, heads,
                              encoder_sequence_length_out, 64], use_cache_branch bool [1];
                              outputs logits [batch_size, decoder_sequence_length, vocab] and
                              present.{i}.{decoder,encoder}.{key,value}. One `If` on
                              use_cache_branch holds two whole decoders sharing the outer
                              graph's weights: false (first step; transformers.js then feeds
                              empty caches whose symbolic dims are all 0 but batch_size) reads
                              no cache, computes the cross-attention keys/values from
                              encoder_hidden_states and returns them; true appends the new
                              tokens' self-attention keys/values to the past ones and reads the
                              cross-attention keys/values from the inputs, returning empty
                              placeholders for present.*.encoder.* (transformers.js keeps the
                              previous ones, as optimum's exports expect).
  onnx/encoder_model_quantized.onnx, onnx/decoder_model_merged_quantized.onnx
                              dtype 'q8' (transformers.js's file suffix for it is
                              "_quantized"): onnxruntime's dynamic quantization with the
                              settings of transformers.js's scripts/quantize.py: every op type
                              of onnxruntime's IntegerOps registry, subgraphs included, MatMul
                              only with a constant B, per-tensor, full range, uint8
                              activations; weights uint8 when the graph has a Conv (the
                              encoder: onnxruntime-web lacks ConvInteger with int8 weights),
                              int8 otherwise. The embedding is stored once as 8-bit (Gather and
                              the tied projection's Transpose read it through DequantizeLinear;
                              that MatMul stays float, its B not being a constant).

The graphs are the computation Hugging Face's WhisperForConditionalGeneration does, in plain
ONNX ops (opset 17), as a PyTorch export gives them (what transformers.js users download):
separate q/k/v projections (the key has no bias; CTranslate2's zero rows are checked and
dropped), queries scaled by 1/sqrt(head_dim) after the bias, softmax attention, LayerNormalization
(eps 1e-5), exact (erf) GELU written out as Erf arithmetic, the decoder's causal mask added to
the scores (a prompt of several tokens is fed at once), learned positions starting at the
cached length, and logits from the token embedding (tied): MatMul with a Transpose of the one
stored embedding, as optimum's deduplication of tied weights leaves it. onnxruntime fuses the
LayerNorm/GELU patterns at load time, so the exported op choice does not change what runs.
Weights are f32 initializers converted from CTranslate2's f16 (exact); matrices are stored
transposed ([in, out]) for MatMul and named after the Hugging Face parameters with "_t".

Deterministic: the same input always gives the same bytes (fixed names and order, no time
stamps). Prints every file written and its size.
"""
import json
import logging
import os
import pathlib
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True  # importing the sibling script must not leave scripts/__pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_convert import count_layers, mel_filters, read_ct2, scalar  # noqa: E402

OPSET = 17
IR_VERSION = 8  # the IR version of opset 17: older onnxruntime-web builds load it
LN_EPS = 1e-5
N_FFT, HOP, SAMPLE_RATE, CHUNK_S = 400, 160, 16000, 30


# --- graph building ----------------------------------------------------------------------------

class Graph:
    """Nodes of one ONNX graph with unique, deterministic value names under `prefix`."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.nodes = []
        self.counter = 0

    def op(self, op_type, inputs, outputs=1, name=None, **attrs):
        """Add a node; returns its output name (or names when outputs > 1)."""
        self.counter += 1
        base = f"{self.prefix}/{name or op_type}_{self.counter}"
        outs = [f"{base}:{i}" for i in range(outputs)] if isinstance(outputs, int) else list(outputs)
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=base, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def const(self, array, name):
        """A small constant as a Constant node (kept local to this graph)."""
        return self.op("Constant", [], name=name, value=numpy_helper.from_array(np.asarray(array)))


class Weights:
    """The float32 initializers of a model, added once each, in first-use order."""

    def __init__(self, variables):
        self.v = variables
        self.tensors = {}

    def add(self, name, array):
        if name not in self.tensors:
            self.tensors[name] = numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name)
        return name

    def ct2(self, name, src):
        return self.add(name, self.v[src])

    def initializers(self):
        return list(self.tensors.values())


def layer_norm(g, w, x, hf, src):
    scale = w.ct2(f"{hf}.weight", f"{src}/gamma")
    bias = w.ct2(f"{hf}.bias", f"{src}/beta")
    return g.op("LayerNormalization", [x, scale, bias], name="LayerNorm", axis=-1, epsilon=LN_EPS)


def linear(g, w, x, hf, weight, bias=None):
    """x @ weight.T (+ bias); weight is CTranslate2's [out, in] matrix, stored [in, out]."""
    y = g.op("MatMul", [x, w.add(f"{hf}.weight_t", np.asarray(weight, dtype=np.float32).T)])
    if bias is not None:
        y = g.op("Add", [y, w.add(f"{hf}.bias", bias)])
    return y


def gelu(g, x):
    """Exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)): the Erf pattern onnxruntime fuses."""
    e = g.op("Erf", [g.op("Div", [x, g.const(np.float32(np.sqrt(2.0)), "sqrt2")])])
    return g.op("Mul", [g.op("Mul", [x, g.op("Add", [e, g.const(np.float32(1.0), "one")])]),
                        g.const(np.float32(0.5), "half")])


def split_heads(g, x, heads):
    """[batch, seq, heads*64] -> [batch, heads, seq, 64]."""
    y = g.op("Reshape", [x, g.const(np.array([0, 0, heads, -1], np.int64), "heads_shape")])
    return g.op("Transpose", [y], perm=[0, 2, 1, 3])


def attend(g, q, k, v, mask=None):
    """softmax(q k^T (+ mask)) v over [batch, heads, seq, 64] tensors, heads merged back."""
    scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
    if mask is not None:
        scores = g.op("Add", [scores, mask])
    out = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    out = g.op("Transpose", [out], perm=[0, 2, 1, 3])
    return g.op("Reshape", [out, g.const(np.array([0, 0, -1], np.int64), "merge_shape")])


def qkv_split(v, src, state, what):
    """CTranslate2's fused Q|K|V (or K|V) rows, the key bias checked to be zero and dropped."""
    weight, bias = v[f"{src}/weight"], v[f"{src}/bias"]
    parts = weight.shape[0] // state
    key = 0 if parts == 2 else 1
    if np.any(bias[key * state:(key + 1) * state] != 0):
        raise ValueError(f"{what}: the key bias is not zero; Whisper's key projection has none")
    return ([weight[i * state:(i + 1) * state] for i in range(parts)],
            [None if i == key else bias[i * state:(i + 1) * state] for i in range(parts)])


def self_attention_projections(g, w, v, x, hf, src, state, heads):
    """(q, k, v) of a self-attention block, split into heads; q already scaled."""
    (wq, wk, wv), (bq, _, bv) = qkv_split(v, f"{src}/linear_0", state, src)
    scale = g.const(np.float32((state // heads) ** -0.5), "scaling")
    q = g.op("Mul", [linear(g, w, x, f"{hf}.q_proj", wq, bq), scale])
    k = linear(g, w, x, f"{hf}.k_proj", wk)
    val = linear(g, w, x, f"{hf}.v_proj", wv, bv)
    return split_heads(g, q, heads), split_heads(g, k, heads), split_heads(g, val, heads)


def feed_forward(g, w, v, x, hf, src):
    h = layer_norm(g, w, x, f"{hf}.final_layer_norm", f"{src}/ffn/layer_norm")
    h = gelu(g, linear(g, w, h, f"{hf}.fc1", v[f"{src}/ffn/linear_0/weight"], v[f"{src}/ffn/linear_0/bias"]))
    h = linear(g, w, h, f"{hf}.fc2", v[f"{src}/ffn/linear_1/weight"], v[f"{src}/ffn/linear_1/bias"])
    return g.op("Add", [x, h])


def make_model(graph, doc):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="susurrus onnx_export.py", doc_string=doc)
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


# --- encoder -----------------------------------------------------------------------------------

def build_encoder(v, dims):
    state, heads, n_mels, frames = dims["d_model"], dims["heads"], dims["n_mels"], dims["frames"]
    g, w = Graph("encoder"), Weights(v)
    x = "input_features"
    for i, stride in ((1, 1), (2, 2)):
        kernel = w.ct2(f"model.encoder.conv{i}.weight", f"encoder/conv{i}/weight")
        bias = w.ct2(f"model.encoder.conv{i}.bias", f"encoder/conv{i}/bias")
        x = gelu(g, g.op("Conv", [x, kernel, bias], name="Conv", kernel_shape=[3], pads=[1, 1],
                         strides=[stride]))
    x = g.op("Transpose", [x], perm=[0, 2, 1])
    x = g.op("Add", [x, w.ct2("model.encoder.embed_positions.weight", "encoder/position_encodings/encodings")])
    for i in range(dims["encoder_layers"]):
        hf, src = f"model.encoder.layers.{i}", f"encoder/layer_{i}"
        h = layer_norm(g, w, x, f"{hf}.self_attn_layer_norm", f"{src}/self_attention/layer_norm")
        q, k, val = self_attention_projections(g, w, v, h, f"{hf}.self_attn", f"{src}/self_attention", state, heads)
        h = attend(g, q, k, val)
        h = linear(g, w, h, f"{hf}.self_attn.out_proj", v[f"{src}/self_attention/linear_1/weight"],
                   v[f"{src}/self_attention/linear_1/bias"])
        x = feed_forward(g, w, v, g.op("Add", [x, h]), hf, src)
    x = layer_norm(g, w, x, "model.encoder.layer_norm", "encoder/layer_norm")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="encoder/output"))

    graph = helper.make_graph(
        g.nodes, "whisper_encoder",
        [helper.make_tensor_value_info("input_features", TensorProto.FLOAT, ["batch_size", n_mels, frames])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch_size", frames // 2, state])],
        w.initializers())
    return make_model(graph, "Whisper encoder (log-mel -> hidden states)")


# --- decoder -----------------------------------------------------------------------------------

def cache_names(i):
    return {kind: (f"past_key_values.{i}.{kind}.key", f"past_key_values.{i}.{kind}.value",
                   f"present.{i}.{kind}.key", f"present.{i}.{kind}.value")
            for kind in ("decoder", "encoder")}


def decoder_branch(v, w, dims, with_past):
    """One whole decoder as an If branch: reads outer-scope inputs and weights, returns the
    outer outputs in order (logits, then per layer decoder key/value, encoder key/value)."""
    state, heads = dims["d_model"], dims["heads"]
    g = Graph("with_past" if with_past else "no_past")
    i64 = np.int64

    # Positions continue after the cached tokens: past length = dim 2 of a cached key.
    n_new = g.op("Shape", ["input_ids"], start=1, end=2)
    past = (g.op("Shape", [cache_names(0)["decoder"][0]], start=2, end=3) if with_past
            else g.const(np.array([0], i64), "no_past_len"))
    total = g.op("Add", [past, n_new])
    scalar_shape = g.const(np.array([], i64), "scalar_shape")
    past_s, total_s = (g.op("Reshape", [t, scalar_shape]) for t in (past, total))
    one = g.const(i64(1), "step")
    positions = g.op("Range", [past_s, total_s, one])

    x = g.op("Gather", [w.ct2("model.decoder.embed_tokens.weight", "decoder/embeddings/weight"), "input_ids"])
    pos_table = w.ct2("model.decoder.embed_positions.weight", "decoder/position_encodings/encodings")
    x = g.op("Add", [x, g.op("Gather", [pos_table, positions])])

    # Causal mask [new, total]: token at position p sees keys 0..p.
    key_pos = g.op("Range", [g.const(i64(0), "zero"), total_s, one])
    later = g.op("Greater", [g.op("Unsqueeze", [key_pos, g.const(np.array([0], i64), "axis0")]),
                             g.op("Unsqueeze", [positions, g.const(np.array([1], i64), "axis1")])])
    mask = g.op("Where", [later, g.const(np.float32(np.finfo(np.float32).min), "masked"),
                          g.const(np.float32(0.0), "visible")])

    outputs = []
    for i in range(dims["decoder_layers"]):
        hf, src, names = f"model.decoder.layers.{i}", f"decoder/layer_{i}", cache_names(i)
        h = layer_norm(g, w, x, f"{hf}.self_attn_layer_norm", f"{src}/self_attention/layer_norm")
        q, k, val = self_attention_projections(g, w, v, h, f"{hf}.self_attn", f"{src}/self_attention", state, heads)
        if with_past:
            k = g.op("Concat", [names["decoder"][0], k], axis=2)
            val = g.op("Concat", [names["decoder"][1], val], axis=2)
        self_k, self_v = k, val
        h = attend(g, q, k, val, mask)
        h = linear(g, w, h, f"{hf}.self_attn.out_proj", v[f"{src}/self_attention/linear_1/weight"],
                   v[f"{src}/self_attention/linear_1/bias"])
        x = g.op("Add", [x, h])

        h = layer_norm(g, w, x, f"{hf}.encoder_attn_layer_norm", f"{src}/attention/layer_norm")
        scale = g.const(np.float32((state // heads) ** -0.5), "scaling")
        q = g.op("Mul", [linear(g, w, h, f"{hf}.encoder_attn.q_proj", v[f"{src}/attention/linear_0/weight"],
                                v[f"{src}/attention/linear_0/bias"]), scale])
        q = split_heads(g, q, heads)
        if with_past:
            cross_k, cross_v = names["encoder"][0], names["encoder"][1]
            # Empty placeholders: transformers.js keeps the cached cross keys/values instead.
            empty = np.zeros((0, heads, 0, state // heads), np.float32)
            enc_out = [g.const(empty, "unused_cross_key"), g.const(empty, "unused_cross_value")]
        else:
            (wk, wv), (_, bv) = qkv_split(v, f"{src}/attention/linear_1", state, f"{src} cross-attention")
            cross_k = split_heads(g, linear(g, w, "encoder_hidden_states", f"{hf}.encoder_attn.k_proj", wk), heads)
            cross_v = split_heads(g, linear(g, w, "encoder_hidden_states", f"{hf}.encoder_attn.v_proj", wv, bv),
                                  heads)
            enc_out = [cross_k, cross_v]
        h = attend(g, q, cross_k, cross_v)
        h = linear(g, w, h, f"{hf}.encoder_attn.out_proj", v[f"{src}/attention/linear_2/weight"],
                   v[f"{src}/attention/linear_2/bias"])
        x = feed_forward(g, w, v, g.op("Add", [x, h]), hf, src)
        outputs += [self_k, self_v] + enc_out

    x = layer_norm(g, w, x, "model.decoder.layer_norm", "decoder/layer_norm")
    # Tied output projection: the one stored embedding, transposed here (not a second copy).
    embed_t = g.op("Transpose", ["model.decoder.embed_tokens.weight"], perm=[1, 0])
    outputs.insert(0, g.op("MatMul", [x, embed_t]))

    # Branch outputs get their own names (a subgraph may not reuse the If node's output names).
    finals = []
    for j, name in enumerate(outputs):
        finals.append(g.op("Identity", [name], outputs=[f"{g.prefix}/out_{j}"]))
    return helper.make_graph(g.nodes, g.prefix, [],
                             [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in finals])


def build_decoder(v, dims):
    state, heads, vocab = dims["d_model"], dims["heads"], dims["vocab"]
    head_dim = state // heads
    w = Weights(v)
    no_past = decoder_branch(v, w, dims, with_past=False)
    with_past = decoder_branch(v, w, dims, with_past=True)

    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "decoder_sequence_length"]),
              helper.make_tensor_value_info("encoder_hidden_states", f32,
                                            ["batch_size", "encoder_sequence_length / 2", state])]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch_size", "decoder_sequence_length", vocab])]
    for i in range(dims["decoder_layers"]):
        names = cache_names(i)
        for kind, length, present_length in (
                ("decoder", "past_decoder_sequence_length", "past_decoder_sequence_length + decoder_sequence_length"),
                ("encoder", "encoder_sequence_length_out", "encoder_sequence_length_out")):
            for name in names[kind][:2]:
                inputs.append(helper.make_tensor_value_info(name, f32, ["batch_size", heads, length, head_dim]))
            for name in names[kind][2:]:
                outputs.append(helper.make_tensor_value_info(name, f32, ["batch_size", heads, present_length,
                                                                         head_dim]))
    inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))

    # The If's condition must be a scalar-like bool; [1] is what optimum declares and feeds.
    node = helper.make_node("If", ["use_cache_branch"], [o.name for o in outputs], name="optimum::if",
                            then_branch=with_past, else_branch=no_past)
    graph = helper.make_graph([node], "whisper_decoder_merged", inputs, outputs, w.initializers())
    return make_model(graph, "Whisper decoder, merged: If(use_cache_branch) with-past / without-past")


# --- configuration files -----------------------------------------------------------------------

def special_ids(tokenizer):
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    need = ("<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>", "<|startofprev|>")
    missing = [n for n in need if n not in ids]
    if missing:
        raise ValueError(f"tokenizer.json lacks {missing}")
    return ids


def hf_config(dims, ct2_cfg, ids):
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    layers = dims["encoder_layers"]
    return {
        "activation_dropout": 0.0,
        "activation_function": "gelu",
        "apply_spec_augment": False,
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0,
        "begin_suppress_tokens": ct2_cfg["suppress_ids_begin"],
        "bos_token_id": eot,
        "classifier_proj_size": 256,
        "d_model": dims["d_model"],
        "decoder_attention_heads": dims["heads"],
        "decoder_ffn_dim": dims["ffn"],
        "decoder_layerdrop": 0.0,
        "decoder_layers": dims["decoder_layers"],
        "decoder_start_token_id": sot,
        "dropout": 0.0,
        "encoder_attention_heads": dims["heads"],
        "encoder_ffn_dim": dims["ffn"],
        "encoder_layerdrop": 0.0,
        "encoder_layers": layers,
        "eos_token_id": eot,
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "max_length": dims["text_ctx"],
        "max_source_positions": dims["frames"] // 2,
        "max_target_positions": dims["text_ctx"],
        "median_filter_width": 7,
        "model_type": "whisper",
        "num_hidden_layers": layers,
        "num_mel_bins": dims["n_mels"],
        "pad_token_id": eot,
        "scale_embedding": False,
        "suppress_tokens": ct2_cfg["suppress_ids"],
        "torch_dtype": "float32",
        "use_cache": True,
        "use_weighted_layer_sum": False,
        "vocab_size": dims["vocab"],
    }


def generation_config(dims, ct2_cfg, ids):
    eot = ids["<|endoftext|>"]
    return {
        "alignment_heads": ct2_cfg["alignment_heads"],
        "begin_suppress_tokens": ct2_cfg["suppress_ids_begin"],
        "bos_token_id": eot,
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "eos_token_id": eot,
        "is_multilingual": False,
        "max_initial_timestamp_index": 50,  # OpenAI's default: the first timestamp <= 1.0 s
        "max_length": dims["text_ctx"],
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "pad_token_id": eot,
        "prev_sot_token_id": ids["<|startofprev|>"],
        "return_timestamps": False,
        "suppress_tokens": ct2_cfg["suppress_ids"],
    }


def preprocessor_config(dims):
    n_samples = CHUNK_S * SAMPLE_RATE
    filters = mel_filters(dims["n_mels"], SAMPLE_RATE, N_FFT)
    return {
        "chunk_length": CHUNK_S,
        "feature_extractor_type": "WhisperFeatureExtractor",
        "feature_size": dims["n_mels"],
        "hop_length": HOP,
        "n_fft": N_FFT,
        "n_samples": n_samples,
        "nb_max_frames": n_samples // HOP,
        "padding_side": "right",
        "padding_value": 0.0,
        "processor_class": "WhisperProcessor",
        "return_attention_mask": False,
        "sampling_rate": SAMPLE_RATE,
        # [n_mels][n_fft/2 + 1], as transformers.js's spectrogram() consumes them; float32
        # values written as Python floats (shortest repr): deterministic.
        "mel_filters": [[float(x) for x in row] for row in filters],
    }


def tokenizer_config():
    eot = "<|endoftext|>"
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": eot,
        "clean_up_tokenization_spaces": True,
        "eos_token": eot,
        "errors": "replace",
        "model_max_length": 1024,
        "pad_token": eot,
        "processor_class": "WhisperProcessor",
        "return_attention_mask": False,
        "tokenizer_class": "WhisperTokenizer",
        "unk_token": eot,
    }


# --- quantization ------------------------------------------------------------------------------

def quantize_q8(src, dst):
    """transformers.js's 'q8' recipe (scripts/quantize.py, mode q8) via quantize_dynamic."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    model = onnx.load(src)
    ops = set()

    def collect(graph):
        for node in graph.node:
            ops.add(node.op_type)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    collect(attr.g)

    collect(model.graph)
    # onnxruntime-web has no ConvInteger with int8 weights: graphs with a Conv get uint8.
    weight_type = QuantType.QUInt8 if "Conv" in ops else QuantType.QInt8
    # quantize_dynamic logs a "consider pre-processing" warning on the root logger;
    # transformers.js's recipe runs no pre-processing either, so it is muted here.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(src, dst, op_types_to_quantize=sorted(IntegerOpsRegistry.keys()),
                         per_channel=False, reduce_range=False, weight_type=weight_type,
                         extra_options={"EnableSubgraph": True, "MatMulConstBOnly": True})
    finally:
        root.setLevel(level)
    return weight_type.name


# --- driver ------------------------------------------------------------------------------------

def model_dims(v):
    n_mels = v["encoder/conv1/weight"].shape[1]
    audio_ctx, d_model = v["encoder/position_encodings/encodings"].shape
    text_ctx, text_state = v["decoder/position_encodings/encodings"].shape
    heads, text_heads = scalar(v, "encoder/num_heads"), scalar(v, "decoder/num_heads")
    if text_state != d_model or text_heads != heads:
        raise ValueError("encoder and decoder widths or head counts differ; WhisperConfig has one d_model")
    if scalar(v, "decoder/scale_embeddings") != 0:
        raise ValueError("decoder/scale_embeddings is set: not a Whisper model")
    return {"n_mels": n_mels, "frames": 2 * audio_ctx, "d_model": d_model, "heads": heads,
            "ffn": v["encoder/layer_0/ffn/linear_0/weight"].shape[0], "text_ctx": text_ctx,
            "vocab": v["decoder/embeddings/weight"].shape[0],
            "encoder_layers": count_layers(v, "encoder"), "decoder_layers": count_layers(v, "decoder")}


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def export(src, dst):
    src, dst = pathlib.Path(src), pathlib.Path(dst)
    v = read_ct2(src / "model.bin")
    bad = sorted(n for n, a in v.items() if a.dtype not in (np.float16, np.float32) and a.ndim >= 1)
    if bad:
        raise ValueError(f"{src}: quantized weights ({bad[0]}, ...): export from an f16/f32 folder")
    dims = model_dims(v)
    if dims["vocab"] >= 51865:  # Hugging Face's own test for a multilingual Whisper
        raise ValueError(f"{src}: multilingual vocabulary; this exporter writes English-only configs")
    ct2_cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    tokenizer = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    ids = special_ids(tokenizer)

    (dst / "onnx").mkdir(parents=True, exist_ok=True)
    written = []
    for name, obj in (("config.json", hf_config(dims, ct2_cfg, ids)),
                      ("generation_config.json", generation_config(dims, ct2_cfg, ids)),
                      ("preprocessor_config.json", preprocessor_config(dims)),
                      ("tokenizer_config.json", tokenizer_config())):
        write_json(dst / name, obj)
        written.append(dst / name)
    shutil.copyfile(src / "tokenizer.json", dst / "tokenizer.json")
    written.append(dst / "tokenizer.json")

    notes = {}
    for stem, build in (("encoder_model", build_encoder), ("decoder_model_merged", build_decoder)):
        path = dst / "onnx" / f"{stem}.onnx"
        tmp = path.with_name(path.name + ".part")
        onnx.save_model(build(v, dims), str(tmp))
        os.replace(tmp, path)
        qpath = dst / "onnx" / f"{stem}_quantized.onnx"
        qtmp = qpath.with_name(qpath.name + ".part")
        notes[qpath] = f"q8, {quantize_q8(str(path), str(qtmp))} weights"
        os.replace(qtmp, qpath)
        written += [path, qpath]

    for path in written:
        note = f" ({notes[path]})" if path in notes else ""
        print(f"wrote {path}: {path.stat().st_size} bytes{note}")
    print(f"d_model={dims['d_model']} heads={dims['heads']} layers={dims['encoder_layers']}/"
          f"{dims['decoder_layers']} ffn={dims['ffn']} vocab={dims['vocab']} mels={dims['n_mels']} "
          f"text_ctx={dims['text_ctx']}; opset {OPSET}")


def main(argv):
    if any(a.startswith("-") for a in argv) or len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = argv[0] if argv else os.path.expanduser("~/.cache/susurrus/models/whisper-tiny.en-ct2")
    dst = argv[1] if len(argv) > 1 else os.path.expanduser("~/.cache/susurrus/models/whisper-tiny.en-onnx")
    export(src, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
