#!/usr/bin/env python3
"""The GPU benchmark table: `susurrus bench` on CUDA and on wgpu (Vulkan) beside PyTorch fp32
and fp16 (Whisper tiny.en's shapes, scripts/gpu/bench_pytorch.py), all in this one run on this
GPU. Medians; the ratio columns are PyTorch fp16's time over each row's (above 1: faster).
"step on device" is a decoder step replayed back to back without the host's work between
steps (`susurrus bench`'s decoder_device_ms_per_step).

With `--architecture ARCH --tokenizer BASE/tokenizer.json` the table is for a released size
that exists nowhere here as files (large-v3-turbo: 1280 wide, 32 + 4 layers, 128 mels): one
random-weight f16 folder (scripts/gpu/make_random_model.py) that susurrus benches greedily (random
weights never pass the fallback thresholds) and PyTorch fp16 runs at the same config.

With `--peers FILE` the table also has whisper.cpp's CUDA and Vulkan rows from the `PEER` lines
that `scripts/gpu/bench_peers_gpu.sh run` printed into FILE in the same device call (see
scripts/gpu/PEERS.md: same weights converted to ggml, same procedure; "step on device" is not
separable there).

    python3 scripts/gpu/bench_gpu.py [path/to/susurrus] [--runs N] [--peers FILE]
                                 [--architecture ARCH --tokenizer FILE]
"""
import json
import pathlib
import subprocess
import sys

import bench_pytorch
import make_random_model


def susurrus(binary, backend, runs, extra):
    out = subprocess.run(
        [binary, "bench", "--backend", backend, "--json", "--runs", str(runs), *extra],
        check=True, capture_output=True, text=True,
    )
    report = json.loads(out.stdout)
    return (
        report["encoder_ms_per_window"],
        report["decoder_ms_per_token"],
        report["decoder_device_ms_per_step"],
        report["real_time_factor"],
    )


def peer_rows(path):
    """Rows from whisper.cpp's `PEER system=... backend=B key=value ...` result lines."""
    rows = []
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.startswith("PEER system="):
            continue
        fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
        name = f"whisper.cpp {fields.get('backend', '?')}"
        if "error" in fields:
            print(f"{name}: {fields['error']}", file=sys.stderr)
            continue
        rows.append((name, float(fields["encoder_ms_per_window"]), float(fields["decoder_ms_per_token"]), None,
                     float(fields["rtf"])))
    return rows


def main():
    args = sys.argv[1:]
    runs = 20
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    option = {}
    for name in ("--architecture", "--tokenizer", "--peers"):
        if name in args:
            i = args.index(name)
            option[name] = args[i + 1]
            del args[i:i + 2]
    binary = args[0] if args else "target/release/susurrus"
    extra, config, dtypes = [], None, (bench_pytorch.torch.float32, bench_pytorch.torch.float16)
    if "--architecture" in option:
        arch = option["--architecture"]
        folder = f"/tmp/susurrus-{arch}-random"
        subprocess.run([sys.executable, str(pathlib.Path(__file__).with_name("make_random_model.py")), arch, folder,
                        "--tokenizer", option["--tokenizer"]], check=True)
        extra = ["--model", folder, "--temperature", "0"]
        config, _ = make_random_model.config(arch)
        dtypes = (bench_pytorch.torch.float16,)
        print(f"model: {arch} shapes, random f16 weights ({folder})")
    rows = []
    for backend in ("cuda", "wgpu"):
        try:
            enc, dec, device, rtf = susurrus(binary, backend, runs, extra)
            rows.append((f"susurrus {backend}", enc, dec, device, rtf))
        except subprocess.CalledProcessError as e:
            print(f"susurrus {backend} failed: {e.stderr.strip()}", file=sys.stderr)
    if "--peers" in option:
        rows.extend(peer_rows(option["--peers"]))
    for name, enc, dec in bench_pytorch.measure(config, dtypes):
        rows.append((f"PyTorch {name}", enc, dec, None, None))
    peer = next(r for r in rows if r[0] == "PyTorch fp16")
    print(f"GPU: {bench_pytorch.torch.cuda.get_device_name()}, median of {runs} runs (susurrus, whisper.cpp) / 50 (PyTorch)")
    print(
        f"{'':<24} {'encoder ms/window':>18} {'decoder ms/token':>17} {'step on device':>15} "
        f"{'enc vs fp16':>12} {'dec vs fp16':>12} {'RTF':>8}"
    )
    for name, enc, dec, device, rtf in rows:
        device_text = f"{device:.3f}" if device is not None else "-"
        rtf_text = f"{rtf:.4f}" if rtf is not None else "-"
        print(
            f"{name:<24} {enc:>18.3f} {dec:>17.3f} {device_text:>15} "
            f"{peer[1] / enc:>11.2f}x {peer[2] / dec:>11.2f}x {rtf_text:>8}"
        )


if __name__ == "__main__":
    main()
