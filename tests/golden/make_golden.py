"""Writes tests/fixtures/golden/: the project's own test speech (made with espeak-ng) and what
faster-whisper 1.2.1 / CTranslate2 make of it with real Whisper models, so the Rust runtime can
be compared against a reference it did not take from anyone else's recordings.

Two sets, each made with its own model (`--set`): `tiny.en` (English-only, the folder itself)
and `base` (multilingual, `base/`: German, Spanish, French, Japanese and English speech, each
transcribed with its language given, with the language detected, and translated to English).

Per clip `<clip>.wav` (16 kHz mono 16-bit PCM) and `<clip>.json` (the runs: options, info,
segments, full text and every CTranslate2 `generate` call with its prompt and result). For
`short_1` also the first window's log-mel (`short_1.mel.f32`) and encoder output
(`short_1.encoder.f32`), raw little-endian float32 described in `short_1.json`.

tiny.en's `vad` clip is for voice-activity detection (faster-whisper's `vad_filter=True`,
Silero VAD v6): about 68 s, two voices in three passages between 11-12 s pauses of quiet
seeded noise with short non-speech bursts (a thud, clicks, a hiss), after a 2.5 s noise-only
lead-in. Its runs are `default` (no VAD) and `vad`, `vad_beam_5`, `vad_word_timestamps` (VAD
filter on, default VadOptions; their `info` adds `vad_options`, and `duration_after_vad` is the
audio the model saw). `vad.json` also has `audio.layout` (where passages and bursts lie, in
samples) and `vad`: `window_samples` (512), `padded_samples`, `options` (VadOptions' fields;
null for an unlimited max_speech_duration_s and an unset neg_threshold), `probabilities` (the
Silero network's speech probability per 512-sample window of the decoded audio zero-padded as
`get_speech_timestamps` pads it, float32 values) and `speech_timestamps` (its {start, end}
sample ranges, the stretches the VAD runs transcribe).
tiny.en's runs end with faster-whisper's decoding guards, greedy like the rest (GUARD_RUNS):
`suppress_tokens` and `repetition_penalty` on `short_1`, `prefix` on `short_2`, `hotwords` on
`short_3`, `no_repeat_ngram_size` on `long` and `hallucination_silence_threshold` (with word
timestamps, no VAD filter) on `vad` and (without the no-speech skip, where it changes the
result) on `silence`.
`manifest.json` lists the clips and versions; `timing.json` holds the reference's CPU wall
times, the one file that differs between runs (everything else is byte-identical).

Run from the repository root through tests/golden/make_golden.sh, which provides espeak-ng,
the venv (scripts/python_venv.sh) and the models (scripts/models/fetch_model.sh).
"""

import argparse
import dataclasses
import hashlib
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import wave

import ctranslate2
import faster_whisper
import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio, pad_or_trim
from faster_whisper.vad import VadOptions, get_speech_timestamps, get_vad_model

SAMPLE_RATE = 16000
ESPEAK_RATE = 22050
PEAK_DBFS = -3.0
CPU_THREADS = 2
TIMING_REPETITIONS = 3
OUT = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "golden"

LONG_TEXT = (
    "Every spring, the people of our small town gather at the old community garden behind "
    "the library. The soil there is dark and rich, and the beds are shared by families, "
    "students, and a few retired teachers who know more about tomatoes than anyone else. "
    "On the first weekend, volunteers clear away the dead leaves, repair the wooden fences, "
    "and check the water barrels for leaks. Children carry buckets of compost while their "
    "parents argue kindly about where the beans should go. "
    "By early summer the garden becomes a quiet place of routine. Someone waters the lettuce "
    "before breakfast, and someone else pulls weeds in the late afternoon when the shade "
    "reaches the path. Bees move slowly between the squash flowers, and a family of sparrows "
    "lives in the hedge near the gate. The librarian often brings her lunch outside and reads "
    "on the bench beside the herbs, where the air smells of mint and basil. "
    "Not everything goes well, of course. Some years the rain arrives too late, and the "
    "carrots stay thin and bitter. Other years a storm knocks over the sunflowers, or rabbits "
    "find a gap under the fence and eat the young peas overnight. Each problem is discussed "
    "at a long table in the library basement, usually with tea and biscuits. The solutions "
    "are rarely clever, but they are always shared. "
    "In autumn the harvest is divided fairly. Baskets of potatoes, onions and pumpkins are "
    "set out by the entrance, and anyone who helped may take what they need. Whatever "
    "remains is carried to the kitchen at the shelter across the river. Then the beds are "
    "covered with straw, the tools are cleaned and hung on their hooks, and the garden rests "
    "under the grey winter sky, waiting for the town to return. "
    "Last year a young student drew a map of every bed and painted it on a board beside the "
    "gate. Now visitors can see who grows the beans, where the roses climb, and which corner "
    "belongs to the bees. Nobody expected the map to matter very much, yet people stop to "
    "read it almost every day."
)

