"""Quantizes a CTranslate2 Whisper model with CTranslate2's own quantizer.

    python scripts/models/ct2_quantize.py SRC_DIR DEST_DIR --quantization int8|int8_float16

Reads SRC_DIR/model.bin (a float model as faster-whisper users have it), fills a
`ctranslate2.specs.WhisperSpec` with its variables and lets CTranslate2 quantize and write it
(`ModelSpec.optimize` + `save`: the code `ct2-transformers-converter --quantization` runs after
loading a PyTorch model). The other files (config.json, vocabulary, tokenizer) are copied.
It needs only the `ctranslate2` package the reference generators already install, not PyTorch.
"""

import argparse
import os
import re
import shutil
import struct
import sys

import numpy as np
from ctranslate2.specs import WhisperSpec

DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_model_bin(path):
    """The variables of a CTranslate2 model.bin (version 6) by name, aliases resolved."""
    with open(path, "rb") as f:
        data = f.read()
    at = 0

    def take(fmt):
        nonlocal at
        values = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return values

    def string():
        (n,) = take("<H")
        text = data[at : at + n - 1].decode()
        take(f"<{n}s")
        return text

    (version,) = take("<I")
    if version != 6:
        sys.exit(f"{path}: binary version {version}, expected 6")
    spec_name = string()
    take("<I")
    if spec_name != "WhisperSpec":
        sys.exit(f"{path}: a {spec_name}, not a WhisperSpec")
    (count,) = take("<I")
    variables = {}
    for _ in range(count):
        name = string()
        (rank,) = take("<B")
        dims = take(f"<{rank}I")
        (code,) = take("<B")
        (n_bytes,) = take("<I")
        dtype = DTYPES.get(code)
        if dtype is None:
            sys.exit(f"{path}: {name} has dtype code {code}, not a float model")
        variables[name] = np.frombuffer(data, dtype, n_bytes // np.dtype(dtype).itemsize, at).reshape(dims)
        at += n_bytes
    (aliases,) = take("<I")
    for _ in range(aliases):
        alias = string()
        variables[alias] = variables[string()]
    return variables


def assign(spec, name, value):
    """Sets `encoder/layer_3/ffn/linear_0/weight` on the spec (`layer_3` is `layer[3]`)."""
    *scopes, attr = name.split("/")
    node = spec
    for scope in scopes:
        m = re.fullmatch(r"(.+)_(\d+)", scope)
        if m and isinstance(getattr(node, m.group(1), None), list):
            node = getattr(node, m.group(1))[int(m.group(2))]
        else:
            node = getattr(node, scope)
    if not hasattr(node, attr):
        sys.exit(f"model.bin: {name} is not a variable of WhisperSpec")
    setattr(node, attr, value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dest")
    parser.add_argument("--quantization", required=True, choices=["int8", "int8_float16", "int8_float32"])
    args = parser.parse_args()

    variables = read_model_bin(os.path.join(args.src, "model.bin"))
    layers = lambda part: len({n.split("/")[1] for n in variables if re.match(rf"{part}/layer_\d+/", n)})
    heads = lambda part: int(variables[f"{part}/num_heads"]) if f"{part}/num_heads" in variables else None
    enc_heads = heads("encoder")
    d_model = variables["encoder/layer_norm/gamma"].shape[0]
    # CTranslate2 stores the encoder's head count; the decoder's is the same in every Whisper.
    spec = WhisperSpec(layers("encoder"), enc_heads, layers("decoder"), enc_heads)
    for name, value in variables.items():
        if value.ndim == 0:
            continue
        assign(spec, name, np.array(value))
    # The vocabulary only passes the spec's size check: the source's own file is copied.
    with open(os.path.join(args.src, "vocabulary.txt"), encoding="utf-8") as f:
        spec.register_vocabulary(f.read().split("\n")[: spec.get_vocabulary_size()])
    spec.validate()
    spec.optimize(args.quantization)

    os.makedirs(args.dest, exist_ok=True)
    spec._serialize(os.path.join(args.dest, "model.bin"))
    for entry in os.listdir(args.src):
        if entry != "model.bin" and os.path.isfile(os.path.join(args.src, entry)):
            shutil.copy(os.path.join(args.src, entry), os.path.join(args.dest, entry))
    print(f"{args.dest}: {args.quantization}, d_model {d_model}, {enc_heads} heads", file=sys.stderr)


if __name__ == "__main__":
    main()
