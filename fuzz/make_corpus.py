#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets, fuzz/corpus/<target>/: small valid inputs (and a
few near misses) that start each target deep inside its format. Everything is made here: a
Whisper of toy size (d_model 4, one layer each side) with seeded random weights in both model
formats, a small vocabulary as `vocabulary.txt` and `tokenizer.json`, tones and noise in every
audio format `susurrus` reads, and the Silero VAD graph's structure (its real weights are
1.2 MB: the seeds carry the nodes and attributes, with weights too short, so the fuzzer starts
at the weight checks).

Inputs that hold several files join them with NUL bytes, as fuzz/src/lib.rs splits them:
  ct2_model   config.json NUL model.bin
  hf_model    config.json NUL generation_config.json (may be empty) NUL model.safetensors
  tokenizer   a vocabulary.txt or a tokenizer.json alone, or vocabulary.txt NUL tokenizer.json

The lossy audio files are encoded with PyAV (FFmpeg) and numpy, from PyPI:

    python3 -m venv /tmp/corpus-venv && /tmp/corpus-venv/bin/pip install av==18.1.0 numpy==2.4.6
    /tmp/corpus-venv/bin/python fuzz/make_corpus.py

Deterministic (seeded, FFmpeg's bitexact flags): the same PyAV gives the same files. Files
of other names in the corpus folders are kept: the inputs of crashes the fuzzer found
(`regression_*`), replayed by every run so that a fix stays fixed.
"""

import io
import json
import pathlib
import random
import struct
import sys

import av
import numpy as np

OUT = pathlib.Path(__file__).resolve().parent / "corpus"

# ---------------------------------------------------------------------------------------------
# The toy Whisper: every size as small as the loaders accept.

D, HEADS, FFN, MELS, AUDIO_CTX, TEXT_CTX, VOCAB = 4, 2, 8, 2, 2, 3, 8
CONFIG = dict(alignment_heads=[[0, 1]], lang_ids=[], suppress_ids=[1], suppress_ids_begin=[5])


def layer_vars(stack):
    """A CTranslate2 layer's variables: (name suffix, shape)."""
    v = [
        ("self_attention/layer_norm/gamma", [D]),
        ("self_attention/layer_norm/beta", [D]),
        ("self_attention/linear_0/weight", [3 * D, D]),
        ("self_attention/linear_0/bias", [3 * D]),
        ("self_attention/linear_1/weight", [D, D]),
        ("self_attention/linear_1/bias", [D]),
    ]
    if stack == "decoder":
        v += [
            ("attention/layer_norm/gamma", [D]),
            ("attention/layer_norm/beta", [D]),
            ("attention/linear_0/weight", [D, D]),
            ("attention/linear_0/bias", [D]),
            ("attention/linear_1/weight", [2 * D, D]),
            ("attention/linear_1/bias", [2 * D]),
            ("attention/linear_2/weight", [D, D]),
            ("attention/linear_2/bias", [D]),
        ]
    v += [
        ("ffn/layer_norm/gamma", [D]),
        ("ffn/layer_norm/beta", [D]),
        ("ffn/linear_0/weight", [FFN, D]),
        ("ffn/linear_0/bias", [FFN]),
        ("ffn/linear_1/weight", [D, FFN]),
        ("ffn/linear_1/bias", [D]),
    ]
    return v


def ct2_weights():
    """The weights in CTranslate2's naming: (name, shape)."""
    w = [
        ("encoder/conv1/weight", [D, MELS, 3]),
        ("encoder/conv1/bias", [D]),
        ("encoder/conv2/weight", [D, D, 3]),
        ("encoder/conv2/bias", [D]),
        ("encoder/position_encodings/encodings", [AUDIO_CTX, D]),
    ]
    w += [(f"encoder/layer_0/{n}", s) for n, s in layer_vars("encoder")]
    w += [
        ("encoder/layer_norm/gamma", [D]),
        ("encoder/layer_norm/beta", [D]),
        ("decoder/embeddings/weight", [VOCAB, D]),
        ("decoder/position_encodings/encodings", [TEXT_CTX, D]),
    ]
    w += [(f"decoder/layer_0/{n}", s) for n, s in layer_vars("decoder")]
    w += [("decoder/layer_norm/gamma", [D]), ("decoder/layer_norm/beta", [D])]
    return w


def hf_weights():
    """The weights in Hugging Face's naming: (name, shape)."""
    def attention(prefix):
        return [
            (f"{prefix}.q_proj.weight", [D, D]), (f"{prefix}.q_proj.bias", [D]),
            (f"{prefix}.k_proj.weight", [D, D]),
            (f"{prefix}.v_proj.weight", [D, D]), (f"{prefix}.v_proj.bias", [D]),
            (f"{prefix}.out_proj.weight", [D, D]), (f"{prefix}.out_proj.bias", [D]),
        ]

    def norm(prefix):
        return [(f"{prefix}.weight", [D]), (f"{prefix}.bias", [D])]

    def layer(prefix, cross):
        v = attention(f"{prefix}.self_attn") + norm(f"{prefix}.self_attn_layer_norm")
        if cross:
            v += attention(f"{prefix}.encoder_attn") + norm(f"{prefix}.encoder_attn_layer_norm")
        v += [(f"{prefix}.fc1.weight", [FFN, D]), (f"{prefix}.fc1.bias", [FFN])]
        v += [(f"{prefix}.fc2.weight", [D, FFN]), (f"{prefix}.fc2.bias", [D])]
        return v + norm(f"{prefix}.final_layer_norm")

    w = [
        ("model.encoder.conv1.weight", [D, MELS, 3]), ("model.encoder.conv1.bias", [D]),
        ("model.encoder.conv2.weight", [D, D, 3]), ("model.encoder.conv2.bias", [D]),
        ("model.encoder.embed_positions.weight", [AUDIO_CTX, D]),
    ]
    w += layer("model.encoder.layers.0", False) + norm("model.encoder.layer_norm")
    w += [("model.decoder.embed_tokens.weight", [VOCAB, D]), ("model.decoder.embed_positions.weight", [TEXT_CTX, D])]
    w += layer("model.decoder.layers.0", True) + norm("model.decoder.layer_norm")
    return w


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def values(rng, shape):
    return [rng.uniform(-0.5, 0.5) for _ in range(numel(shape))]


def pack(dtype, xs):
    """Little-endian bytes of `xs` as f32, f16, bf16 or i8."""
    if dtype == "f32":
        return struct.pack(f"<{len(xs)}f", *xs)
    if dtype == "f16":
        return struct.pack(f"<{len(xs)}e", *xs)
    if dtype == "bf16":
        return b"".join(struct.pack("<f", x)[2:] for x in xs)
    if dtype == "i8":
        return struct.pack(f"<{len(xs)}b", *xs)
    raise ValueError(dtype)


def quantize(rng, shape):
    """Random int8 rows and one positive f32 scale per row."""
    rows = shape[0]
    q = [rng.randint(-127, 127) for _ in range(numel(shape))]
    scales = [rng.uniform(0.01, 0.1) for _ in range(rows)]
    return q, scales


# --- CTranslate2 model.bin (binary version 6) ------------------------------------------------

CT2_CODES = {"f32": 0, "i8": 1, "i16": 2, "i32": 3, "f16": 4, "bf16": 5}


def ct2_string(s):
    b = s.encode() + b"\0"
    return struct.pack("<H", len(b)) + b


def ct2_model(dtype, int8=False, seed=1):
    rng = random.Random(seed)
    variables = [
        ("decoder/activation", [], "i8", struct.pack("<b", 3)),
        ("decoder/pre_norm", [], "i8", struct.pack("<b", 1)),
        ("decoder/scale_embeddings", [], "i8", struct.pack("<b", 0)),
        ("decoder/alignment_layer", [], "i16", struct.pack("<h", -1)),
        ("decoder/num_heads", [], "i16", struct.pack("<h", HEADS)),
        ("encoder/num_heads", [], "i16", struct.pack("<h", HEADS)),
    ]
    for name, shape in ct2_weights():
        if int8 and len(shape) == 2 and name.endswith("/weight"):
            q, scales = quantize(rng, shape)
            variables.append((name, shape, "i8", pack("i8", q)))
            variables.append((name + "_scale", [shape[0]], "f32", pack("f32", scales)))
        else:
            variables.append((name, shape, dtype, pack(dtype, values(rng, shape))))
    out = struct.pack("<I", 6) + ct2_string("WhisperSpec") + struct.pack("<I", 3)
    out += struct.pack("<I", len(variables))
    for name, shape, code, data in variables:
        out += ct2_string(name) + struct.pack("<B", len(shape))
        out += b"".join(struct.pack("<I", d) for d in shape)
        out += struct.pack("<BI", CT2_CODES[code], len(data)) + data
    out += struct.pack("<I", 1)
    out += ct2_string("decoder/projection/weight") + ct2_string("decoder/embeddings/weight")
    return out


# --- safetensors -----------------------------------------------------------------------------

SAFETENSORS_DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "i8": "I8"}


