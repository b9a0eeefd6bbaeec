#!/usr/bin/env python3
"""Convert a Whisper model in CTranslate2 format into whisper.cpp's ggml model file.

    python3 scripts/models/ggml_convert.py [CT2_DIR] [OUT.bin]

CT2_DIR defaults to ~/.cache/susurrus/models/whisper-tiny.en-ct2 (model.bin, config.json,
vocabulary.txt); OUT defaults to .gm/peers/ggml-tiny.en.bin. Only numpy is needed.

What it writes (little-endian; the layout whisper.cpp 1.9.1's `whisper_model_load` reads):

  u32 magic 0x67676d6c ("ggml")
  i32 x 11 hparams: n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
                    n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
                    (always 1, "mostly f16": matrices and convolution kernels f16. An all-f32 file,
                    ftype 0, loads but whisper.cpp 1.9.1's CPU back end aborts on it (its im2col
                    asserts f16 convolution kernels), so this script writes none)
  i32 n_mel, i32 n_freq (= n_fft/2 + 1 = 201), f32[n_mel][n_freq] mel filterbank
  i32 n_tokens, then per token: u32 byte length, the token's raw bytes
  tensors until end of file: i32 n_dims, i32 name length, i32 type (0 f32, 1 f16),
                    i32 ne[n_dims] (ggml order: fastest-varying dimension first, i.e. the
                    reverse of the numpy shape), the name, the data (no padding)

The mel filterbank is computed here: the Slaney-style triangular filters (Slaney mel scale:
linear below 1 kHz, logarithmic above; each filter normalised to unit area, "norm=slaney")
for 16 kHz audio, n_fft 400, 80 mels (or the model's count), 0 Hz to 8 kHz, in float64 and
stored as float32 — the filters Whisper was trained with (checked equal, bit for bit, to
faster-whisper's FeatureExtractor.mel_filters for 80 mels).

The vocabulary is every ordinary token, i.e. the ids before `<|endoftext|>` (50256 for
English-only models; multilingual ones include the empty token 50256): each token of
vocabulary.txt (GPT-2 byte-level notation) mapped back to its raw bytes. whisper.cpp names
the special tokens after those itself.

Tensors (CTranslate2 -> whisper.cpp names, the OpenAI checkpoint's): fused Q|K|V and the
cross-attention's fused K|V are split by rows; the key projections have no bias (CTranslate2's
zero rows are dropped and checked to be zero); the decoder's output projection is the token
embedding. Matrices and the two convolutions' kernels are f16 (as CTranslate2 stores them:
no rounding happens when the source is f16), biases, layer norms and position tables f32,
the convolution biases shaped [1, n_state] in ggml order as whisper.cpp declares them.

Deterministic: the same input always gives the same bytes (tensors in a fixed order; no time
stamps). Prints the output's size and SHA-256.
"""
import hashlib
import os
import pathlib
import struct
import sys

import numpy as np

GGML_MAGIC = 0x67676D6C
CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


# --- CTranslate2 model.bin -------------------------------------------------------------------

def read_ct2(path):
    """Every variable of a CTranslate2 model.bin (binary version 6) as a numpy array, aliases
    resolved."""
    data = pathlib.Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    def string():
        nonlocal pos
        (n,) = take("H")
        raw = data[pos:pos + n]
        pos += n
        if not raw.endswith(b"\0"):
            raise ValueError(f"{path}: string at {pos - n} is not NUL-terminated")
        return raw[:-1].decode("utf-8")

    (version,) = take("I")
    if version != 6:
        raise ValueError(f"{path}: CTranslate2 binary version {version}, expected 6")
    spec = string()
    if spec != "WhisperSpec":
        raise ValueError(f"{path}: spec {spec!r}, expected WhisperSpec")
    take("I")  # spec revision
    (count,) = take("I")
    variables = {}
    for _ in range(count):
        name = string()
        (rank,) = take("B")
        dims = take(f"{rank}I") if rank else ()
        (dtype,) = take("B")
        (n_bytes,) = take("I")
        if dtype not in CT2_DTYPES:
            raise ValueError(f"{path}: {name} has dtype {dtype}, which this script does not read "
                             "(bf16 or int8 models: convert from an f16/f32 folder)")
        array = np.frombuffer(data, dtype=CT2_DTYPES[dtype], count=n_bytes // np.dtype(CT2_DTYPES[dtype]).itemsize,
                              offset=pos).reshape(dims)
        pos += n_bytes
        variables[name] = array
    (n_aliases,) = take("I")
    for _ in range(n_aliases):
        alias, target = string(), string()
        variables[alias] = variables[target]
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} bytes after the aliases")
    return variables


# --- mel filterbank --------------------------------------------------------------------------

def hz_to_mel(hz):
    """Slaney's mel scale: 3 mels per 200 Hz up to 1 kHz, then 27 mels per factor 6.4."""
    hz = np.asarray(hz, dtype=np.float64)
    linear = hz / (200.0 / 3.0)
    log_part = 15.0 + np.log(np.maximum(hz, 1e-30) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, log_part, linear)