# name -> how it is made. voice/speed/pitch are espeak-ng's -v/-s/-p; noise_snr_db mixes
# seeded white noise at that signal-to-noise ratio; seconds makes digital silence instead.
CLIPS = {
    "short_1": {
        "text": "The morning train was late again, so Clara bought a warm pastry and read "
        "her book on the platform.",
        "voice": "en-gb-x-rp",
        "speed": 140,
        "pitch": 50,
    },
    "short_2": {
        "text": "Please close the garden gate before the goats wander out into the open field.",
        "voice": "en-us+m3",
        "speed": 145,
        "pitch": 50,
    },
    "short_3": {
        "text": "Bright lanterns hung above the harbor while the fishermen repaired their nets "
        "and sang quiet songs about the sea.",
        "voice": "en-us+f3",
        "speed": 140,
        "pitch": 50,
    },
    "long": {"text": LONG_TEXT, "voice": "en-us", "speed": 145, "pitch": 50},
    "noisy": {
        "text": "A cold wind carried the smell of pine trees across the quiet valley.",
        "voice": "en-us+m3",
        "speed": 140,
        "pitch": 50,
        "noise_snr_db": 10.0,
        "noise_seed": 20240611,
    },
    "silence": {"seconds": 8.0},
    # For voice-activity detection: two voices in three passages, between them long pauses of
    # quiet noise with short non-speech bursts, after a noise-only lead-in (see make_vad_audio).
    "vad": {
        "passages": [
            {
                "text": "Good evening, and welcome to the river museum. Tonight we will walk "
                "through several rooms, and the first one is full of old fishing boats. Please "
                "stay together and keep your tickets ready.",
                "voice": "en-us",
                "speed": 135,
                "pitch": 50,
            },
            {
                "text": "Thank you for coming. The second room shows how the old bridge was "
                "built, stone by stone, over nine long winters. If you look closely, you can "
                "still see the marks left by the masons.",
                "voice": "en-gb-x-rp+f3",
                "speed": 140,
                "pitch": 50,
            },
            {
                "text": "That brings us to the end of our tour. The cafe on the ground floor "
                "is open until eight, and the shop sells maps and postcards. Thank you, and "
                "have a safe journey home.",
                "voice": "en-us",
                "speed": 135,
                "pitch": 50,
            },
        ],
        "lead_in_seconds": 2.5,
        "gap_seconds": [12.0, 11.0],
        "tail_seconds": 2.0,
        # Levels in dB relative to the passages' common peak, before the clip is normalised.
        "noise_db": -55.0,
        "bursts": [
            {"kind": "thud", "gap": 0, "at_seconds": 3.0, "seconds": 0.4, "peak_db": -10.0},
            {"kind": "clicks", "gap": 0, "at_seconds": 8.0, "seconds": 0.6, "peak_db": -12.0},
            {"kind": "hiss", "gap": 1, "at_seconds": 5.0, "seconds": 0.5, "peak_db": -18.0},
        ],
        "noise_seed": 20250317,
    },
}

