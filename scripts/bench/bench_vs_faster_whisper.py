#!/usr/bin/env python3
"""Times `susurrus transcribe` and faster-whisper side by side on the golden clips.

Both run Whisper tiny.en from the same CTranslate2 folder on 2 CPU threads with the same beam
size (--beam-size: 5, both defaults, or 1, greedy), English, no VAD: otherwise the options
tests/golden/make_golden.py gives faster-whisper (imported from it, so the two cannot drift
apart). Each loads its model once and transcribes the clip list
1 + REPEATS times; the first pass warms caches and allocators and is discarded, and each clip's
figure is the median of the other passes. The two never run at the same time.

What is timed is transcription from decoded 16 kHz samples: susurrus's `timings.transcribe_ms`
(its JSON output, audio decoding excluded) and faster-whisper's `transcribe()` on the decoded
array plus consuming its segments. Model loading and file decoding are left out of both.

Run it with any python3: it makes sure of the reference venv (scripts/python_venv.sh) and runs
itself in it, then builds the release binary and fetches tiny.en (scripts/models/fetch_model.sh).

    scripts/bench/bench_vs_faster_whisper.py [--backend auto|cpu|wgpu] [--beam-size N] [--repeats N]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
# Importing make_golden would otherwise leave a __pycache__ folder in the repository.
sys.dont_write_bytecode = True
sys.path.insert(0, str(ROOT / "tests" / "golden"))
if __name__ == "__main__":
    import project_venv

    project_venv.run_in_venv()

from faster_whisper import WhisperModel  # noqa: E402
from faster_whisper.audio import decode_audio  # noqa: E402
from make_golden import BASE_OPTIONS, CPU_THREADS, SAMPLE_RATE  # noqa: E402


def clips():
    """(name, wav path) of every clip manifest.json lists, in its order."""
    manifest = json.loads((GOLDEN / "manifest.json").read_text())
    out = []
    for entry in manifest["clips"]:
        name = entry.removesuffix(".json")
        wav = GOLDEN / f"{name}.wav"
        if not wav.is_file():
            raise SystemExit(f"bench: {wav} is listed in manifest.json but missing")
        out.append((name, wav))
    return out


def build():
    """Builds the release binary and returns its path."""
    print("bench: cargo build --release -p susurrus-cli", file=sys.stderr, flush=True)
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "-p", "susurrus-cli", "--bin", "susurrus"],
        cwd=ROOT,
        check=True,
    )
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    return target / "release" / "susurrus"


def fetch_model():
    out = subprocess.run(
        [str(ROOT / "scripts" / "models" / "fetch_model.sh")], check=True, capture_output=True, text=True
    ).stdout
    return out.strip().splitlines()[-1]


def time_susurrus(binary, model, backend, beam_size, wavs, passes):
    """Per clip: the texts and transcribe_ms of every pass, from one process (model loaded
    once), the clip list given `passes` times."""
    command = [
        str(binary), "transcribe", "--model", model, "--backend", backend,
        "--threads", str(CPU_THREADS), "--beam-size", str(beam_size), "--format", "json",
    ] + [str(w) for w in wavs] * passes
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"bench: susurrus failed (exit {run.returncode}):\n{run.stderr}")
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    if len(lines) != len(wavs) * passes:
        raise SystemExit(
            f"bench: susurrus printed {len(lines)} JSON lines for {len(wavs) * passes} inputs:\n{run.stdout}"
        )
    results = [{"texts": [], "ms": []} for _ in wavs]
    for i, obj in enumerate(lines):
        clip = i % len(wavs)
        if pathlib.Path(obj["file"]).name != wavs[clip].name:
            raise SystemExit(f"bench: line {i + 1} is for {obj['file']}, expected {wavs[clip].name}")
        results[clip]["texts"].append(obj["text"])
        results[clip]["ms"].append(float(obj["timings"]["transcribe_ms"]))
    return results


def time_faster_whisper(model_dir, beam_size, wavs, passes):
    """Per clip: the texts and the milliseconds of transcribe() plus consuming its segments,
    on samples decoded beforehand, model loaded once."""
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=CPU_THREADS)
    audio = [decode_audio(str(w), sampling_rate=SAMPLE_RATE) for w in wavs]
    results = [{"texts": [], "ms": []} for _ in wavs]
    for _ in range(passes):
        for clip, samples in enumerate(audio):
            start = time.perf_counter()
            segments, _ = model.transcribe(samples, **{**BASE_OPTIONS, "beam_size": beam_size})
            text = "".join(s.text for s in segments)
            results[clip]["ms"].append((time.perf_counter() - start) * 1000.0)
            results[clip]["texts"].append(text)
    return results


def main():
    parser = argparse.ArgumentParser(
        prog="scripts/bench/bench_vs_faster_whisper.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--backend", choices=["auto", "cpu", "wgpu"], default="cpu",
                        help="susurrus's --backend (default: cpu)")
    parser.add_argument("--beam-size", type=int, default=5,
                        help="beams of both (default: 5, both defaults; 1 decodes greedily)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed warm passes whose median is reported (default: 3)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not 1 <= args.beam_size <= 32:
        parser.error("--beam-size must be 1 to 32")

    binary = build()
    model = fetch_model()
    names, wavs = zip(*clips())
    passes = 1 + args.repeats
    durations = [len(decode_audio(str(w), sampling_rate=SAMPLE_RATE)) / SAMPLE_RATE for w in wavs]

    load_ours = os.getloadavg()[0]
    ours = time_susurrus(binary, model, args.backend, args.beam_size, wavs, passes)
    load_theirs = os.getloadavg()[0]
    theirs = time_faster_whisper(model, args.beam_size, wavs, passes)

    print(f"susurrus --backend {args.backend} --threads {CPU_THREADS} vs faster-whisper "
          f"(float32, cpu_threads={CPU_THREADS}), beam_size={args.beam_size}, Whisper tiny.en")
    passes_text = "1 warm pass" if args.repeats == 1 else f"median of {args.repeats} warm passes"
    print(f"{passes_text} (first pass discarded); 1-min load average "
          f"before: susurrus {load_ours:.2f}, faster-whisper {load_theirs:.2f}")
    header = f"{'clip':<10} {'audio s':>8} {'susurrus ms':>12} {'faster-whisper ms':>18} {'ratio':>6}  text"
    print(header)
    print("-" * len(header))
    total_ours = total_theirs = 0.0
    mismatches = []
    for name, seconds, o, t in zip(names, durations, ours, theirs):
        ms_ours = statistics.median(o["ms"][1:])
        ms_theirs = statistics.median(t["ms"][1:])
        total_ours += ms_ours
        total_theirs += ms_theirs
        # Same: every pass of both gave one text (leading space aside).
        texts_ours = sorted({text.strip() for text in o["texts"]})
        texts_theirs = sorted({text.strip() for text in t["texts"]})
        same = len(texts_ours) == 1 and texts_ours == texts_theirs
        if not same:
            mismatches.append((name, texts_ours, texts_theirs))
        print(f"{name:<10} {seconds:>8.2f} {ms_ours:>12.1f} {ms_theirs:>18.1f} "
              f"{ms_ours / ms_theirs:>6.2f}  {'same' if same else 'DIFFERS'}")
    print("-" * len(header))
    print(f"{'total':<10} {sum(durations):>8.2f} {total_ours:>12.1f} {total_theirs:>18.1f} "
          f"{total_ours / total_theirs:>6.2f}")
    for name, texts_ours, texts_theirs in mismatches:
        print(f"\n{name}:")
        for text in texts_ours:
            print(f"  susurrus:       {text}")
        for text in texts_theirs:
            print(f"  faster-whisper: {text}")


if __name__ == "__main__":
    main()