def mel_to_hz(mel):
    mel = np.asarray(mel, dtype=np.float64)
    linear = mel * (200.0 / 3.0)
    log_part = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel - 15.0))
    return np.where(mel >= 15.0, log_part, linear)


def mel_filters(n_mels, sample_rate=16000, n_fft=400):
    """[n_mels, n_fft/2 + 1] triangular filters, equally spaced on the Slaney mel scale from
    0 Hz to the Nyquist frequency, each scaled by 2 / (its bandwidth in Hz)."""
    freqs = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2.0), n_mels + 2))
    weights = np.zeros((n_mels, freqs.size), dtype=np.float64)
    for m in range(n_mels):
        left, centre, right = edges[m], edges[m + 1], edges[m + 2]
        rising = (freqs - left) / (centre - left)
        falling = (right - freqs) / (right - centre)
        weights[m] = np.maximum(0.0, np.minimum(rising, falling)) * (2.0 / (right - left))
    return weights.astype(np.float32)


# --- vocabulary ------------------------------------------------------------------------------

def byte_level_alphabet():
    """GPT-2's byte-level BPE notation: byte b is written as the character chr(b) when that is
    a printable Latin-1 character ('!'..'~', '¡'..'¬', '®'..'ÿ'), otherwise as chr(256 + k)
    for the k-th remaining byte in increasing order. Returns {character: byte}."""
    printable = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAC + 1)) | set(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def read_vocabulary(path):
    lines = pathlib.Path(path).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def token_bytes(token, alphabet):
    try:
        return bytes(alphabet[c] for c in token)
    except KeyError as e:
        raise ValueError(f"token {token!r} has a character outside GPT-2's byte alphabet: {e}") from None


# --- tensors ---------------------------------------------------------------------------------

def whisper_tensors(v, n_audio_layer, n_text_layer, state):
    """(name, array, is_matrix) in whisper.cpp's names, OpenAI's layout ([out, in] matrices)."""
    out = []

    def add(name, array, matrix=False):
        out.append((name, np.asarray(array), matrix))

    def zero_key_bias(bias, rows, what):
        if np.any(bias[rows] != 0):
            raise ValueError(f"{what}: the key bias is not zero; whisper.cpp has no key bias")

    def self_attention(src, dst):
        """A layer's self-attention: CTranslate2's fused q/k/v split into whisper.cpp's three."""
        qkv_w, qkv_b = v[f"{src}/self_attention/linear_0/weight"], v[f"{src}/self_attention/linear_0/bias"]
        zero_key_bias(qkv_b, slice(state, 2 * state), src)
        add(f"{dst}.attn_ln.weight", v[f"{src}/self_attention/layer_norm/gamma"])
        add(f"{dst}.attn_ln.bias", v[f"{src}/self_attention/layer_norm/beta"])
        add(f"{dst}.attn.query.weight", qkv_w[:state], True)
        add(f"{dst}.attn.query.bias", qkv_b[:state])
        add(f"{dst}.attn.key.weight", qkv_w[state:2 * state], True)
        add(f"{dst}.attn.value.weight", qkv_w[2 * state:], True)
        add(f"{dst}.attn.value.bias", qkv_b[2 * state:])
        add(f"{dst}.attn.out.weight", v[f"{src}/self_attention/linear_1/weight"], True)
        add(f"{dst}.attn.out.bias", v[f"{src}/self_attention/linear_1/bias"])

    def feed_forward(src, dst):
        """A layer's feed-forward block and its layer norm."""
        add(f"{dst}.mlp_ln.weight", v[f"{src}/ffn/layer_norm/gamma"])
        add(f"{dst}.mlp_ln.bias", v[f"{src}/ffn/layer_norm/beta"])
        add(f"{dst}.mlp.0.weight", v[f"{src}/ffn/linear_0/weight"], True)
        add(f"{dst}.mlp.0.bias", v[f"{src}/ffn/linear_0/bias"])
        add(f"{dst}.mlp.2.weight", v[f"{src}/ffn/linear_1/weight"], True)
        add(f"{dst}.mlp.2.bias", v[f"{src}/ffn/linear_1/bias"])

    add("encoder.positional_embedding", v["encoder/position_encodings/encodings"])
    add("encoder.conv1.weight", v["encoder/conv1/weight"], True)
    add("encoder.conv1.bias", v["encoder/conv1/bias"].reshape(state, 1))
    add("encoder.conv2.weight", v["encoder/conv2/weight"], True)
    add("encoder.conv2.bias", v["encoder/conv2/bias"].reshape(state, 1))
    for i in range(n_audio_layer):
        src, dst = f"encoder/layer_{i}", f"encoder.blocks.{i}"
        self_attention(src, dst)
        feed_forward(src, dst)
    add("encoder.ln_post.weight", v["encoder/layer_norm/gamma"])
    add("encoder.ln_post.bias", v["encoder/layer_norm/beta"])

    add("decoder.positional_embedding", v["decoder/position_encodings/encodings"])
    add("decoder.token_embedding.weight", v["decoder/embeddings/weight"], True)
    for i in range(n_text_layer):
        src, dst = f"decoder/layer_{i}", f"decoder.blocks.{i}"
        self_attention(src, dst)
        kv_w, kv_b = v[f"{src}/attention/linear_1/weight"], v[f"{src}/attention/linear_1/bias"]
        zero_key_bias(kv_b, slice(0, state), f"{src} cross-attention")
        add(f"{dst}.cross_attn_ln.weight", v[f"{src}/attention/layer_norm/gamma"])
        add(f"{dst}.cross_attn_ln.bias", v[f"{src}/attention/layer_norm/beta"])
        add(f"{dst}.cross_attn.query.weight", v[f"{src}/attention/linear_0/weight"], True)
        add(f"{dst}.cross_attn.query.bias", v[f"{src}/attention/linear_0/bias"])
        add(f"{dst}.cross_attn.key.weight", kv_w[:state], True)
        add(f"{dst}.cross_attn.value.weight", kv_w[state:], True)
        add(f"{dst}.cross_attn.value.bias", kv_b[state:])
        add(f"{dst}.cross_attn.out.weight", v[f"{src}/attention/linear_2/weight"], True)
        add(f"{dst}.cross_attn.out.bias", v[f"{src}/attention/linear_2/bias"])
        feed_forward(src, dst)
    add("decoder.ln.weight", v["decoder/layer_norm/gamma"])
    add("decoder.ln.bias", v["decoder/layer_norm/beta"])
    return out


def count_layers(v, stack):
    n = 0
    while f"{stack}/layer_{n}/ffn/linear_0/weight" in v:
        n += 1
    return n


def scalar(v, name):
    return int(np.asarray(v[name]).reshape(()))


def convert(src, dst):
    src = pathlib.Path(src)
    v = read_ct2(src / "model.bin")
    vocab = read_vocabulary(src / "vocabulary.txt")
    quantized = sorted(n for n, a in v.items() if a.dtype not in (np.float16, np.float32) and a.ndim >= 1)
    if quantized:
        raise ValueError(f"{src}: quantized weights ({quantized[0]}, ...): convert from an f16/f32 folder")
    for name in ("decoder/scale_embeddings",):
        if name in v and scalar(v, name) != 0:
            raise ValueError(f"{name} is set: not a Whisper model as whisper.cpp runs it")

    n_mels = v["encoder/conv1/weight"].shape[1]
    n_audio_ctx, n_audio_state = v["encoder/position_encodings/encodings"].shape
    n_text_ctx, n_text_state = v["decoder/position_encodings/encodings"].shape
    n_vocab = v["decoder/embeddings/weight"].shape[0]
    n_audio_layer, n_text_layer = count_layers(v, "encoder"), count_layers(v, "decoder")
    n_audio_head, n_text_head = scalar(v, "encoder/num_heads"), scalar(v, "decoder/num_heads")
    if n_audio_state != n_text_state:
        raise ValueError("encoder and decoder widths differ; whisper.cpp needs them equal")
    if len(vocab) != n_vocab:
        raise ValueError(f"vocabulary.txt has {len(vocab)} tokens, the embedding {n_vocab} rows")
    ftype = 1
    hparams = [n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
               n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype]

    eot = vocab.index("<|endoftext|>")
    alphabet = byte_level_alphabet()
    words = [token_bytes(t, alphabet) for t in vocab[:eot]]

    filters = mel_filters(n_mels)
    tensors = whisper_tensors(v, n_audio_layer, n_text_layer, n_audio_state)

    dst = pathlib.Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".part")
    digest = hashlib.sha256()
    with open(tmp, "wb") as f:
        def write(b):
            f.write(b)
            digest.update(b)

        write(struct.pack("<I", GGML_MAGIC))
        write(struct.pack("<11i", *hparams))
        write(struct.pack("<2i", *filters.shape))
        write(filters.astype("<f4").tobytes())
        write(struct.pack("<i", len(words)))
        for w in words:
            write(struct.pack("<I", len(w)) + w)
        for name, array, matrix in tensors:
            half = matrix
            data = np.ascontiguousarray(array, dtype="<f2" if half else "<f4")
            ne = list(reversed(data.shape))
            raw_name = name.encode("utf-8")
            write(struct.pack(f"<3i{len(ne)}i", len(ne), len(raw_name), 1 if half else 0, *ne))
            write(raw_name)
            write(data.tobytes())
    os.replace(tmp, dst)
    print(f"wrote {dst}: {dst.stat().st_size} bytes, sha256 {digest.hexdigest()}")
    print(f"hparams n_vocab={n_vocab} audio_ctx={n_audio_ctx} state={n_audio_state} heads={n_audio_head}/"
          f"{n_text_head} layers={n_audio_layer}/{n_text_layer} text_ctx={n_text_ctx} mels={n_mels} "
          f"ftype={ftype}; {len(words)} vocabulary entries; {len(tensors)} tensors")


def main(argv):
    args = argv
    if any(a.startswith("-") for a in args) or len(args) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = args[0] if args else os.path.expanduser("~/.cache/susurrus/models/whisper-tiny.en-ct2")
    dst = args[1] if len(args) > 1 else ".gm/peers/ggml-tiny.en.bin"
    convert(src, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