# The runs besides "default" (faster-whisper's defaults), keyed by clip.
EXTRA_RUNS = {
    "short_1": [("without_timestamps", {"without_timestamps": True})],
    "short_2": [("initial_prompt", {"initial_prompt": "A farmer gives directions to a visitor."})],
    # Two stretches, each starting where a sentence does.
    "long": [("clip_timestamps", {"clip_timestamps": "6.72,26,32.64,44.4"})],
}
BASE_OPTIONS = {"beam_size": 1, "language": "en", "vad_filter": False}
# Every clip also runs with faster-whisper's default beam search, and with word timestamps.
BEAM_RUN = ("beam_5", {"beam_size": 5})
WORDS_RUN = ("word_timestamps", {"word_timestamps": True})
MEL_CLIP = "short_1"
# The VAD clip's runs instead: the set's default, then with faster-whisper's Silero VAD filter
# (default VadOptions), greedy, with its default beam search and with word timestamps.
VAD_CLIP = "vad"
VAD_RUNS = [
    ("default", {}),
    ("vad", {"vad_filter": True}),
    ("vad_beam_5", {"vad_filter": True, "beam_size": 5}),
    ("vad_word_timestamps", {"vad_filter": True, "word_timestamps": True}),
]


# faster-whisper's decoding guards and steering options, greedy, after each clip's other runs
# (they were added to the committed files alone, the earlier runs left byte for byte). Each
# changes its clip's transcript but two: prefix (the first words of the clip: the same tokens
# as the default, the prompt differs) and hallucination_silence_threshold on the VAD clip (no
# VAD filter), which needs word timestamps and finds no anomalous segment to skip, so it gives
# what word_timestamps=True alone gives (which itself differs from the default: the next
# window starts at the last word's end). suppress_tokens adds " train" (4512) and " platform"
# (3859) to -1 (the default non-speech symbols); no_repeat_ngram_size leaves short_1 as it is,
# so it runs on the long clip.
GUARD_RUNS = {
    "short_1": [
        ("suppress_tokens", {"suppress_tokens": [-1, 4512, 3859]}),
        ("repetition_penalty", {"repetition_penalty": 1.5}),
    ],
    "short_2": [("prefix", {"prefix": "Please close the"})],
    "short_3": [("hotwords", {"hotwords": "lanterns harbour fishermen"})],
    "long": [("no_repeat_ngram_size", {"no_repeat_ngram_size": 2})],
    VAD_CLIP: [
        ("hallucination_silence_threshold",
         {"word_timestamps": True, "hallucination_silence_threshold": 2.0}),
    ],
    # Without the no-speech skip, Whisper invents text over silence; the guard moves past the
    # silence before it (this run's segments differ from the same run without the guard).
    "silence": [
        ("hallucination_silence_threshold",
         {"word_timestamps": True, "no_speech_threshold": None, "temperature": 0.0,
          "hallucination_silence_threshold": 1.0}),
    ],
}


def tiny_en_runs(clip):
    if clip == VAD_CLIP:
        runs = VAD_RUNS
    else:
        runs = [("default", {})] + EXTRA_RUNS.get(clip, []) + [BEAM_RUN, WORDS_RUN]
    return runs + GUARD_RUNS.get(clip, [])

# The multilingual set: one sentence per language, spoken by espeak-ng's voice for it (voices
# and speeds chosen so that the base model understands them). The reference decodes at
# temperature 0 only: espeak-ng's speech is unusual enough that the default fallback would
# sample at higher temperatures, which no other implementation can reproduce token for token.
MULTILINGUAL_CLIPS = {
    "de": {
        "text": "Guten Morgen. Ich möchte gerne einen Kaffee und ein Stück Kuchen bestellen.",
        "voice": "de+m3",
        "speed": 130,
        "pitch": 50,
    },
    "es": {
        "text": "Buenos días. Hoy vamos a la playa con nuestros amigos.",
        "voice": "es",
        "speed": 125,
        "pitch": 50,
    },
    "fr": {
        "text": "Bonjour madame. Je voudrais un café, s'il vous plaît.",
        "voice": "fr-fr+m3",
        "speed": 110,
        "pitch": 50,
    },
    "ja": {
        "text": "おはよう ございます。 ありがとう ございます。",
        "voice": "ja+f3",
        "speed": 110,
        "pitch": 50,
    },
    "en": {
        "text": "The library opens at nine, and the reading hour for children starts soon after.",
        "voice": "en-us",
        "speed": 140,
        "pitch": 50,
    },
}
MULTILINGUAL_OPTIONS = {"beam_size": 1, "vad_filter": False, "temperature": 0.0}


