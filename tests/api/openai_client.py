"""OpenAI's Python client library pointed at `susurrus serve --api`, as a user of the
transcription API points it: crates/cli/tests/serve_api.rs starts the server and runs this
with the venv `./scripts/setup.sh api` makes.

    openai_client.py URL KEY check         every route and answer format once, and the errors
    openai_client.py URL KEY load CLIENTS  CLIENTS concurrent clients, each its own clip

The expected texts are faster-whisper's (the golden fixtures' `beam_5` runs: the API decodes
with faster-whisper's defaults). Prints what it checked; exits non-zero with the reason on the
first failure.
"""

import asyncio
import json
import pathlib
import sys
import time

import openai

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "golden"
AUDIO = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "audio"
CLIPS = ["short_1", "short_2", "short_3", "noisy"]


def reference(clip):
    record = json.loads((GOLDEN / f"{clip}.json").read_text())
    run = next(r for r in record["runs"] if r["name"] == "beam_5")
    return run["text"].strip(), record["audio"]["duration"]


def expect(condition, what):
    if not condition:
        raise SystemExit(f"openai_client: FAILED: {what}")


def expect_error(kind, call, says):
    try:
        call()
    except kind as e:
        expect(says in str(e), f"{kind.__name__} says {says!r}: {e}")
        print(f"openai_client: {kind.__name__} ({e.status_code}): {e.message}")
        return
    raise SystemExit(f"openai_client: FAILED: expected {kind.__name__} ({says})")


def check(url, key):
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0)
    models = client.models.list()
    ids = [m.id for m in models.data]
    expect(len(ids) == 1, f"one model listed: {ids}")
    print(f"openai_client: models {ids}")
    for clip in CLIPS:
        text, _ = reference(clip)
        with open(GOLDEN / f"{clip}.wav", "rb") as f:
            got = client.audio.transcriptions.create(model="whisper-1", file=f)
        expect(got.text == text, f"{clip}: {got.text!r} is faster-whisper's {text!r}")
        print(f"openai_client: {clip}: {got.text}")

    # What clients upload: a phone's voice memo (AAC in M4A), the browser's MediaRecorder
    # (Opus in WebM), a video; each gives the text of the same speech as WAV.
    want = client.audio.transcriptions.create(model="whisper-1", file=AUDIO / "speech_16k_s16.wav").text
    for name in ("speech_44k1_stereo.m4a", "speech_opus.webm", "video_two_audio_tracks.mp4"):
        got = client.audio.transcriptions.create(model="whisper-1", file=AUDIO / name)
        expect(got.text == want, f"{name}: {got.text!r} is the WAV's {want!r}")
        print(f"openai_client: {name}: {got.text}")

    text, duration = reference("short_1")
    wav = GOLDEN / "short_1.wav"
    verbose = client.audio.transcriptions.create(
        model=ids[0], file=wav, response_format="verbose_json", timestamp_granularities=["word", "segment"]
    )
    expect(verbose.text == text, f"verbose_json text {verbose.text!r}")
    expect(verbose.language == "english", f"language {verbose.language!r}")
    expect(abs(verbose.duration - duration) < 1e-3, f"duration {verbose.duration} of {duration}")
    expect("".join(s.text for s in verbose.segments).strip() == text, "the segments make the text")
    words = verbose.words
    expect(" ".join(w.word for w in words) == text, f"the words make the text: {[w.word for w in words]}")
    expect(all(a.start <= a.end <= b.start + 1e-6 for a, b in zip(words, words[1:])), "words in order")
    expect(0 <= words[0].start and words[-1].end <= duration, "words inside the clip")
    print(f"openai_client: verbose_json: {len(verbose.segments)} segments, {len(words)} words")

    srt = client.audio.transcriptions.create(model="whisper-1", file=wav, response_format="srt")
    expect(srt.startswith("1\n00:00:00,000 --> ") and text in srt.replace("\n", " "), f"srt: {srt!r}")
    vtt = client.audio.transcriptions.create(model="whisper-1", file=wav, response_format="vtt")
    expect(vtt.startswith("WEBVTT\n"), f"vtt: {vtt!r}")
    plain = client.audio.transcriptions.create(model="whisper-1", file=wav, response_format="text")
    expect(plain.strip() == text, f"text: {plain!r}")
    print("openai_client: srt, vtt and text answers")

    events = list(client.audio.transcriptions.create(model="whisper-1", file=wav, stream=True))
    kinds = [e.type for e in events]
    expect(kinds[-1] == "transcript.text.done" and set(kinds[:-1]) == {"transcript.text.delta"}, f"events {kinds}")
    expect("".join(e.delta for e in events[:-1]).strip() == text, "the deltas make the text")
    expect(events[-1].text == text, f"done: {events[-1].text!r}")
    print(f"openai_client: streamed: {len(events) - 1} deltas, then done")

    expect_error(
        openai.BadRequestError,
        lambda: client.audio.translations.create(model="whisper-1", file=wav),
        "English-only",
    )
    expect_error(
        openai.NotFoundError,
        lambda: client.audio.transcriptions.create(model="whisper-large-v9", file=wav),
        "is not served here",
    )
    expect_error(
        openai.BadRequestError,
        lambda: client.audio.transcriptions.create(model="whisper-1", file=("notes.wav", b"not audio at all")),
        "notes.wav",
    )
    expect_error(
        openai.BadRequestError,
        lambda: client.audio.transcriptions.create(model="whisper-1", file=wav, response_format="docx"),
        "response_format",
    )
    wrong = openai.OpenAI(base_url=url, api_key=key + "x", max_retries=0)
    expect_error(openai.AuthenticationError, lambda: wrong.models.list(), "incorrect API key")


async def load(url, key, clients):
    client = openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=600)
    clips = [CLIPS[k % len(CLIPS)] for k in range(clients)]
    audio = {clip: (GOLDEN / f"{clip}.wav").read_bytes() for clip in CLIPS}

    async def one(k, clip):
        started = time.monotonic()
        got = await client.audio.transcriptions.create(model="whisper-1", file=(f"client-{k}-{clip}.wav", audio[clip]))
        return clip, got.text, time.monotonic() - started

    started = time.monotonic()
    answers = await asyncio.gather(*(one(k, clip) for k, clip in enumerate(clips)))
    wall = time.monotonic() - started
    expect(len(answers) == clients, f"{len(answers)} answers for {clients} clients")
    for k, (clip, text, _) in enumerate(answers):
        expect(text == reference(clip)[0], f"client {k} ({clip}) got {text!r}")
    seconds = sorted(s for _, _, s in answers)
    audio_seconds = sum(reference(clip)[1] for clip in clips)
    print(
        f"openai_client: {clients} concurrent clients, every one its own clip's text: {wall:.1f} s, "
        f"{clients / wall:.2f} requests/s, {audio_seconds / wall:.1f} audio s/s, "
        f"latency median {seconds[len(seconds) // 2]:.1f} s, max {seconds[-1]:.1f} s"
    )


def main():
    url, key, mode = sys.argv[1:4]
    if mode == "check":
        check(url, key)
    elif mode == "load":
        asyncio.run(load(url, key, int(sys.argv[4])))
    else:
        raise SystemExit(f"openai_client: unknown mode {mode!r}")


if __name__ == "__main__":
    main()
