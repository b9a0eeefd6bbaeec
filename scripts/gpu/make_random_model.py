#!/usr/bin/env python3
"""Writes a Hugging Face Whisper folder with random weights at the real shapes of a released
size that exists nowhere here as files (small, medium, large-v3, large-v3-turbo), for
benchmarks on the GPU machine: transformers builds the architecture from its config (seeded
random initialisation: timing does not depend on the weights) and saves it as f16
safetensors; `config.json` and `generation_config.json` are transformers' own, with the
multilingual token settings added; `tokenizer.json` is the multilingual base model's
(scripts/models/fetch_model.sh base), with large-v3's extra language token `<|yue|>` inserted at
50358 for the 51866-token vocabulary (every later special id moves up by one, as in
large-v3's own tokenizer).

    python3 scripts/gpu/make_random_model.py ARCH OUT_DIR --tokenizer BASE/tokenizer.json [--seed N]
"""
import argparse
import copy
import json
import pathlib

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

# d_model, heads, encoder layers, decoder layers, mel bins, vocabulary: from each released
# model's config.json.
ARCHITECTURES = {
    "small": (768, 12, 12, 12, 80, 51865),
    "medium": (1024, 16, 24, 24, 80, 51865),
    "large-v3": (1280, 20, 32, 32, 128, 51866),
    "large-v3-turbo": (1280, 20, 32, 4, 128, 51866),
}
BASE_VOCABULARY = 51865
YUE = 50358


def config(arch):
    d, heads, enc, dec, mels, vocab = ARCHITECTURES[arch]
    shift = vocab - BASE_VOCABULARY
    return WhisperConfig(
        vocab_size=vocab, num_mel_bins=mels, d_model=d, encoder_layers=enc, decoder_layers=dec,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * d,
        decoder_ffn_dim=4 * d, max_source_positions=1500, max_target_positions=448,
        bos_token_id=50257, eos_token_id=50257, pad_token_id=50257, decoder_start_token_id=50258,
        begin_suppress_tokens=[220, 50257], suppress_tokens=[], forced_decoder_ids=None,
    ), shift


def tokenizer(base, shift):
    """base's tokenizer.json, with <|yue|> inserted for a 51866-token vocabulary."""
    doc = json.loads(pathlib.Path(base).read_text())
    if shift == 0:
        return doc
    out = copy.deepcopy(doc)
    added = []
    for token in doc["added_tokens"]:
        if token["id"] == YUE:
            yue = dict(token, content="<|yue|>")
            added.append(yue)
        moved = dict(token, id=token["id"] + 1) if token["id"] >= YUE else token
        added.append(moved)
    out["added_tokens"] = sorted(added, key=lambda t: t["id"])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("arch", choices=sorted(ARCHITECTURES))
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--tokenizer", required=True, help="the base model's tokenizer.json")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg, shift = config(args.arch)
    torch.manual_seed(args.seed)
    model = WhisperForConditionalGeneration(cfg).half()
    model.save_pretrained(args.out, safe_serialization=True)
    generation = json.loads((args.out / "generation_config.json").read_text())
    languages = [t for t in tokenizer(args.tokenizer, shift)["added_tokens"]
                 if 50259 <= t["id"] < 50358 + shift]
    generation.update({
        "lang_to_id": {t["content"]: t["id"] for t in languages},
        "suppress_tokens": [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91],
        "begin_suppress_tokens": [220, 50257],
        "no_timestamps_token_id": 50363 + shift,
        "is_multilingual": True,
    })
    (args.out / "generation_config.json").write_text(json.dumps(generation, indent=2))
    (args.out / "tokenizer.json").write_text(json.dumps(tokenizer(args.tokenizer, shift), ensure_ascii=False))
    params = sum(p.numel() for p in model.parameters())
    print(f"{args.arch}: {params / 1e6:.0f}M parameters (random, seed {args.seed}) -> {args.out}")


if __name__ == "__main__":
    main()