def multilingual_runs(clip):
    """The language given, the language detected, (but for English) translated, and the
    language given with faster-whisper's default beam search."""
    runs = [("language", {"language": clip}), ("detect", {"language": None})]
    if clip != "en":
        runs.append(("translate", {"language": clip, "task": "translate"}))
    runs.append(("beam_5", {"language": clip, "beam_size": 5}))
    runs.append(("word_timestamps", {"language": clip, "word_timestamps": True}))
    return runs


# What each set is made of: its clips, its runs per clip, the model's description and where
# the files go (below --out).
SETS = {
    "tiny.en": {
        "name": "whisper-tiny.en (CTranslate2, float16 weights, run as float32)",
        "clips": CLIPS,
        "options": BASE_OPTIONS,
        "runs": tiny_en_runs,
        "mel_clip": MEL_CLIP,
        "folder": ".",
    },
    "base": {
        "name": "whisper-base, multilingual (CTranslate2, float16 weights, run as float32)",
        "clips": MULTILINGUAL_CLIPS,
        "options": MULTILINGUAL_OPTIONS,
        "runs": multilingual_runs,
        "mel_clip": None,
        "folder": "base",
    },
}


def espeak_versions(espeak):
    """The espeak-ng program version and, where dpkg knows it, the Debian package version."""
    line = subprocess.run([espeak, "--version"], check=True, capture_output=True, text=True).stdout
    # "eSpeak NG text-to-speech: 1.51  Data at: /usr/lib/..." -> "1.51"
    version = line.split(":", 1)[1].split()[0]
    try:
        package = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "espeak-ng"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        package = None
    return {"espeak_ng": version, "espeak_ng_package": package}


def speak(espeak, spec):
    """espeak-ng's 22050 Hz mono 16-bit output for one clip, as float64 in [-1, 1)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "speech.wav")
        subprocess.run(
            [espeak, "-v", spec["voice"], "-s", str(spec["speed"]), "-p", str(spec["pitch"]),
             "-w", path, spec["text"]],
            check=True,
        )
        with wave.open(path, "rb") as w:
            if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (ESPEAK_RATE, 1, 2):
                raise SystemExit(f"espeak-ng wrote an unexpected format to {path}")
            data = w.readframes(w.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.float64) / 32768.0


def resample(x, rate_in, rate_out, half_width=64, cutoff=7600.0, beta=9.0):
    """Band-limited resampling by a Kaiser-windowed sinc evaluated at the exact rational
    positions n * rate_in / rate_out (integer arithmetic, so it is reproducible anywhere).
    cutoff sits below the output Nyquist (8 kHz) so the ~1 kHz transition band stays inside
    it; half_width input samples each side give about 90 dB of stopband rejection."""
    g = math.gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g
    n_out = (len(x) * up) // down
    n = np.arange(n_out, dtype=np.int64)
    base = (n * down) // up
    phase = (n * down) % up
    # One row of taps per fractional position phase / up; offsets j run -half_width+1..half_width.
    offsets = np.arange(-half_width + 1, half_width + 1)
    tau = offsets[None, :] - (np.arange(up) / up)[:, None]
    scale = cutoff / (rate_in / 2)
    window = np.i0(beta * np.sqrt(np.clip(1.0 - (tau / half_width) ** 2, 0.0, None))) / np.i0(beta)
    taps = scale * np.sinc(scale * tau) * window
    padded = np.concatenate([np.zeros(half_width), x, np.zeros(half_width + 1)])
    y = np.zeros(n_out)
    for column, j in enumerate(offsets):
        y += taps[phase, column] * padded[base + j + half_width]
    return y


def to_pcm16(x):
    """Peak-normalised to PEAK_DBFS and rounded to 16-bit samples."""
    peak = np.max(np.abs(x))
    if peak > 0:
        x = x * (10.0 ** (PEAK_DBFS / 20.0) / peak)
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype("<i2")


def make_audio(espeak, spec):
    """The clip's 16-bit samples and, for the VAD clip, its layout (else None)."""
    if "passages" in spec:
        return make_vad_audio(espeak, spec)
    return make_plain_audio(espeak, spec), None


