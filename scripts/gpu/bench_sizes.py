#!/usr/bin/env python3
"""The size matrix, in one invocation on the GPU machine: Whisper tiny, base, small, medium and
large-v3-turbo at their full shapes with random weights written by the test kit's random_model
example (f16, and with --int8 the project's quantizer's int8), each on CUDA, on wgpu
with matrix units (Vulkan), and on wgpu's browser path (`--backend wgpu-browser`: no matrix
units, no subgroups, f32 arithmetic on f16 weights, as Chromium on NVIDIA and Firefox run the
web package; `wgpu-browser-f16`: the same with f16 arithmetic, as Chromium elsewhere), beside
PyTorch fp16 (eager, and encoder and step captured as CUDA graphs) at the same config.

Random weights at every size, tiny and base included: the real tiny.en and base folders (75 and
145 MB) do not fit what travels to the GPU machine (64 MiB), and the times of a kernel do not
depend on the values it multiplies. Random weights never pass the fallback thresholds, so every
size is benched greedily at temperature 0 (`bench --temperature 0`); the decoder figures are per
token of a greedy window. Medians of --runs runs (susurrus) and 50 (PyTorch). Peak RSS is the
susurrus process's; GPU memory the device's peak use while it ran (nvidia-smi every 0.2 s)
above what was in use before.

    python3 scripts/gpu/bench_sizes.py SUSURRUS RANDOM_MODEL --tokenizer BASE/tokenizer.json \
        [--runs N] [--sizes tiny,base,small,medium,large-v3-turbo] [--int8] [--backends B,...] [--json OUT]

SUSURRUS is a release `susurrus` binary, RANDOM_MODEL the release build of
`cargo build --release -p susurrus-testkit --example random_model`, and the tokenizer the
multilingual base model's (`scripts/models/fetch_model.sh base`).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

BACKENDS = ("cuda", "wgpu", "wgpu-browser", "wgpu-browser-f16")
# Layers each side of the random sizes: their own (turbo's 32 encoder layers, 4 decoder).
LAYERS = {"tiny": 4, "base": 6, "small": 12, "medium": 24, "large-v3-turbo": 32}
# d_model, heads, encoder layers, decoder layers, mel bins, vocabulary of each size.
SHAPES = {
    "tiny": (384, 6, 4, 4, 80, 51865),
    "base": (512, 8, 6, 6, 80, 51865),
    "small": (768, 12, 12, 12, 80, 51865),
    "medium": (1024, 16, 24, 24, 80, 51865),
    "large-v3-turbo": (1280, 20, 32, 4, 128, 51866),
}


def gpu_memory_used():
    """The GPU's memory in use, MiB (the whole device: the benchmark is alone on it)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True)
        return float(out.stdout.split()[0])
    except (OSError, IndexError, ValueError):
        return None


def bench(binary, backend, folder, runs):
    """`susurrus bench --json` on one backend: the report with its peak GPU memory (sampled
    every 0.2 s, above what was in use before), or the error's last line."""
    before = gpu_memory_used()
    process = subprocess.Popen(
        [binary, "bench", "--backend", backend, "--json", "--runs", str(runs), "--temperature", "0",
         "--model", str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    peak = before
    while True:
        try:
            stdout, stderr = process.communicate(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            used = gpu_memory_used()
            if used is not None and peak is not None:
                peak = max(peak, used)
    if process.returncode != 0:
        return None, (stderr.strip().splitlines() or ["exit %d" % process.returncode])[-1]
    report = json.loads(stdout)
    report["gpu_memory_mib"] = None if before is None else peak - before
    return report, None


def pytorch_rows(size):
    """PyTorch fp16 eager and CUDA-graph rows at the size's config (random weights)."""
    try:
        import bench_pytorch
        from transformers import WhisperConfig
    except ImportError as e:
        print(f"PyTorch rows left out: {e}", file=sys.stderr)
        return []
    d, heads, enc, dec, mels, vocab = SHAPES[size]
    config = WhisperConfig(
        vocab_size=vocab, num_mel_bins=mels, d_model=d, encoder_layers=enc, decoder_layers=dec,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * d,
        decoder_ffn_dim=4 * d, max_source_positions=1500, max_target_positions=448,
    )
    rows = bench_pytorch.measure(config, (bench_pytorch.torch.float16,))
    bench_pytorch.torch.cuda.empty_cache()
    return [(f"PyTorch {name}", enc_ms, dec_ms) for name, enc_ms, dec_ms in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("susurrus")
    parser.add_argument("random_model")
    parser.add_argument("--tokenizer", required=True, type=pathlib.Path, help="the base model's tokenizer.json")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default=",".join(SHAPES))
    parser.add_argument("--int8", action="store_true", help="also the random sizes' int8 folders")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="the susurrus backends to run")
    parser.add_argument("--json", type=pathlib.Path, help="write every row here as JSON")
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    unknown = [s for s in sizes if s not in SHAPES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; known: {', '.join(SHAPES)}")
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="susurrus-sizes-"))
    rows = []
    for size in sizes:
        folders = []
        for weights in ("f16", "int8") if args.int8 else ("f16",):
            folder = scratch / f"{size}-{weights}"
            started = time.monotonic()
            subprocess.run([args.random_model, size, str(LAYERS[size]), str(folder), str(args.tokenizer),
                            *([weights] if weights == "int8" else [])],
                           check=True, stdout=subprocess.DEVNULL)
            print(f"{size} {weights}: random weights written in {time.monotonic() - started:.1f} s", file=sys.stderr)
            folders.append((weights, folder))
        for weights, folder in folders:
            for backend in args.backends.split(","):
                report, error = bench(args.susurrus, backend, folder, args.runs)
                row = {"size": size, "weights": weights, "runner": f"susurrus {backend}"}
                if error:
                    row["error"] = error
                else:
                    row.update({k: report[k] for k in ("encoder_ms_per_window", "decoder_ms_per_token",
                                                        "decoder_device_ms_per_step", "load_ms",
                                                        "real_time_factor", "peak_memory_mib",
                                                        "gpu_memory_mib")})
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        for name, enc_ms, dec_ms in pytorch_rows(size):
            rows.append({"size": size, "weights": "f16", "runner": name, "encoder_ms_per_window": enc_ms,
                         "decoder_ms_per_token": dec_ms})
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        gpu = "no NVIDIA GPU (nvidia-smi missing)"
    print(f"GPU: {gpu}; medians of {args.runs} susurrus runs, 50 PyTorch runs; greedy, temperature 0")
    print(f"{'size':<15} {'weights':<7} {'runner':<26} {'enc ms/window':>14} {'dec ms/token':>13} "
          f"{'step on device':>15} {'load ms':>9} {'peak RSS MiB':>13} {'GPU MiB':>8}")

    def cell(row, key, digits):
        value = row.get(key)
        return "-" if value is None else f"{value:.{digits}f}"

    for row in rows:
        if "error" in row:
            print(f"{row['size']:<15} {row['weights']:<7} {row['runner']:<26} failed: {row['error']}")
            continue
        print(f"{row['size']:<15} {row['weights']:<7} {row['runner']:<26} {cell(row, 'encoder_ms_per_window', 2):>14} "
              f"{cell(row, 'decoder_ms_per_token', 3):>13} {cell(row, 'decoder_device_ms_per_step', 3):>15} "
              f"{cell(row, 'load_ms', 0):>9} {cell(row, 'peak_memory_mib', 0):>13} {cell(row, 'gpu_memory_mib', 0):>8}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu, "runs": args.runs, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
