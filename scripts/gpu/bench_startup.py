#!/usr/bin/env python3
"""Start-up of a whole transcription: `susurrus transcribe --format json AUDIO` run as a new
process again and again, per backend, timed from start to exit with its peak memory, beside the
phases its JSON reports (open, read + plan, compile, first transcription). Peers given with
--peer are timed the same way (whole process, peak memory), in the same invocation.

    scripts/gpu/bench_startup.py                      # wgpu and cuda, 8 runs each
    scripts/gpu/bench_startup.py --cold --runs 8      # empty the driver and susurrus caches first
    scripts/gpu/bench_startup.py --backends cpu --audio clip.wav
    scripts/gpu/bench_startup.py --peer 'whisper.cpp vulkan=/tmp/peers/vulkan/bin/whisper-cli -m tiny.en.bin -f {audio}'

The first run of each backend (or peer) is reported apart: after --cold it is a machine's first
start (the NVIDIA driver compiles every pipeline, or loads cuBLAS's kernels, into its own
caches). Standard library only.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHES = ["~/.nv", "~/.cache/nvidia", "~/.cache/susurrus/pipelines", "~/.cache/susurrus/kernels"]
PHASES = ["open_ms", "model_ms", "compile_ms", "transcribe_ms"]


def run_measured(argv):
    """Runs argv to its exit and returns (wall seconds, peak RSS in MB, stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            tail = err.read().decode(errors="replace")[-2000:]
            sys.exit(f"bench_startup: {' '.join(argv)} failed ({proc.returncode}): {tail}")
        return wall, usage.ru_maxrss / 1024, out.read()


def span(values, fmt):
    if not values:
        return "-"
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "target/release/susurrus"), help="the susurrus binary")
    ap.add_argument("--backends", default="wgpu,cuda", help="comma-separated backends (default wgpu,cuda)")
    ap.add_argument("--runs", type=int, default=8, help="processes per backend, the first reported apart")
    ap.add_argument("--audio", default=str(ROOT / "samples/sample.wav"))
    ap.add_argument("--model", help="model folder (default: susurrus's)")
    ap.add_argument("--cold", action="store_true", help="empty the driver's and susurrus's caches first: " + ", ".join(CACHES))
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=COMMAND",
                    help="a peer's whole transcription command; {audio} is replaced by the audio file")
    args = ap.parse_args()
    if args.runs < 2:
        sys.exit("bench_startup: --runs must be at least 2 (the first run is reported apart)")
    if not Path(args.bin).is_file():
        sys.exit(f"bench_startup: no binary at {args.bin} (cargo build --release -p susurrus-cli)")

    rows = []
    cold = args.cold
    for backend in [b for b in args.backends.split(",") if b]:
        if cold:
            for cache in CACHES:
                shutil.rmtree(os.path.expanduser(cache), ignore_errors=True)
            cold = False
        argv = [args.bin, "transcribe", "--backend", backend, "--format", "json", args.audio]
        if args.model:
            argv[2:2] = ["--model", args.model]
        runs = []
        for _ in range(args.runs):
            wall, rss, out = run_measured(argv)
            timings = json.loads(out.decode().splitlines()[0])["timings"]
            runs.append((wall, rss, timings))
        rows.append((f"susurrus {backend}", runs))
    for peer in args.peer:
        name, _, command = peer.partition("=")
        if not command:
            sys.exit(f"bench_startup: --peer {peer!r} is not NAME=COMMAND")
        argv = [a.replace("{audio}", args.audio) for a in shlex.split(command)]
        rows.append((name, [(*run_measured(argv)[:2], None) for _ in range(args.runs)]))

    print(f"Whole `transcribe` of {args.audio}, {args.runs} processes each (first apart; later: median, range)\n")
    print("| engine | first run | later runs (median) | range | open ms | read + plan ms | compile ms | first transcription ms | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, runs in rows:
        first, later = runs[0], runs[1:]
        walls = [r[0] for r in later]
        phases = [span([r[2][p] for r in later], lambda v: f"{v:.0f}") if later[0][2] else "-" for p in PHASES]
        print(
            f"| {name} | {first[0]:.2f} s | {statistics.median(walls):.2f} s | {span(walls, lambda v: f'{v:.2f}')} s | "
            + " | ".join(phases)
            + f" | {statistics.median(r[1] for r in later):.0f} |"
        )


if __name__ == "__main__":
    main()
