#!/usr/bin/env python3
"""Throughput of `susurrus serve --api` against concurrency, beside faster-whisper's
BatchedInferencePipeline serving the same requests.

For each concurrency C, C clients each send REQUESTS transcriptions one after another (the
golden clips short_1, short_2, short_3 and noisy in turn), and the table gives requests per
second, seconds of audio per second and the median request latency. Susurrus: the command's
API over HTTP (the upload, decoding and the queue included), its answers checked against
faster-whisper's text. faster-whisper: one WhisperModel with C CTranslate2 workers
(`num_workers`) and C threads each calling BatchedInferencePipeline.transcribe on the file
(decoding included, float32), both with beam 5, English, on the same CTranslate2 folder and
CPU threads. A warm-up request each before the timed runs.

Run it with any python3: it makes sure of the reference venv (scripts/python_venv.sh) and runs
itself in it, builds the command (release) unless --susurrus names one, and fetches tiny.en
(scripts/models/fetch_model.sh) unless --model names a folder.

    scripts/bench/bench_serve.py [--backend cpu|wgpu|cuda] [--device cpu|cuda] [--concurrency 1,4,16,64]
                                 [--requests N] [--threads N] [--batch 1,4]
"""

import argparse
import concurrent.futures
import json
import pathlib
import socket
import statistics
import subprocess
import sys
import time
import http.client
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
CLIPS = ["short_1", "short_2", "short_3", "noisy"]
sys.dont_write_bytecode = True
if __name__ == "__main__":
    import project_venv

    project_venv.run_in_venv()


def golden(clip):
    record = json.loads((GOLDEN / f"{clip}.json").read_text())
    run = next(r for r in record["runs"] if r["name"] == "beam_5")
    return run["text"].strip(), record["audio"]["duration"]