def make_plain_audio(espeak, spec):
    if "seconds" in spec:
        return np.zeros(round(spec["seconds"] * SAMPLE_RATE), dtype="<i2")
    speech = resample(speak(espeak, spec), ESPEAK_RATE, SAMPLE_RATE)
    if "noise_snr_db" in spec:
        # RandomState: numpy's frozen legacy stream, the same numbers in every numpy version.
        noise = np.random.RandomState(spec["noise_seed"]).standard_normal(len(speech))
        speech_power = np.mean(speech**2)
        noise *= math.sqrt(speech_power / 10.0 ** (spec["noise_snr_db"] / 10.0))
        speech = speech + noise
    return to_pcm16(speech)


def burst(kind, n, rng):
    """A short non-speech noise of n samples, peak 1: "thud" white noise through a resonator at
    150 Hz (30 Hz wide) under a fast decay, "clicks" six 4 ms ticks of decaying white noise
    spread over n, "hiss" first-differenced (high-passed) white noise under a Hann window.
    Envelopes and the filter run in Python floats, so the numbers are the same everywhere."""
    noise = rng.standard_normal(n)
    if kind == "thud":
        r = math.exp(-math.pi * 30.0 / SAMPLE_RATE)
        a1, a2 = 2.0 * r * math.cos(2.0 * math.pi * 150.0 / SAMPLE_RATE), -r * r
        y, y1, y2 = [], 0.0, 0.0
        for i, v in enumerate(noise.tolist()):
            y0 = v + a1 * y1 + a2 * y2
            y.append(y0 * min(1.0, i / 80.0) * math.exp(-i / (0.08 * SAMPLE_RATE)))
            y1, y2 = y0, y1
        out = np.array(y)
    elif kind == "clicks":
        tick = round(0.004 * SAMPLE_RATE)
        envelope = np.array([math.exp(-i / 16.0) for i in range(tick)])
        out = np.zeros(n)
        for k in range(6):
            start = k * (n - tick) // 5
            out[start : start + tick] = noise[start : start + tick] * envelope
    elif kind == "hiss":
        hann = np.array([0.5 - 0.5 * math.cos(2.0 * math.pi * i / (n - 1)) for i in range(n)])
        out = np.concatenate([[0.0], np.diff(noise)]) * hann
    else:
        raise ValueError(kind)
    return out / np.max(np.abs(out))


def make_vad_audio(espeak, spec):
    """The VAD clip: each passage peak-normalised to 1, laid out after a lead-in and between
    the gaps, on a floor of seeded white noise (noise_db RMS) with each burst added into its
    gap at_seconds after the gap's start; then normalised as every clip is. Also returns
    where the passages and bursts lie (samples)."""
    passages = []
    for passage in spec["passages"]:
        speech = resample(speak(espeak, passage), ESPEAK_RATE, SAMPLE_RATE)
        passages.append(speech / np.max(np.abs(speech)))
    gaps = [round(seconds * SAMPLE_RATE) for seconds in spec["gap_seconds"]]
    lead_in = round(spec["lead_in_seconds"] * SAMPLE_RATE)
    total = lead_in + sum(map(len, passages)) + sum(gaps) + round(spec["tail_seconds"] * SAMPLE_RATE)
    # RandomState: numpy's frozen legacy stream; the floor first, then the bursts in order.
    rng = np.random.RandomState(spec["noise_seed"])
    signal = rng.standard_normal(total) * 10.0 ** (spec["noise_db"] / 20.0)
    layout = {"passages": [], "bursts": []}
    gap_starts = []
    at = lead_in
    for index, speech in enumerate(passages):
        signal[at : at + len(speech)] += speech
        layout["passages"].append(
            {"voice": spec["passages"][index]["voice"], "start": at, "end": at + len(speech)})
        at += len(speech)
        if index < len(gaps):
            gap_starts.append(at)
            at += gaps[index]
    for b in spec["bursts"]:
        n = round(b["seconds"] * SAMPLE_RATE)
        start = gap_starts[b["gap"]] + round(b["at_seconds"] * SAMPLE_RATE)
        if start + n > gap_starts[b["gap"]] + gaps[b["gap"]]:
            raise SystemExit(f"burst {b} does not fit its gap")
        signal[start : start + n] += burst(b["kind"], n, rng) * 10.0 ** (b["peak_db"] / 20.0)
        layout["bursts"].append({"kind": b["kind"], "start": start, "end": start + n})
    return to_pcm16(signal), layout


def write_wav(path, pcm):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())