def safetensors(tensors):
    """tensors: [(name, shape, dtype, bytes)] in data order."""
    header, data = {}, b""
    for name, shape, dtype, raw in tensors:
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def hf_model(dtype, int8=False, strip_prefix=False, seed=2):
    rng = random.Random(seed)
    tensors = []
    for name, shape in hf_weights():
        if strip_prefix:
            name = name.removeprefix("model.")
        if int8 and len(shape) >= 2:
            q, scales = quantize(rng, shape)
            tensors.append((name, shape, "i8", pack("i8", q)))
            tensors.append((name + "_scale", [shape[0]], "f32", pack("f32", scales)))
        else:
            tensors.append((name, shape, dtype, pack(dtype, values(rng, shape))))
    return safetensors(tensors)


def hf_config(**extra):
    config = {
        "model_type": "whisper", "d_model": D, "encoder_layers": 1, "decoder_layers": 1,
        "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
        "encoder_ffn_dim": FFN, "decoder_ffn_dim": FFN, "vocab_size": VOCAB, "num_mel_bins": MELS,
        "max_source_positions": AUDIO_CTX, "max_target_positions": TEXT_CTX,
        "activation_function": "gelu", "scale_embedding": False,
    }
    config.update(extra)
    return json.dumps(config).encode()


def hf_generation():
    return json.dumps({"suppress_tokens": [1, 2], "begin_suppress_tokens": [5], "alignment_heads": [[0, 0]],
                       "lang_to_id": {"<|en|>": 6, "<|de|>": 7}}).encode()