def wav_samples(path):
    """A 16 kHz mono 16-bit WAV file's samples as float32 in [-1, 1)."""
    import wave

    import numpy as np

    with wave.open(str(path)) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (16000, 1, 2):
            raise SystemExit(f"bench_serve: {path} is not 16 kHz mono 16-bit")
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def post(addr, clip, audio):
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{clip}.wav\"\r\n"
        "Content-Type: audio/wav\r\n\r\n"
    ).encode() + audio + f"\r\n--{boundary}--\r\n".encode()
    host, port = addr.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=3600)
    connection.request(
        "POST", "/v1/audio/transcriptions", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    reply = connection.getresponse()
    data = reply.read()
    connection.close()
    if reply.status != 200:
        raise SystemExit(f"bench_serve: {clip}: HTTP {reply.status}: {data[:300]!r}")
    return json.loads(data)["text"]


def metric_values(addr):
    """The server's /metrics, as {name: value} for its lines without labels."""
    host, port = addr.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if not line.startswith("#") and "{" not in name and value:
            values[name] = float(value)
    return values


def batching(before, after):
    """What the server's batching did between two /metrics readings: windows per group step
    and windows encoded together."""
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    steps = delta.get("susurrus_batch_windows_count", 0)
    per_step = delta.get("susurrus_batch_windows_sum", 0) / steps if steps else 0
    together = int(delta.get("susurrus_windows_encoded_together_total", 0))
    runs = int(delta.get("susurrus_encoder_batches_total", 0))
    return f"{steps:.0f} group steps of {per_step:.1f} windows on average; {together} windows encoded together in {runs} runs"


def run_clients(concurrency, requests, one):
    """C clients, each `requests` calls of `one(clip)` in turn; (wall s, latencies, clips)."""
    jobs = [[CLIPS[(c + k) % len(CLIPS)] for k in range(requests)] for c in range(concurrency)]

    def client(clips):
        out = []
        for clip in clips:
            started = time.monotonic()
            text = one(clip)
            out.append((clip, text, time.monotonic() - started))
        return out

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        done = [r for rs in pool.map(client, jobs) for r in rs]
    return time.monotonic() - started, done


def row(engine, concurrency, wall, done):
    audio = sum(golden(clip)[1] for clip, _, _ in done)
    exact = sum(text.strip() == golden(clip)[0] for clip, text, _ in done)
    latency = statistics.median(s for _, _, s in done)
    return (
        f"| {engine} | {concurrency} | {len(done)} | {wall:.1f} | {len(done) / wall:.2f} | {audio / wall:.1f} | "
        f"{latency:.2f} | {exact}/{len(done)} |"
    )


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench/bench_serve.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--susurrus", help="the susurrus command (default: built here, release)")
    parser.add_argument("--model", help="a CTranslate2 model folder (default: tiny.en, fetched once)")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of both engines")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--requests", type=int, default=2, help="requests per client")
    parser.add_argument("--batch", default="1,4", help="serve --batch: windows decoded together (a list runs each)")
    parser.add_argument("--no-peer", action="store_true", help="skip faster-whisper")
    parser.add_argument(
        "--peer-arrays",
        action="store_true",
        help="give faster-whisper the clips' samples, decoded here, not the files (where PyAV is missing)",
    )
    parser.add_argument("--device", default="cpu", help="faster-whisper's device (cpu, cuda)")
    parser.add_argument("--compute-type", default="float32", help="faster-whisper's compute type")
    args = parser.parse_args()
    if args.susurrus is None:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "susurrus-cli"], cwd=ROOT, check=True)
        args.susurrus = str(ROOT / "target" / "release" / "susurrus")
    if args.model is None:
        out = subprocess.run([str(ROOT / "scripts" / "models" / "fetch_model.sh")], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        args.model = out.strip().splitlines()[-1]
    levels = [int(c) for c in args.concurrency.split(",")]
    audio = {clip: (GOLDEN / f"{clip}.wav").read_bytes() for clip in CLIPS}
    rows = []
    notes = []

    for batch in args.batch.split(","):
        port = free_port()
        server = subprocess.Popen(
            [args.susurrus, "serve", "--api", "--backend", args.backend, "--threads", str(args.threads),
             "--model", args.model, "--root", str(ROOT / "www"), "--port", str(port),
             "--queue", str(max(levels) * args.requests), "--batch", batch],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            for line in server.stdout:
                if line.startswith("api "):
                    print(f"bench_serve: {line.strip()}", file=sys.stderr)
                    break
            else:
                raise SystemExit("bench_serve: the server did not start")
            addr = f"127.0.0.1:{port}"
            post(addr, "short_1", audio["short_1"])
            for c in levels:
                before = metric_values(addr)
                wall, done = run_clients(c, args.requests, lambda clip: post(addr, clip, audio[clip]))
                rows.append(row(f"Susurrus serve --api --batch {batch} ({args.backend})", c, wall, done))
                print(rows[-1], file=sys.stderr)
                notes.append(f"- --batch {batch}, {c} clients: {batching(before, metric_values(addr))}")
        finally:
            server.terminate()
            server.wait()

    if not args.no_peer:
        peer(args, levels, rows)
    print(TABLE_HEAD)
    print("\n".join(rows))
    if notes:
        print("\nSusurrus's batching, from its /metrics:")
        print("\n".join(notes))


TABLE_HEAD = """| engine | clients | requests | wall (s) | requests/s | audio s/s | latency p50 (s) | faster-whisper's text |
|---|---|---|---|---|---|---|---|"""


def peer(args, levels, rows):
    """faster-whisper's BatchedInferencePipeline on the same clips, at each concurrency."""
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    samples = {clip: wav_samples(GOLDEN / f"{clip}.wav") for clip in CLIPS} if args.peer_arrays else {}

    for c in levels:
        model = WhisperModel(
            args.model, device=args.device, compute_type=args.compute_type, cpu_threads=args.threads, num_workers=c
        )
        batched = BatchedInferencePipeline(model)

        def one(clip):
            audio = samples[clip] if args.peer_arrays else str(GOLDEN / f"{clip}.wav")
            segments, _ = batched.transcribe(audio, language="en", beam_size=5)
            return "".join(s.text for s in segments)

        one("short_1")
        wall, done = run_clients(c, args.requests, one)
        rows.append(row(f"faster-whisper BatchedInferencePipeline ({args.device})", c, wall, done))
        print(rows[-1], file=sys.stderr)
        del batched, model


if __name__ == "__main__":
    main()