def jsonable(value):
    """kwargs of generate() as JSON: StorageViews (the encoder output) by shape and dtype,
    tuples as lists, everything else as it is."""
    if isinstance(value, ctranslate2.StorageView):
        return {"storage_view": {"shape": list(value.shape), "dtype": str(value.dtype).split(".")[-1]}}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def caller_locals(function):
    """Locals of the nearest caller frame running `function` (faster-whisper's own loop)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != function:
        frame = frame.f_back
    if frame is None:
        raise RuntimeError(f"generate() was not called from faster-whisper's {function}()")
    return frame.f_locals


class RecordingWhisper:
    """Stands in for WhisperModel.model (a ctranslate2.models.Whisper): forwards everything and
    records each encode input and generate call. The seek of the window and the fallback
    temperature are read from faster-whisper's calling frames, which hold them as locals."""

    def __init__(self, inner):
        self._inner = inner
        self.calls = []
        self.encoder_inputs = []
        self.encoder_outputs = []
        self.keep_encoder_io = False
        self.window = -1

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def encode(self, features, *args, **kwargs):
        output = self._inner.encode(features, *args, **kwargs)
        if self.keep_encoder_io:
            self.encoder_inputs.append(np.array(features))
            self.encoder_outputs.append(np.array(output))
        self.window += 1
        return output

    def generate(self, encoder_output, prompts, **kwargs):
        results = self._inner.generate(encoder_output, prompts, **kwargs)
        segments = caller_locals("generate_segments")
        fallback = caller_locals("generate_with_fallback")
        result = results[0]
        self.calls.append(
            {
                "window": self.window,
                "seek": int(segments["seek"]),
                "segment_size": int(segments["segment_size"]),
                "temperature": fallback["temperature"],
                "encoder_output": jsonable(encoder_output),
                "prompt": list(prompts[0]),
                "kwargs": jsonable(kwargs),
                "sequences_ids": list(result.sequences_ids[0]),
                "score": result.scores[0],
                "no_speech_prob": result.no_speech_prob,
                "num_hypotheses": len(result.sequences_ids),
            }
        )
        return results

    def reset(self):
        self.calls = []
        self.window = -1


def transcribe(model, recorder, wav, options):
    recorder.reset()
    segments, info = model.transcribe(str(wav), **options)
    segments = list(segments)
    return segments, info, recorder.calls


def run_record(name, options, segments, info, calls):
    resolved = {
        k: jsonable(v) for k, v in vars(info.transcription_options).items()
    }
    return {
        "name": name,
        "options": options,
        "transcription_options": resolved,
        "info": {
            "language": info.language,
            "language_probability": info.language_probability,
            "duration": info.duration,
            "duration_after_vad": info.duration_after_vad,
            **({"vad_options": vad_options_json(info.vad_options)}
               if info.vad_options is not None else {}),
        },
        "text": "".join(s.text for s in segments),
        "segments": [
            {
                "id": s.id,
                "seek": s.seek,
                "start": s.start,
                "end": s.end,
                "text": s.text,
                "tokens": list(s.tokens),
                "avg_logprob": s.avg_logprob,
                "compression_ratio": s.compression_ratio,
                "no_speech_prob": s.no_speech_prob,
                "temperature": s.temperature,
                **({"words": [
                    {"start": w.start, "end": w.end, "word": w.word, "probability": w.probability}
                    for w in s.words
                ]} if s.words is not None else {}),
            }
            for s in segments
        ],
        "generate_calls": calls,
    }


def vad_options_json(options):
    """VadOptions' fields; JSON has no infinity, so an unlimited max_speech_duration_s is null
    (as is neg_threshold when unset: faster-whisper then uses max(threshold - 0.15, 0.01))."""
    return {k: None if isinstance(v, float) and math.isinf(v) else v
            for k, v in dataclasses.asdict(options).items()}