# ---------------------------------------------------------------------------------------------
# Tokenizer files.

def byte_to_char():
    """GPT-2's table: printable Latin-1 bytes stand for themselves, the rest from U+0100 on."""
    printable = lambda b: 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF
    table, nxt = [], 0x100
    for b in range(256):
        if printable(b):
            table.append(chr(b))
        else:
            table.append(chr(nxt))
            nxt += 1
    return table


WORDS = ["Ġhello", "Ġworld", "he", "ll", "hell"]
SPECIALS_EN = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
               "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
SPECIALS_MULTI = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>", "<|zh|>", "<|translate|>",
                  "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
TIMESTAMPS = [f"<|{i * 0.02:.2f}|>" for i in range(6)]


def vocabulary(specials, timestamps=()):
    lines = byte_to_char() + WORDS + list(specials) + list(timestamps)
    return ("\n".join(lines) + "\n").encode()


def tokenizer_json(specials, merges=True):
    tokens = byte_to_char() + WORDS
    vocab = {t: i for i, t in enumerate(tokens)}
    added = [{"id": len(tokens) + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(specials)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "vocab": vocab,
                  "merges": ["h e", "l l", "he ll"] if merges else []},
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------------------------
# Audio.

def tone(rate, seconds, channels, seed=3):
    """[channels, n] float32: a sine per channel plus a little seeded noise."""
    t = np.arange(int(rate * seconds)) / rate
    noise = np.random.default_rng(seed).normal(0.0, 0.02, (channels, t.size))
    planes = np.stack([0.4 * np.sin(2 * np.pi * (440.0 + 110.0 * c) * t) for c in range(channels)]) + noise
    return planes.astype(np.float32)


def wav(planes, rate, fmt, extensible=False):
    """A WAV file of `planes` as u8, s16, s24, s32 or f32."""
    channels, n = planes.shape
    x = np.clip(planes.T.reshape(-1).astype(np.float64), -1.0, 1.0)
    if fmt == "u8":
        data, bits, tag = np.round(x * 127 + 128).astype(np.uint8).tobytes(), 8, 1
    elif fmt == "s16":
        data, bits, tag = np.round(x * 32767).astype("<i2").tobytes(), 16, 1
    elif fmt == "s24":
        data = b"".join(struct.pack("<i", v)[:3] for v in np.round(x * 8388607).astype(np.int64).tolist())
        bits, tag = 24, 1
    elif fmt == "s32":
        data, bits, tag = np.round(x * 2147483647).astype("<i4").tobytes(), 32, 1
    elif fmt == "f32":
        data, bits, tag = x.astype("<f4").tobytes(), 32, 3
    else:
        raise ValueError(fmt)
    block = channels * bits // 8
    fmt_chunk = struct.pack("<HHIIHH", 0xFFFE if extensible else tag, channels, rate, rate * block, block, bits)
    if extensible:
        mask = (1 << channels) - 1
        guid = struct.pack("<H", tag) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt_chunk += struct.pack("<HHI", 22, bits, mask) + guid
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def encode(planes, rate, container, codec, bit_rate=None):
    """`planes` encoded with PyAV (FFmpeg), bitexact: no version strings or random serials.
    FFmpeg's own Vorbis encoder (PyPI's PyAV has no libvorbis) is marked experimental and
    takes stereo only."""
    buf = io.BytesIO()
    channels = planes.shape[0]
    layout = "mono" if channels == 1 else "stereo"
    with av.open(buf, "w", format=container, options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        if bit_rate:
            stream.bit_rate = bit_rate
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        if codec == "vorbis":
            stream.codec_context.options["strict"] = "experimental"
        fmt = stream.codec_context.format.name
        frame_size = stream.codec_context.frame_size or 1024
        for start in range(0, planes.shape[1], frame_size):
            chunk = np.ascontiguousarray(planes[:, start:start + frame_size])
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout=layout)
            frame.sample_rate, frame.pts = rate, start
            if fmt != "fltp":
                (frame,) = av.AudioResampler(format=fmt, layout=layout, rate=rate).resample(frame)
                frame.pts = start
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# The Silero VAD v6 graph's structure, as ONNX protocol buffers.

def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number, wire, payload):
    key = varint(number << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def text(number, s):
    return field(number, 2, s.encode() if isinstance(s, str) else s)


def attribute(name, i=None, s=None, ints=None):
    out = text(1, name)
    if i is not None:
        out += field(3, 0, i)
    if s is not None:
        out += text(4, s)
    if ints is not None:
        out += field(8, 2, b"".join(varint(v) for v in ints))
    return out


def node(op, inputs, attributes=()):
    out = b"".join(text(1, i) for i in inputs) + text(2, op.lower() + "_out") + text(4, op)
    return out + b"".join(field(5, 2, a) for a in attributes)


def tensor(name, dims, data_type, floats=(), int64s=()):
    out = field(1, 2, b"".join(varint(d) for d in dims)) + field(2, 0, data_type) + text(8, name)
    if floats:
        out += field(4, 2, struct.pack(f"<{len(floats)}f", *floats))
    if int64s:
        out += field(7, 2, b"".join(varint(v) for v in int64s))
    return out


def vad_graph(short=4):
    """The 25 nodes of Silero VAD v6 with their attributes and integer initializers; every float
    initializer has its real dims but only `short` values."""
    def conv(w, b, stride, pad):
        return node("Conv", ["x", w, b], [attribute("strides", ints=[stride]), attribute("pads", ints=[pad, pad]),
                                          attribute("dilations", ints=[1]), attribute("group", i=1)])
    relu = node("Relu", ["x"])
    nodes = [
        node("Pad", ["x", "pads"], [attribute("mode", s="reflect")]),
        node("Unsqueeze", ["x", "axes"]),
        node("Conv", ["x", "basis"], [attribute("strides", ints=[128]), attribute("pads", ints=[0, 0])]),
        node("Slice", ["x", "start_re", "end_re", "slice_axes"]),
        node("Slice", ["x", "start_im", "end_im", "slice_axes"]),
        node("Pow", ["x", "two"]), node("Pow", ["x", "two"]), node("Add", ["x", "y"]), node("Sqrt", ["x"]),
        conv("conv0.w", "conv0.b", 1, 1), relu, conv("conv1.w", "conv1.b", 2, 1), relu,
        conv("conv2.w", "conv2.b", 2, 1), relu, conv("conv3.w", "conv3.b", 1, 1), relu,
        node("Transpose", ["x"]),
        node("LSTM", ["x", "lstm.W", "lstm.R", "lstm.B"], [attribute("hidden_size", i=128)]),
        node("Squeeze", ["x"]), node("Relu", ["x"]), node("Transpose", ["x"]),
        conv("out.w", "out.b", 1, 0), node("Sigmoid", ["x"]), node("Reshape", ["x", "shape"]),
    ]
    f = [0.25] * short
    inits = [
        tensor("pads", [4], 7, int64s=[0, 128, 0, 128]),
        tensor("start_re", [2], 7, int64s=[0, 1]), tensor("start_im", [2], 7, int64s=[129, 1]),
        tensor("slice_axes", [2], 7, int64s=[1, 2]),
        tensor("basis", [258, 1, 256], 1, f),
    ]
    for i, (c_in, c_out) in enumerate([(129, 128), (128, 64), (64, 64), (64, 128)]):
        inits += [tensor(f"conv{i}.w", [c_out, c_in, 3], 1, f), tensor(f"conv{i}.b", [c_out], 1, f)]
    inits += [tensor("lstm.W", [1, 512, 128], 1, f), tensor("lstm.R", [1, 512, 128], 1, f),
              tensor("lstm.B", [1, 1024], 1, f), tensor("out.w", [1, 128, 1], 1, f), tensor("out.b", [1], 1, f)]
    graph = b"".join(field(1, 2, n) for n in nodes) + b"".join(field(5, 2, t) for t in inits)
    return field(1, 0, 8) + field(7, 2, graph)


# ---------------------------------------------------------------------------------------------

def main():
    corpus = {}

    ct2_config = json.dumps(CONFIG).encode()
    corpus["ct2_model"] = {
        "f32": ct2_config + b"\0" + ct2_model("f32"),
        "f16": ct2_config + b"\0" + ct2_model("f16"),
        "bf16": json.dumps(dict(CONFIG, layer_norm_epsilon=1e-6)).encode() + b"\0" + ct2_model("bf16"),
        "int8_float16": ct2_config + b"\0" + ct2_model("f16", int8=True),
    }
    corpus["hf_model"] = {
        "f32": hf_config() + b"\0" + hf_generation() + b"\0" + hf_model("f32"),
        "f16": hf_config(suppress_tokens=[3], alignment_heads=[[0, 1]]) + b"\0\0" + hf_model("f16"),
        "bf16_whisper_model": b'{"encoder_attention_heads":2,"decoder_attention_heads":2}\0\0'
        + hf_model("bf16", strip_prefix=True),
        "int8": hf_config() + b"\0" + hf_generation() + b"\0" + hf_model("f16", int8=True),
    }
    corpus["tokenizer"] = {
        "vocabulary_en.txt": vocabulary(SPECIALS_EN),
        "vocabulary_multilingual_timestamps.txt": vocabulary(SPECIALS_MULTI, TIMESTAMPS),
        "tokenizer_en.json": tokenizer_json(SPECIALS_EN),
        "tokenizer_multilingual_no_merges.json": tokenizer_json(SPECIALS_MULTI, merges=False),
        "vocabulary_and_tokenizer": vocabulary(SPECIALS_EN) + b"\0" + tokenizer_json(SPECIALS_EN),
    }
    mono16 = tone(16000, 0.05, 1)
    corpus["audio"] = {
        "s16_16k_mono.wav": wav(mono16, 16000, "s16"),
        "u8_8k_mono.wav": wav(tone(8000, 0.05, 1), 8000, "u8"),
        "s24_22k05_stereo.wav": wav(tone(22050, 0.02, 2), 22050, "s24"),
        "s32_48k_3ch_extensible.wav": wav(tone(48000, 0.01, 3), 48000, "s32", extensible=True),
        "f32_44k1_stereo.wav": wav(tone(44100, 0.02, 2), 44100, "f32"),
        "zero_samples.wav": wav(tone(16000, 0.0, 1), 16000, "s16"),
        "mono_16k.flac": encode(mono16, 16000, "flac", "flac"),
        "stereo_44k1.flac": encode(tone(44100, 0.03, 2), 44100, "flac", "flac"),
        "mono_22k05.mp3": encode(tone(22050, 0.1, 1), 22050, "mp3", "libmp3lame", 32000),
        "stereo_44k1.mp3": encode(tone(44100, 0.06, 2), 44100, "mp3", "libmp3lame", 64000),
        "stereo_48k.ogg": encode(tone(48000, 0.05, 2), 48000, "ogg", "vorbis", 64000),
        "stereo_16k.ogg": encode(tone(16000, 0.1, 2), 16000, "ogg", "vorbis", 32000),
    }
    corpus["vad_onnx"] = {
        "structure": vad_graph(),
        "structure_no_floats": vad_graph(short=0),
    }

    total = 0
    for target, files in corpus.items():
        folder = OUT / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
            total += len(data)
            print(f"{target}/{name}: {len(data)} bytes")
    print(f"{total} bytes in all", file=sys.stderr)


if __name__ == "__main__":
    main()
