#!/usr/bin/env python3
"""Helpers for scripts/gpu/bench_peers_gpu.sh (the whisper.cpp peer benchmark).

    bench_peers.py reference OUT_DIR [MODEL_DIR]
        (CPU machine, project venv: faster-whisper + ctranslate2) For each reference clip
        (samples/sample.wav resampled to 16 kHz by the caller as OUT_DIR/../sample-16k.wav, and
        tests/fixtures/golden/{short_1,short_2,short_3,noisy,long}.wav) writes the first 30 s
        window's log-mel as faster-whisper builds it (OUT_DIR/CLIP.mel.f32, f32le [80][3000])
        and CTranslate2's greedy decoding of it from <|startoftranscript|><|notimestamps|> with
        faster-whisper's default suppression (OUT_DIR/reference.json: ids, mean log-prob).

    bench_peers.py check LABEL BENCH_BINARY MODEL.bin REF_DIR [extra whisper_cpp_bench args]
        Runs `whisper_cpp_bench MODEL --greedy-mel` on every reference window with the same
        suppression and prints one `PEER_CHECK` line per clip (ids identical or not, mean
        log-prob beside CTranslate2's) and a summary line. Exit status 0 even on differences
        (they are reported); 1 if the binary fails.

    bench_peers.py whisper-bench LABEL LOG
        Parses whisper.cpp's own `whisper-bench` output (whisper_print_timings lines) and prints
        one `PEER_XCHECK` line: its encode ms per run and decode ms per run (one run of 256
        single-token steps, its mean: a cross-check, not the headline figure).

    bench_peers.py result LABEL JSON_LINE_FILE [GPU_NAME [STDERR_FILE]]
        Prints the `PEER` result line from whisper_cpp_bench's JSON line (and, from its stderr,
        the ggml device whisper.cpp chose: CUDA0, Vulkan0, or none).

    bench_peers.py sample IN OUT.wav
        (project venv) Any audio file -> 16 kHz mono 16-bit WAV (faster-whisper's decoder).

    bench_peers.py pack STAGE CHUNK_MIB
        Packs STAGE/files into STAGE/chunk-1, chunk-2, ... each at most CHUNK_MIB MiB:
        chunk-1 holds build.tar (everything but the model) and the model's first part, later
        chunks the following parts; every chunk has a SHA256SUMS, chunk-1 also MODEL_PARTS
        (the parts in order) and MODEL_SHA256 (of the whole model).

Every figure printed comes from the files or runs named on the command line.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
CLIPS = ["sample-16k", "short_1", "short_2", "short_3", "noisy", "long"]
SPECIALS_SUPPRESSED = ["<|startoftranscript|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
                       "<|startofprev|>", "<|nocaptions|>"]


def suppress_list(model_dir):
    """faster-whisper's default suppress_tokens=[-1]: config.json's suppress_ids and the
    special tokens above (read from vocabulary.txt)."""
    model_dir = pathlib.Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    vocab = (model_dir / "vocabulary.txt").read_text(encoding="utf-8").split("\n")
    ids = set(config["suppress_ids"]) | {vocab.index(t) for t in SPECIALS_SUPPRESSED}
    return sorted(ids)


def reference(out_dir, model_dir):
    import ctranslate2
    import numpy as np
    from faster_whisper.audio import decode_audio, pad_or_trim
    from faster_whisper.feature_extractor import FeatureExtractor

    sys.path.insert(0, str(ROOT / "scripts" / "models"))
    import ggml_convert
    alphabet = ggml_convert.byte_level_alphabet()

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = (pathlib.Path(model_dir) / "vocabulary.txt").read_text(encoding="utf-8").split("\n")
    prompt = [vocab.index("<|startoftranscript|>"), vocab.index("<|notimestamps|>")]
    suppress = suppress_list(model_dir)
    fixture = json.loads((GOLDEN / "short_1.json").read_text())
    fixture_suppress = fixture["runs"][0]["transcription_options"]["suppress_tokens"]
    if suppress != sorted(fixture_suppress):
        raise SystemExit("the suppression list differs from the golden fixture's")

    model = ctranslate2.models.Whisper(str(model_dir), device="cpu", compute_type="float32", intra_threads=2)
    fe = FeatureExtractor()
    clips = {}
    for clip in CLIPS:
        wav = out.parent / "sample-16k.wav" if clip == "sample-16k" else GOLDEN / f"{clip}.wav"
        features = fe(decode_audio(str(wav), sampling_rate=16000))
        content = features.shape[-1] - 1
        mel = np.ascontiguousarray(pad_or_trim(features[:, :min(3000, content)]), dtype="<f4")
        if clip == "short_1":
            golden = np.fromfile(GOLDEN / "short_1.mel.f32", dtype="<f4").reshape(mel.shape)
            # Equal up to float rounding (numpy's FFT does not promise bit-identical results).
            if np.abs(golden - mel).max() > 1e-5:
                raise SystemExit("short_1's recomputed mel differs from the golden fixture's")
        (out / f"{clip}.mel.f32").write_bytes(mel.tobytes())
        result = model.generate(ctranslate2.StorageView.from_array(mel[None]), [prompt], beam_size=1,
                                return_scores=True, suppress_blank=True, suppress_tokens=suppress,
                                max_length=448)[0]
        ids = result.sequences_ids[0]
        clips[clip] = {"wav": str(wav.relative_to(ROOT)) if wav.is_relative_to(ROOT) else wav.name,
                       "ids": ids, "mean_logprob": result.scores[0],
                       "text": b"".join(ggml_convert.token_bytes(vocab[i], alphabet) for i in ids).decode("utf-8", "replace")}
        print(f"reference {clip}: {len(ids)} tokens, mean log-prob {result.scores[0]:.4f}")
    doc = {"generator": "scripts/gpu/bench_peers.py reference", "model_dir": os.path.basename(str(model_dir)),
           "prompt": prompt, "suppress_tokens": suppress, "suppress_blank": True,
           "versions": {"ctranslate2": ctranslate2.__version__}, "clips": clips}
    (out / "reference.json").write_text(json.dumps(doc, indent=1) + "\n")


def check(label, binary, model, ref_dir, extra):
    ref_dir = pathlib.Path(ref_dir)
    doc = json.loads((ref_dir / "reference.json").read_text())
    suppress = ",".join(map(str, doc["suppress_tokens"]))
    same = 0
    for clip, ref in doc["clips"].items():
        cmd = [binary, model, "--greedy-mel", str(ref_dir / f"{clip}.mel.f32"), "--suppress", suppress, *extra]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
            print(f"PEER_CHECK backend={label} clip={clip} error=exit_{run.returncode}")
            return 1
        fields = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
        ids = [int(x) for x in fields["ids"].split(",") if x]
        # CTranslate2's score: the log-probabilities of the tokens and of the closing
        # end-of-text, summed, over the number of tokens (length_penalty 1).
        logprob = float(fields["sum_logprob_with_eot"].split()[0])
        mean = logprob / max(1, len(ids))
        first_diff = next((i for i, (a, b) in enumerate(zip(ids, ref["ids"])) if a != b),
                          None if len(ids) == len(ref["ids"]) else min(len(ids), len(ref["ids"])))
        same += first_diff is None
        print(f"PEER_CHECK backend={label} clip={clip} ids_identical={str(first_diff is None).lower()} "
              f"tokens={len(ids)} ref_tokens={len(ref['ids'])} first_difference={first_diff} "
              f"mean_logprob={mean:.5f} ref_mean_logprob={ref['mean_logprob']:.5f} extra_args={'_'.join(extra) or '-'}")
    print(f"PEER_CHECK_SUMMARY backend={label} clips={len(doc['clips'])} ids_identical={same} "
          f"extra_args={'_'.join(extra) or '-'}")
    return 0


def whisper_bench(label, log):
    text = pathlib.Path(log).read_text(errors="replace")
    found = {}
    for name in ("encode", "decode", "batchd", "prompt"):
        m = re.search(rf"{name} time =\s*([0-9.]+) ms /\s*(\d+) runs \(\s*([0-9.]+) ms per run\)", text)
        if m:
            found[name] = (float(m.group(3)), int(m.group(2)))
    if "encode" not in found or "decode" not in found:
        print(f"PEER_XCHECK backend={label} tool=whisper-bench error=no_timings")
        return 1
    print(f"PEER_XCHECK backend={label} tool=whisper-bench encode_ms_per_run={found['encode'][0]:.3f} "
          f"encode_runs={found['encode'][1]} decode_ms_per_run={found['decode'][0]:.4f} "
          f"decode_runs={found['decode'][1]} note=one_run_means_positions_0..255")
    return 0


def result(label, path, gpu, err_path=None):
    line = [l for l in pathlib.Path(path).read_text().splitlines() if l.startswith("{")][-1]
    r = json.loads(line)
    gpu_text = gpu.replace(" ", "_") if gpu else "-"
    # Which ggml device whisper.cpp actually ran on, from its own log (stderr).
    device = "unknown"
    if err_path:
        m = re.search(r"whisper_backend_init_gpu: using (\S+) backend", pathlib.Path(err_path).read_text(errors="replace"))
        device = m.group(1) if m else "CPU(no_gpu_backend)"
    print(f"PEER system=whisper.cpp-1.9.1 backend={label} device={device} gpu={gpu_text} "
          f"encoder_ms_per_window={r['encoder_ms_per_window']:.3f} decoder_ms_per_token={r['decoder_ms_per_token']:.4f} "
          f"transcribe_ms={r['transcribe_ms']:.2f} audio_s={r['audio_s']:.2f} rtf={r['real_time_factor']:.5f} "
          f"load_ms={r['load_ms']:.1f} runs={r['runs']} tokens={r['tokens']} flash_attn={str(r['flash_attn']).lower()}")
    print(f"PEER_TEXT backend={label} text={r['text'].strip()}")
    return 0


def sample(src, dst):
    import wave

    import numpy as np
    from faster_whisper.audio import decode_audio

    pcm = decode_audio(str(src), sampling_rate=16000)
    data = np.clip(np.round(pcm * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(str(dst), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(data.tobytes())
    print(f"wrote {dst}: {len(data) / 16000:.2f} s at 16 kHz")


def sha256(path):
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pack(stage, chunk_mib):
    import shutil
    import tarfile

    stage = pathlib.Path(stage)
    files = stage / "files"
    model = files / "ggml-tiny.en.bin"
    capacity = int(float(chunk_mib) * (1 << 20)) - (64 << 10)  # room for the small index files
    for old in stage.glob("chunk-*"):
        shutil.rmtree(old)
    chunks = [stage / "chunk-1"]
    chunks[0].mkdir()

    def reset(info):
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    tar_path = chunks[0] / "build.tar"
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(p for p in files.rglob("*") if p != model and p.name != model.name + ".part"):
            tar.add(path, arcname=str(path.relative_to(stage)), recursive=False, filter=reset)
    room = capacity - tar_path.stat().st_size
    if room <= 0:
        raise SystemExit(f"build.tar alone ({tar_path.stat().st_size} bytes) exceeds a chunk")
    parts = []
    with open(model, "rb") as f:
        while True:
            block = f.read(room)
            if not block:
                break
            name = f"ggml-tiny.en.bin.part-{len(parts):02d}"
            if len(parts) > 0:
                chunks.append(stage / f"chunk-{len(chunks) + 1}")
                chunks[-1].mkdir()
            (chunks[-1] / name).write_bytes(block)
            parts.append(name)
            room = capacity
    (chunks[0] / "MODEL_PARTS").write_text("".join(p + "\n" for p in parts))
    (chunks[0] / "MODEL_SHA256").write_text(sha256(model) + "\n")
    for chunk in chunks:
        entries = sorted(p for p in chunk.iterdir() if p.name != "SHA256SUMS")
        (chunk / "SHA256SUMS").write_text("".join(f"{sha256(p)}  {p.name}\n" for p in entries))
        size = sum(p.stat().st_size for p in chunk.iterdir())
        print(f"{chunk.name}: {size} bytes ({size / (1 << 20):.1f} MiB): {' '.join(p.name for p in entries)}")


def main(argv):
    if len(argv) >= 2 and argv[0] == "reference":
        reference(argv[1], argv[2] if len(argv) > 2 else os.path.expanduser("~/.cache/susurrus/models/whisper-tiny.en-ct2"))
        return 0
    if len(argv) >= 5 and argv[0] == "check":
        return check(argv[1], argv[2], argv[3], argv[4], argv[5:])
    if len(argv) == 3 and argv[0] == "whisper-bench":
        return whisper_bench(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "sample":
        sample(argv[1], argv[2])
        return 0
    if len(argv) == 3 and argv[0] == "pack":
        pack(argv[1], argv[2])
        return 0
    if len(argv) in (3, 4, 5) and argv[0] == "result":
        return result(argv[1], argv[2], argv[3] if len(argv) >= 4 else "", argv[4] if len(argv) == 5 else None)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