def vad_reference(wav, runs):
    """faster-whisper's Silero VAD (v6) on the clip as transcribe(vad_filter=True) sees it: the
    decoded audio zero-padded to whole 512-sample windows (np.pad(audio, (0, 512 - len % 512)),
    so a full extra window when len is a multiple), one speech probability per window, and the
    speech stretches (samples) get_speech_timestamps keeps with the default VadOptions."""
    audio = decode_audio(str(wav), sampling_rate=SAMPLE_RATE)
    window = 512
    padded = np.pad(audio, (0, window - audio.shape[0] % window))
    probabilities = np.asarray(get_vad_model()(padded), dtype=np.float32).reshape(-1)
    options = VadOptions()
    timestamps = [{"start": int(t["start"]), "end": int(t["end"])}
                  for t in get_speech_timestamps(audio, options)]
    kept = sum(t["end"] - t["start"] for t in timestamps) / SAMPLE_RATE
    for run in runs:
        if run["options"].get("vad_filter") and run["info"]["duration_after_vad"] != kept:
            raise SystemExit(f"run {run['name']} kept {run['info']['duration_after_vad']} s "
                             f"of audio, the speech timestamps {kept} s")
    return {
        "window_samples": window,
        "padded_samples": len(padded),
        "options": vad_options_json(options),
        "probabilities": [float(p) for p in probabilities],
        "speech_timestamps": timestamps,
    }


def first_window_mel(model, wav):
    """The log-mel of the first 30 s window exactly as transcribe() builds it: decode the file,
    features with the default one-hop zero padding, drop the last frame (content_frames), take
    at most 3000 frames and zero-pad (pad_or_trim) to 3000."""
    features = model.feature_extractor(decode_audio(str(wav), sampling_rate=SAMPLE_RATE))
    content_frames = features.shape[-1] - 1
    window = features[:, : min(model.feature_extractor.nb_max_frames, content_frames)]
    return np.ascontiguousarray(pad_or_trim(window), dtype=np.float32), content_frames


