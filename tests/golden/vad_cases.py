"""Writes tests/fixtures/golden/vad_cases.json: faster-whisper 1.2.1's `get_speech_timestamps`
on made-up speech probabilities (its network replaced by a function returning them), over
options that reach every branch: speech split at a pause or hard at `max_speech_duration_s`,
short speech dropped, pauses shorter than the padding shared, probabilities exactly at the
thresholds, speech running to the end. The Rust port in crates/whisper/src/vad/speech.rs is
checked against these.

Run with the reference generators' Python (scripts/python_venv.sh):
  python tests/golden/vad_cases.py
"""

import json
import pathlib

import numpy as np
from faster_whisper import vad

OUT = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "golden" / "vad_cases.json"
WINDOW = 512


def probabilities(rng, windows):
    """Stretches of speech-like and silence-like probabilities, some exactly at 0.5 and at
    the float32 value of 0.35, the default thresholds."""
    out = []
    speaking = bool(rng.integers(2))
    while len(out) < windows:
        length = int(rng.integers(1, 80))
        if speaking:
            values = rng.uniform(0.4, 1.0, length)
        else:
            values = rng.uniform(0.0, 0.45, length)
        exact = rng.random(length) < 0.05
        values[exact] = rng.choice([0.5, np.float32(0.35), 0.2], exact.sum())
        out.extend(values.tolist())
        speaking = not speaking
    return np.array(out[:windows], dtype=np.float32)


def main():
    rng = np.random.default_rng(20261127)
    option_sets = [
        {},
        {"min_silence_duration_ms": 100},
        {"min_silence_duration_ms": 300, "speech_pad_ms": 30},
        {"min_speech_duration_ms": 250, "min_silence_duration_ms": 200},
        {"max_speech_duration_s": 1.5, "min_silence_duration_ms": 500},
        {"max_speech_duration_s": 3.0, "min_silence_duration_ms": 2000, "speech_pad_ms": 100},
        {"threshold": 0.3, "neg_threshold": 0.25, "min_silence_duration_ms": 150},
        {"threshold": 0.7, "min_silence_duration_ms": 0, "speech_pad_ms": 0},
    ]
    cases = []
    for i in range(24):
        options = option_sets[i % len(option_sets)]
        windows = int(rng.integers(40, 600))
        probs = probabilities(rng, windows)
        # The audio's length: within the last window, as a recording's is.
        samples = (windows - 1) * WINDOW + int(rng.integers(0, WINDOW))
        vad.get_vad_model = lambda probs=probs: (lambda audio: probs)
        chunks = vad.get_speech_timestamps(np.zeros(samples, dtype=np.float32), vad.VadOptions(**options))
        cases.append({
            "options": options,
            "samples": samples,
            "probabilities": [float(p) for p in probs],
            "speech_timestamps": [{"start": int(c["start"]), "end": int(c["end"])} for c in chunks],
        })
    OUT.write_text(json.dumps({"generator": "tests/golden/vad_cases.py", "cases": cases}) + "\n")


if __name__ == "__main__":
    main()
