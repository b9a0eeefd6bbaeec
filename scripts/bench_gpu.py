#!/usr/bin/env python3
"""The GPU benchmark table: `susurrus bench` on CUDA and on wgpu (Vulkan) beside PyTorch fp32
and fp16 (Whisper tiny.en's shapes, scripts/bench_pytorch.py), all in this one run on this
GPU. Medians; the ratio columns are PyTorch fp16's time over each row's (above 1: faster).
"step on device" is a decoder step replayed back to back without the host's work between
steps (`susurrus bench`'s decoder_device_ms_per_step).

    python3 scripts/bench_gpu.py [path/to/susurrus] [--runs N]
"""
import json
import subprocess
import sys

import bench_pytorch


def susurrus(binary, backend, runs):
    out = subprocess.run(
        [binary, "bench", "--backend", backend, "--json", "--runs", str(runs)],
        check=True, capture_output=True, text=True,
    )
    report = json.loads(out.stdout)
    return (
        report["encoder_ms_per_window"],
        report["decoder_ms_per_token"],
        report["decoder_device_ms_per_step"],
        report["real_time_factor"],
    )


def main():
    args = sys.argv[1:]
    runs = 20
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    binary = args[0] if args else "target/release/susurrus"
    rows = []
    for backend in ("cuda", "wgpu"):
        try:
            enc, dec, device, rtf = susurrus(binary, backend, runs)
            rows.append((f"susurrus {backend}", enc, dec, device, rtf))
        except subprocess.CalledProcessError as e:
            print(f"susurrus {backend} failed: {e.stderr.strip()}", file=sys.stderr)
    for name, enc, dec in bench_pytorch.measure():
        rows.append((f"PyTorch {name}", enc, dec, None, None))
    peer = next(r for r in rows if r[0] == "PyTorch fp16")
    print(f"GPU: {bench_pytorch.torch.cuda.get_device_name()}, median of {runs} runs (susurrus) / 50 (PyTorch)")
    print(
        f"{'':<16} {'encoder ms/window':>18} {'decoder ms/token':>17} {'step on device':>15} "
        f"{'enc vs fp16':>12} {'dec vs fp16':>12} {'RTF':>8}"
    )
    for name, enc, dec, device, rtf in rows:
        device_text = f"{device:.3f}" if device is not None else "-"
        rtf_text = f"{rtf:.4f}" if rtf is not None else "-"
        print(
            f"{name:<16} {enc:>18.3f} {dec:>17.3f} {device_text:>15} "
            f"{peer[1] / enc:>11.2f}x {peer[2] / dec:>11.2f}x {rtf_text:>8}"
        )


if __name__ == "__main__":
    main()