def write_f32(path, array):
    data = np.ascontiguousarray(array, dtype="<f4").tobytes()
    path.write_bytes(data)
    return {
        "file": path.name,
        "shape": list(array.shape),
        "dtype": "f32le",
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def mel_and_encoder(model, model_dir, wav, recorder, out):
    mel, content_frames = first_window_mel(model, wav)
    if not np.array_equal(mel[None], recorder.encoder_inputs[0]):
        raise SystemExit("the recomputed first-window mel differs from what transcribe() encoded")
    encoder = ctranslate2.models.Whisper(model_dir, device="cpu", compute_type="float32")
    output = np.array(encoder.encode(ctranslate2.StorageView.from_array(mel[None])))
    in_transcribe = recorder.encoder_outputs[0]
    mel_entry = write_f32(out / f"{wav.stem}.mel.f32", mel)
    mel_entry["content_frames"] = content_frames
    encoder_entry = write_f32(out / f"{wav.stem}.encoder.f32", output)
    # The standalone encoder and the one inside transcribe() (cpu_threads=2) may split the
    # work differently; the fixture records how far apart they are.
    encoder_entry["max_abs_diff_vs_transcribe"] = float(np.max(np.abs(output - in_transcribe)))
    return {"mel": mel_entry, "encoder_output": encoder_entry}


def time_default_run(model, wav, options, repetitions):
    """Median wall and process-CPU seconds of transcribe() plus consuming its segments. The
    CPU time (all threads) is the steadier figure on a shared machine; the load average says
    how shared it was."""
    walls, cpus = [], []
    load = os.getloadavg()[0]
    for _ in range(repetitions):
        wall, cpu = time.perf_counter(), time.process_time()
        segments, _ = model.transcribe(str(wav), **options)
        list(segments)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    duration = decode_audio(str(wav), sampling_rate=SAMPLE_RATE).shape[0] / SAMPLE_RATE
    return {
        "audio_seconds": duration,
        "median_wall_seconds": round(statistics.median(walls), 4),
        "wall_seconds": [round(t, 4) for t in walls],
        "median_cpu_seconds": round(statistics.median(cpus), 4),
        "cpu_seconds": [round(t, 4) for t in cpus],
        "real_time_factor": round(statistics.median(walls) / duration, 5),
        "load_average_1min_before": round(load, 2),
    }


def dump(path, value):
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), default="tiny.en", dest="set_name",
                        help="which fixtures to make (each with its own model)")
    parser.add_argument("--model", required=True, help="the set's CTranslate2 Whisper folder")
    parser.add_argument("--espeak", default="espeak-ng")
    parser.add_argument("--out", type=pathlib.Path, default=OUT,
                        help="the fixtures folder (the base set goes into its base/)")
    parser.add_argument(
        "--timing-repetitions",
        type=int,
        default=TIMING_REPETITIONS,
        help="warm repetitions timed per clip; 0 skips timing and leaves timing.json alone",
    )
    args = parser.parse_args()
    fixture_set = SETS[args.set_name]
    out = args.out / fixture_set["folder"]
    out.mkdir(parents=True, exist_ok=True)

    versions = {
        "faster_whisper": faster_whisper.__version__,
        "ctranslate2": ctranslate2.__version__,
        "numpy": np.__version__,
        **espeak_versions(args.espeak),
    }
    model_bin = pathlib.Path(args.model) / "model.bin"
    model_info = {
        "name": fixture_set["name"],
        "model_bin_sha256": hashlib.sha256(model_bin.read_bytes()).hexdigest(),
        "load": {"device": "cpu", "compute_type": "float32", "cpu_threads": CPU_THREADS},
    }
    model = WhisperModel(args.model, device="cpu", compute_type="float32", cpu_threads=CPU_THREADS)
    recorder = RecordingWhisper(model.model)
    model.model = recorder

    timings = {}
    mel_clip = fixture_set["mel_clip"]
    base_options = fixture_set["options"]
    for clip, spec in fixture_set["clips"].items():
        pcm, layout = make_audio(args.espeak, spec)
        wav = out / f"{clip}.wav"
        write_wav(wav, pcm)
        records = []
        for index, (name, extra) in enumerate(fixture_set["runs"](clip)):
            options = {**base_options, **extra}
            recorder.keep_encoder_io = clip == mel_clip and index == 0
            segments, info, calls = transcribe(model, recorder, wav, options)
            records.append(run_record(name, options, segments, info, calls))
            fallback = sorted({s.temperature for s in segments if s.temperature != 0.0})
            print(f"{clip}/{name}: {len(segments)} segments, {len(calls)} generate calls"
                  + (f", FALLBACK temperatures {fallback}" if fallback else ""))
            print("   " + records[-1]["text"])
        recorder.keep_encoder_io = False
        document = {
            "generator": "tests/golden/make_golden.py",
            "clip": clip,
            "versions": versions,
            "model": model_info,
            "audio": {
                "file": wav.name,
                "sample_rate": SAMPLE_RATE,
                "samples": len(pcm),
                "duration": len(pcm) / SAMPLE_RATE,
                "sha256": hashlib.sha256(wav.read_bytes()).hexdigest(),
                "source": {**spec, "peak_dbfs": PEAK_DBFS if "seconds" not in spec else None},
                **({"layout": layout} if layout is not None else {}),
            },
            "runs": records,
        }
        if clip == VAD_CLIP:
            document["vad"] = vad_reference(wav, records)
        if clip == mel_clip:
            document.update(mel_and_encoder(model, args.model, wav, recorder, out))
        dump(out / f"{clip}.json", document)
        if args.timing_repetitions <= 0:
            continue
        first_run = {**base_options, **fixture_set["runs"](clip)[0][1]}
        timings[clip] = time_default_run(model, wav, first_run, args.timing_repetitions)
        print(f"   default run: median wall {timings[clip]['median_wall_seconds']} s, "
              f"CPU {timings[clip]['median_cpu_seconds']} s")

    dump(out / "manifest.json", {
        "generator": "tests/golden/make_golden.py",
        "versions": versions,
        "model": model_info,
        "clips": [f"{clip}.json" for clip in fixture_set["clips"]],
    })
    if timings:
        write_timing(out, timings, args.timing_repetitions, versions, base_options)
    print(f"wrote {out}")


def write_timing(out, timings, repetitions, versions, options):
    dump(out / "timing.json", {
        "generator": "tests/golden/make_golden.py",
        "what": "wall and process-CPU time of transcribe() plus consuming its segments, "
        f"first run of each clip, median of {repetitions} warm repetitions (the reference runs before warm the model)",
        "options": options,
        "cpu_threads": CPU_THREADS,
        "machine": {"processor": cpu_name(), "logical_cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "versions": versions,
        "clips": timings,
    })


def cpu_name():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


if __name__ == "__main__":
    main()
