#!/usr/bin/env python3
"""int8 against f16: download size, peak memory, speed and quality, susurrus beside faster-whisper.

Four systems transcribe the golden clips (tests/fixtures/golden, manifest.json) with the
options of the fixtures' default runs (greedy, English, 2 CPU threads, no VAD):

- susurrus on tiny.en as faster-whisper ships it (f16 weights),
- susurrus on tiny.en quantized to int8 by CTranslate2 (scripts/models/fetch_model.sh tiny.en-int8),
- faster-whisper on the f16 model with compute_type="float32",
- faster-whisper on the int8 model with compute_type="int8" (int8 weights and activations).

Each runs in a process of its own (its peak RSS is that process's, model and audio included),
loads its model once and transcribes the clip list 1 + REPEATS times; the first pass is
discarded and each clip's time is the median of the others, summed over clips. Quality is
measured against the f16 reference (the fixtures: faster-whisper on the f16 model): word error
rate (edit distance over reference words, all clips together) and token agreement (1 - token
edit distance / reference tokens). Run it with any python3: it makes sure of the reference venv
(scripts/python_venv.sh) and runs itself in it.

    scripts/bench/bench_int8.py [--backend cpu|wgpu|cuda|auto] [--repeats N]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
sys.dont_write_bytecode = True
sys.path.insert(0, str(ROOT / "scripts" / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "golden"))
if __name__ == "__main__":
    import project_venv

    project_venv.run_in_venv()

from bench_vs_faster_whisper import build, clips  # noqa: E402
from make_golden import CPU_THREADS  # noqa: E402

# Runs in a child process: faster-whisper on `model` with `compute_type`, the clips `passes`
# times; prints one JSON line per transcription.
FASTER_WHISPER = """
import json, sys, time
sys.dont_write_bytecode = True
sys.path.insert(0, {golden!r})
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio
from make_golden import BASE_OPTIONS, CPU_THREADS, SAMPLE_RATE
model = WhisperModel({model!r}, device="cpu", compute_type={compute!r}, cpu_threads=CPU_THREADS)
audio = [decode_audio(w, sampling_rate=SAMPLE_RATE) for w in {wavs!r}]
for _ in range({passes}):
    for clip, samples in enumerate(audio):
        start = time.perf_counter()
        segments, _ = model.transcribe(samples, **BASE_OPTIONS)
        segments = list(segments)
        ms = (time.perf_counter() - start) * 1000.0
        tokens = [t for s in segments for t in s.tokens]
        print(json.dumps({{"clip": clip, "ms": ms, "text": "".join(s.text for s in segments), "tokens": tokens}}))
"""


def fetch(name):
    out = subprocess.run([str(ROOT / "scripts" / "models" / "fetch_model.sh"), name], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def susurrus(binary, model, backend, wavs, passes):
    command = [str(binary), "transcribe", "--model", model, "--backend", backend, "--threads", str(CPU_THREADS),
               "--format", "json"] + [str(w) for w in wavs] * passes
    rss = []
    rows = []
    for i, line in enumerate(filter(str.strip, peak(command, rss).splitlines())):
        obj = json.loads(line)
        tokens = [t for s in obj["segments"] for t in s["tokens"]]
        rows.append({"clip": i % len(wavs), "ms": float(obj["timings"]["transcribe_ms"]), "text": obj["text"],
                     "tokens": tokens})
    return rows, rss[0]


def faster_whisper(model, compute, wavs, passes):
    code = FASTER_WHISPER.format(golden=str(ROOT / "tests" / "golden"), model=model, compute=compute,
                                 wavs=[str(w) for w in wavs], passes=passes)
    rss = []
    stdout = peak([sys.executable, "-c", code], rss)
    return [json.loads(line) for line in stdout.splitlines() if line.strip()], rss[0]


def peak(command, out):
    """Runs `command`, appends its peak RSS (bytes) to `out` and returns its stdout."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    chunks = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda s, k: chunks[k].append(s.read()), args=(child.stdout, "out")),
               threading.Thread(target=lambda s, k: chunks[k].append(s.read()), args=(child.stderr, "err"))]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(child.pid, 0)
    for r in readers:
        r.join()
    stdout, stderr = "".join(chunks["out"]), "".join(chunks["err"])
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench: {command[0]} failed:\n{stderr}")
    out.append(usage.ru_maxrss * 1024)
    return stdout


def edits(reference, hypothesis):
    row = list(range(len(hypothesis) + 1))
    for i, r in enumerate(reference):
        previous, row[0] = row[0], i + 1
        for j, h in enumerate(hypothesis):
            previous, row[j + 1] = row[j + 1], min(previous + (r != h), row[j] + 1, row[j + 1] + 1)
    return row[len(hypothesis)]


def words(text):
    return [w for w in ("".join(c for c in word if c.isalnum() or c == "'") for word in text.lower().split()) if w]


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench/bench_int8.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["cpu", "wgpu", "cuda", "auto"], default="cpu",
                        help="susurrus's --backend (default: cpu)")
    parser.add_argument("--repeats", type=int, default=3, help="timed warm passes (default: 3)")
    args = parser.parse_args()
    binary = build()
    f16_model, int8_model = fetch("tiny.en"), fetch("tiny.en-int8")
    names, wavs = zip(*clips())
    passes = 1 + args.repeats
    references = []
    for name in names:
        run = next(r for r in json.loads((GOLDEN / f"{name}.json").read_text())["runs"] if r["name"] == "default")
        references.append((run["text"], [t for s in run["segments"] for t in s["tokens"]]))

    systems = [
        (f"susurrus {args.backend}, f16 weights", f16_model, lambda: susurrus(binary, f16_model, args.backend, wavs, passes)),
        (f"susurrus {args.backend}, int8 weights", int8_model, lambda: susurrus(binary, int8_model, args.backend, wavs, passes)),
        ("faster-whisper, float32", f16_model, lambda: faster_whisper(f16_model, "float32", wavs, passes)),
        ("faster-whisper, int8", int8_model, lambda: faster_whisper(int8_model, "int8", wavs, passes)),
    ]
    print(f"Whisper tiny.en, {len(names)} golden clips ({', '.join(names)}), {CPU_THREADS} threads, greedy; "
          f"median of {args.repeats} warm passes per clip, summed")
    header = (f"{'system':<32} {'model.bin':>10} {'peak RSS':>10} {'transcribe ms':>14} {'WER':>7} "
              f"{'token agreement':>16}")
    print(header)
    print("-" * len(header))
    for label, model, run in systems:
        rows, rss = run()
        ms = sum(statistics.median([r["ms"] for r in rows if r["clip"] == c][1:]) for c in range(len(names)))
        last = {r["clip"]: r for r in rows}
        word_edits = word_total = token_edits = token_total = 0
        for c, (ref_text, ref_tokens) in enumerate(references):
            word_edits += edits(words(ref_text), words(last[c]["text"]))
            word_total += len(words(ref_text))
            token_edits += edits(ref_tokens, last[c]["tokens"])
            token_total += len(ref_tokens)
        size = (pathlib.Path(model) / "model.bin").stat().st_size
        print(f"{label:<32} {size / 1e6:>8.1f}MB {rss / 1e6:>8.0f}MB {ms:>14.1f} {word_edits / word_total:>7.3f} "
              f"{1 - token_edits / token_total:>16.3f}")


if __name__ == "__main__":
    main()
