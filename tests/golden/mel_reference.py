"""Writes tests/fixtures/mel_reference.json: reference log-mel frames from faster-whisper's
FeatureExtractor for the deterministic test signal that crates/whisper/src/audio/mel.rs builds
the same way (three sines plus a 32-bit LCG's noise, after a stretch of silence).

Run from the repository root:  "$(./scripts/python_venv.sh)" tests/golden/mel_reference.py
"""

import json
import math
import pathlib

import faster_whisper
import numpy as np
from faster_whisper.feature_extractor import FeatureExtractor

SAMPLE_RATE = 16000
OUT = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "mel_reference.json"

# (mel bands, samples, leading silent samples, frames written: first and last)
CASES = [
    (80, 16037, 800, 12, 4),
    (128, 16037, 800, 12, 4),
    # Shorter than the reflect padding (200): numpy reflects back and forth.
    (80, 180, 0, 1, 0),
]


def test_signal(n, silent):
    """Samples computed in float64 and rounded to float32, as the Rust test does."""
    state = 12345
    out = np.zeros(n, dtype=np.float32)
    tau = 2.0 * math.pi
    for i in range(n):
        state = (state * 1664525 + 1013904223) % (1 << 32)
        if i < silent:
            continue
        t = i / SAMPLE_RATE
        noise = ((state >> 8) / (1 << 24) - 0.5) * 0.05
        out[i] = (
            0.4 * math.sin(tau * 440.0 * t)
            + 0.25 * math.sin(tau * 1000.0 * t + 0.5)
            + 0.1 * math.sin(tau * 3125.5 * t)
            + noise
        )
    return out


def main():
    cases = []
    for n_mels, n, silent, first, last in CASES:
        # padding=0: the plain spectrogram of the given samples (faster-whisper's transcribe
        # appends one hop of zeros before calling it; that is the caller's choice).
        mel = FeatureExtractor(feature_size=n_mels)(test_signal(n, silent), padding=0)
        frames = mel.shape[1]
        indices = sorted(set(range(min(first, frames))) | set(range(frames - last, frames)))
        cases.append(
            {
                "n_mels": n_mels,
                "n_samples": n,
                "silent": silent,
                "frames": frames,
                "frame_indices": indices,
                "values": [[round(float(v), 7) for v in mel[:, f]] for f in indices],
            }
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    header = {"generator": "tests/golden/mel_reference.py", "faster_whisper": faster_whisper.__version__}
    with OUT.open("w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps({**header, **case}, separators=(",", ":")) for case in cases))
        f.write("\n]\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
