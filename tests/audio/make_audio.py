"""Writes tests/fixtures/audio/: small audio files in every input format `susurrus` reads, the
broken inputs it must reject, and the 16 kHz mono reference signals the decoder is checked
against (crates/cli/tests/audio.rs).

Two kinds of content:

- "tone": a sum of two steady sines and a linear chirp under a raised-cosine fade, written as
  a function of time (`tone`). Every tone file samples it at its own rate; the reference is the
  same function sampled at 16 kHz, so the resampler is checked against the ideal band-limited
  result, not against another resampler. All components stay below 3.1 kHz so the function is
  band-limited even for the 8 kHz file. Channel c uses its own frequencies and phases, so a
  downmix that is not the plain average of the channels fails the comparison.
- "speech": one espeak-ng sentence brought to 16 kHz (libswresample through PyAV), written as
  16-bit WAV (the reference for the lossy files) and encoded with PyAV's FFmpeg in every
  container and codec the decoder reads (FLAC, MP3, Vorbis, Opus, AAC, ALAC, AIFF; MP4, WebM,
  Matroska, CAF, ADTS), two of them as videos.

Files (rates in Hz; "ref" is the raw little-endian f32 reference at 16 kHz mono):
  tone_16k_{u8,s16,s24,s32,f32}.wav  mono, 0.5 s; s32 uses WAVE_FORMAT_EXTENSIBLE, f32 is IEEE float
                                     ref: ref_tone_mono_16k.f32
  tone_8k_s16.wav, tone_22k05_s24.wav, tone_48k_s16.wav
                                     mono, 0.5 s, same content          ref: ref_tone_mono_16k.f32
  tone_44k1_stereo_s16.wav           channels 0 and 1, 0.5 s             ref: ref_tone_stereo_16k.f32
  tone_16k_6ch_s16.wav               channels 0..5 (5.1 mask), 0.25 s    ref: ref_tone_6ch_16k.f32
  speech_16k_s16.wav                 the speech reference itself
  speech_16k.flac                    same samples, FLAC
  speech_44k1_stereo.mp3, speech_22k05.mp3 (MPEG-2), speech_48k_stereo.ogg (Vorbis)
  speech_opus.ogg                    OGG Opus (libopus, 24 kb/s)
  speech_44k1_stereo.m4a             AAC-LC in MP4 (FFmpeg's encoder, 96 kb/s), its index first
  speech_moov_last.m4a               the same with its index (moov) after the media data
  speech_alac.m4a, speech_alac.caf   ALAC (16-bit, 16 kHz) in MP4 and in CAF
  speech_16k.aiff                    16-bit big-endian PCM in AIFF
  speech_22k05.aac                   raw AAC-LC (ADTS) at 22.05 kHz, 48 kb/s
  speech_opus.webm, speech_flac.mkv  Opus in WebM (as the browser's MediaRecorder writes), FLAC in Matroska
  video_two_audio_tracks.mp4         H.264 video, then the speech (AAC, 48 kHz stereo), then a 440 Hz tone (AAC)
  video_opus.webm                    VP8 video and the speech (Opus, 48 kHz stereo)
  speech_ac3.mka                     AC-3 in Matroska: a container the decoder knows with a codec it does not
  truncated_speech.wav               speech_16k_s16.wav cut inside a sample at byte 20001
  truncated_speech.mp3               speech_44k1_stereo.mp3 cut inside a frame at 60 % of its bytes
  truncated_header.wav               the first 30 bytes of speech_16k_s16.wav
  truncated_44k1_stereo.m4a, truncated_opus.webm
                                     speech_44k1_stereo.m4a and speech_opus.webm cut at 60 % of their bytes
  garbage.wav                        text, not audio; random.bin: 4096 seeded random bytes
  empty.wav                          0 bytes
  zero_samples.wav                   a valid 16 kHz s16 header with an empty data chunk
  nan_f32.wav                        mono f32 16 kHz, 0.5 s, NaN at sample 5000 (0.3125 s), +inf later
  inf_stereo_f32.wav                 stereo f32 8 kHz, 0.6 s, -inf in the right channel at frame 4000
                                     (0.5 s), nothing bad before

Run from the repository root through tests/audio/make_audio.sh (espeak-ng and the venv of
scripts/python_venv.sh). Deterministic: the same espeak-ng and PyAV give byte-identical files.
"""

import argparse
import io
import os
import pathlib
import struct
import subprocess
import tempfile
import wave

import av
import numpy as np

OUT = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "audio"
REF_RATE = 16000
TONE_SECONDS = 0.5
SIX_CHANNEL_SECONDS = 0.25
FADE_SECONDS = 0.04
CHIRP_HZ = (100.0, 3100.0)

SPEECH_TEXT = "Please read this short sentence aloud."
SPEECH_VOICE = "en-us"
SPEECH_SPEED = 150
ESPEAK_RATE = 22050
PEAK_DBFS = -3.0

WAVE_FORMAT_PCM = 1
WAVE_FORMAT_IEEE_FLOAT = 3
WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# KSDATAFORMAT_SUBTYPE_PCM: the format tag followed by the fixed GUID tail.
SUBTYPE_PCM_TAIL = bytes.fromhex("000000001000800000aa00389b71")
SPEAKER_CENTRE = 0x4
SPEAKER_5_1 = 0x3F


def tone(rate, seconds, channel):
    """Channel `channel` of the tone content sampled at `rate` for `seconds` (float64)."""
    n = round(rate * seconds)
    t = np.arange(n, dtype=np.float64) / rate
    f1 = 200.0 + 150.0 * channel
    f2 = 1000.0 + 250.0 * channel
    sweep = (CHIRP_HZ[1] - CHIRP_HZ[0]) / seconds
    x = (
        0.35 * np.sin(2 * np.pi * f1 * t + channel)
        + 0.25 * np.sin(2 * np.pi * f2 * t + 0.5 * channel)
        + 0.2 * np.sin(2 * np.pi * (CHIRP_HZ[0] * t + 0.5 * sweep * t * t))
    )
    # Raised-cosine fade in and out: the content starts and ends at zero smoothly, so it stays
    # band-limited at the edges too.
    ramp = np.clip(np.minimum(t, seconds - t) / FADE_SECONDS, 0.0, 1.0)
    return x * (0.5 - 0.5 * np.cos(np.pi * ramp))


def quantize(x, bits):
    """Signed integer samples: x * 2^(bits-1), rounded and clipped to the format's range."""
    scale = float(1 << (bits - 1))
    return np.clip(np.round(x * scale), -scale, scale - 1).astype(np.int64)


def sample_bytes(frames, kind):
    """Interleaved little-endian bytes of `frames` ([n, channels] float64) in `kind`."""
    if kind == "u8":
        return (quantize(frames, 8) + 128).astype(np.uint8).tobytes()
    if kind == "s16":
        return quantize(frames, 16).astype("<i2").tobytes()
    if kind == "s24":
        q = quantize(frames, 24).astype("<i4").reshape(-1, 1).view(np.uint8)
        return q[:, :3].tobytes()
    if kind == "s32":
        return quantize(frames, 32).astype("<i4").tobytes()
    if kind == "f32":
        return frames.astype("<f4").tobytes()
    raise ValueError(kind)


BITS = {"u8": 8, "s16": 16, "s24": 24, "s32": 32, "f32": 32}


def wav_bytes(frames, rate, kind, extensible=False, channel_mask=0, data_len=None):
    """A canonical RIFF/WAVE file. `data_len` overrides the data chunk's declared size."""
    frames = np.asarray(frames, dtype=np.float64)
    if frames.ndim == 1:
        frames = frames[:, None]
    channels = frames.shape[1]
    bits = BITS[kind]
    block = channels * bits // 8
    data = sample_bytes(frames, kind)
    if extensible:
        tag = WAVE_FORMAT_PCM if kind != "f32" else WAVE_FORMAT_IEEE_FLOAT
        fmt = struct.pack("<HHIIHH", WAVE_FORMAT_EXTENSIBLE, channels, rate, rate * block, block, bits)
        fmt += struct.pack("<HHI", 22, bits, channel_mask) + struct.pack("<H", tag) + SUBTYPE_PCM_TAIL
    else:
        tag = WAVE_FORMAT_IEEE_FLOAT if kind == "f32" else WAVE_FORMAT_PCM
        fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    if kind == "f32":
        # Non-PCM formats carry a fact chunk with the frame count.
        chunks += b"fact" + struct.pack("<II", 4, frames.shape[0])
    declared = len(data) if data_len is None else data_len
    chunks += b"data" + struct.pack("<I", declared) + data
    if len(data) % 2:
        chunks += b"\0"
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def speak(espeak):
    """espeak-ng's 22050 Hz 16-bit mono rendering of SPEECH_TEXT, as int16."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "speech.wav")
        subprocess.run(
            [espeak, "-v", SPEECH_VOICE, "-s", str(SPEECH_SPEED), "-w", path, SPEECH_TEXT],
            check=True,
        )
        with wave.open(path, "rb") as w:
            if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (ESPEAK_RATE, 1, 2):
                raise SystemExit(f"espeak-ng wrote an unexpected format to {path}")
            return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


def av_resample(x, rate_in, rate_out, channels):
    """x (mono float64) resampled by libswresample, as `channels` identical float32 planes (copied
    here: libswresample's own mono-to-stereo upmix would lower the level by 3 dB)."""
    frame = av.AudioFrame.from_ndarray(x.astype(np.float32)[None, :], format="fltp", layout="mono")
    frame.sample_rate = rate_in
    resampler = av.AudioResampler(format="fltp", layout="mono", rate=rate_out)
    parts = [f.to_ndarray() for f in resampler.resample(frame)]
    parts += [f.to_ndarray() for f in resampler.resample(None)]
    return np.repeat(np.concatenate(parts, axis=1), channels, axis=0)


def encode(planes, rate, container_format, codec, bit_rate=None, options=None, muxer=None):
    """`planes` ([channels, n] float32) encoded with PyAV; the file's bytes. `muxer` holds the
    container's options (MP4's `movflags`).

    Container and codec run with the bitexact flag, so no version strings or random stream
    serials end up in the file."""
    return mux(container_format, [Audio(planes, rate, codec, bit_rate, options)], muxer)


class Audio:
    """One audio track of a file `mux` writes: `planes` ([channels, n] float32) at `rate`."""

    def __init__(self, planes, rate, codec, bit_rate=None, options=None):
        self.planes, self.rate, self.codec, self.bit_rate, self.options = planes, rate, codec, bit_rate, options


class Video:
    """A video track of `seconds` at `fps` frames a second, `size` pixels square, drawn as a
    moving bar (the decoder must skip it; its content does not matter)."""

    def __init__(self, codec, seconds, fps=10, size=64):
        self.codec, self.seconds, self.fps, self.size = codec, seconds, fps, size


def mux(container_format, tracks, muxer=None):
    """A file of `tracks` (Audio and Video, in that order in the file) written with PyAV; its
    bytes. Packets are muxed in time order by FFmpeg's interleaver."""
    options = {"fflags": "+bitexact", **(muxer or {})}

    def write(target):
        with av.open(target, "w", format=container_format, options=options) as out:
            streams = [add_track(out, track) for track in tracks]
            # Every track's packets, encoded first, then muxed: the interleaver orders them by time.
            for stream, track in zip(streams, tracks):
                for packet in (video_packets if isinstance(track, Video) else audio_packets)(stream, track):
                    out.mux(packet)

    if "movflags" not in options:
        buf = io.BytesIO()
        write(buf)
        return buf.getvalue()
    # MP4's faststart rewrites the finished file, which it opens again by its name.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out")
        write(path)
        return pathlib.Path(path).read_bytes()


def add_track(out, track):
    if isinstance(track, Video):
        stream = out.add_stream(track.codec, rate=track.fps)
        stream.width = stream.height = track.size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.options["threads"] = "1"
    else:
        layout = "mono" if track.planes.shape[0] == 1 else "stereo"
        stream = out.add_stream(track.codec, rate=track.rate, layout=layout)
        if track.bit_rate:
            stream.bit_rate = track.bit_rate
        for key, value in (track.options or {}).items():
            stream.codec_context.options[key] = value
        if track.codec == "alac":
            # ALAC's default is 32-bit samples; the speech is 16-bit.
            stream.codec_context.format = "s16p"
    stream.codec_context.flags |= av.codec.context.Flags.bitexact
    return stream


def audio_packets(stream, track):
    planes, rate = track.planes, track.rate
    layout = "mono" if planes.shape[0] == 1 else "stereo"
    fmt = stream.codec_context.format.name
    frame_size = stream.codec_context.frame_size or 1024
    for start in range(0, planes.shape[1], frame_size):
        chunk = planes[:, start : start + frame_size]
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk), format="fltp", layout=layout)
        frame.sample_rate = rate
        frame.pts = start
        if fmt != "fltp":
            frame = to_format(frame, fmt, layout, rate)
        yield from stream.encode(frame)
    yield from stream.encode(None)


def video_packets(stream, track):
    n = track.size
    for i in range(round(track.seconds * track.fps)):
        image = np.full((n, n, 3), 40, dtype=np.uint8)
        x = (i * 4) % n
        image[:, x : x + 8] = (230, 200, 60)
        frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p")
        frame.pts = i
        yield from stream.encode(frame)
    yield from stream.encode(None)


def to_format(frame, fmt, layout, rate):
    """`frame` converted to the sample format `fmt` an encoder takes (same rate and layout)."""
    converted = av.AudioResampler(format=fmt, layout=layout, rate=rate).resample(frame)
    (result,) = converted
    result.pts = frame.pts
    return result


def speech_fixtures(espeak):
    raw = speak(espeak).astype(np.float64) / 32768.0
    speech = av_resample(raw, ESPEAK_RATE, REF_RATE, 1)[0].astype(np.float64)
    speech *= 10.0 ** (PEAK_DBFS / 20.0) / np.max(np.abs(speech))
    pcm = quantize(speech, 16) / 32768.0
    files = {"speech_16k_s16.wav": wav_bytes(pcm, REF_RATE, "s16")}

    def at(rate, channels):
        return av_resample(pcm, REF_RATE, rate, channels)

    files["speech_16k.flac"] = encode(pcm.astype(np.float32)[None, :], REF_RATE, "flac", "flac")
    files["speech_44k1_stereo.mp3"] = encode(at(44100, 2), 44100, "mp3", "libmp3lame", 96000)
    files["speech_22k05.mp3"] = encode(at(22050, 1), 22050, "mp3", "libmp3lame", 48000)
    # FFmpeg's own Vorbis encoder (the venv's PyAV has no libvorbis) is marked experimental.
    experimental = {"strict": "experimental"}
    files["speech_48k_stereo.ogg"] = encode(at(48000, 2), 48000, "ogg", "vorbis", 96000, experimental)
    files["speech_opus.ogg"] = encode(at(48000, 1), 48000, "ogg", "libopus", 24000)
    # The other containers and codecs people's recordings come in: phones' voice memos and
    # meeting exports (AAC in MP4), Apple's lossless (ALAC in M4A and CAF), AIFF, raw ADTS AAC,
    # the browser's MediaRecorder (Opus in WebM), Matroska. MP4s put their index (moov) first,
    # as phones and `-movflags +faststart` do, except the one that tests an index at the end.
    front = {"movflags": "+faststart"}
    files["speech_44k1_stereo.m4a"] = encode(at(44100, 2), 44100, "ipod", "aac", 96000, muxer=front)
    files["speech_moov_last.m4a"] = encode(at(44100, 2), 44100, "ipod", "aac", 96000)
    files["speech_alac.m4a"] = encode(pcm.astype(np.float32)[None, :], REF_RATE, "ipod", "alac", muxer=front)
    files["speech_alac.caf"] = encode(pcm.astype(np.float32)[None, :], REF_RATE, "caf", "alac")
    files["speech_16k.aiff"] = encode(pcm.astype(np.float32)[None, :], REF_RATE, "aiff", "pcm_s16be")
    files["speech_22k05.aac"] = encode(at(22050, 1), 22050, "adts", "aac", 48000)
    files["speech_opus.webm"] = encode(at(48000, 1), 48000, "webm", "libopus", 24000)
    files["speech_flac.mkv"] = encode(pcm.astype(np.float32)[None, :], REF_RATE, "matroska", "flac")
    # Videos: the speech is the first audio track, behind a video track, with a second audio
    # track (a tone) after it that must not be what is transcribed.
    seconds = len(pcm) / REF_RATE
    second_track = np.float32(0.3) * np.sin(2 * np.pi * 440.0 * np.arange(round(seconds * 48000)) / 48000)
    files["video_two_audio_tracks.mp4"] = mux(
        "mp4",
        [
            Video("libx264", seconds),
            Audio(at(48000, 2), 48000, "aac", 96000),
            Audio(second_track.astype(np.float32)[None, :], 48000, "aac", 64000),
        ],
        front,
    )
    files["speech_ac3.mka"] = encode(at(48000, 2), 48000, "matroska", "ac3", 96000)
    files["video_opus.webm"] = mux("webm", [Video("libvpx", seconds), Audio(at(48000, 2), 48000, "libopus", 32000)])
    files["truncated_speech.wav"] = files["speech_16k_s16.wav"][:20001]
    mp3 = files["speech_44k1_stereo.mp3"]
    files["truncated_speech.mp3"] = mp3[: len(mp3) * 6 // 10]
    files["truncated_header.wav"] = files["speech_16k_s16.wav"][:30]
    for name in ("speech_44k1_stereo.m4a", "speech_opus.webm"):
        data = files[name]
        files["truncated_" + name.removeprefix("speech_")] = data[: len(data) * 6 // 10]
    return files


def tone_fixtures():
    def mono(rate):
        return tone(rate, TONE_SECONDS, 0)

    kinds = ("u8", "s16", "s24", "f32")
    files = {f"tone_16k_{kind}.wav": wav_bytes(mono(16000), 16000, kind) for kind in kinds}
    # 32-bit integer PCM the way most tools write it: WAVE_FORMAT_EXTENSIBLE, front-centre mask.
    files["tone_16k_s32.wav"] = wav_bytes(mono(16000), 16000, "s32", True, SPEAKER_CENTRE)
    files["tone_8k_s16.wav"] = wav_bytes(mono(8000), 8000, "s16")
    files["tone_22k05_s24.wav"] = wav_bytes(mono(22050), 22050, "s24")
    files["tone_48k_s16.wav"] = wav_bytes(mono(48000), 48000, "s16")
    stereo = np.stack([tone(44100, TONE_SECONDS, c) for c in (0, 1)], axis=1)
    files["tone_44k1_stereo_s16.wav"] = wav_bytes(stereo, 44100, "s16")
    six = np.stack([tone(16000, SIX_CHANNEL_SECONDS, c) for c in range(6)], axis=1)
    files["tone_16k_6ch_s16.wav"] = wav_bytes(six, 16000, "s16", True, SPEAKER_5_1)

    def reference(seconds, channels):
        return np.mean([tone(REF_RATE, seconds, c) for c in range(channels)], axis=0)

    files["ref_tone_mono_16k.f32"] = reference(TONE_SECONDS, 1).astype("<f4").tobytes()
    files["ref_tone_stereo_16k.f32"] = reference(TONE_SECONDS, 2).astype("<f4").tobytes()
    files["ref_tone_6ch_16k.f32"] = reference(SIX_CHANNEL_SECONDS, 6).astype("<f4").tobytes()
    return files


def broken_fixtures():
    files = {
        "garbage.wav": b"This is a text file with a .wav name; it holds no audio at all.\n" * 8,
        # RandomState: numpy's frozen legacy stream, the same bytes in every numpy version.
        "random.bin": np.random.RandomState(20250117).randint(0, 256, 4096).astype(np.uint8).tobytes(),
        "empty.wav": b"",
        "zero_samples.wav": wav_bytes(np.zeros((0, 1)), 16000, "s16"),
    }
    nan = tone(16000, TONE_SECONDS, 0)
    nan[5000] = np.nan
    nan[6000] = np.inf
    files["nan_f32.wav"] = wav_bytes(nan, 16000, "f32")
    inf = np.stack([tone(8000, 0.6, c) for c in (0, 1)], axis=1)
    inf[4000, 1] = -np.inf
    files["inf_stereo_f32.wav"] = wav_bytes(inf, 8000, "f32")
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--espeak", default="espeak-ng")
    args = parser.parse_args()
    files = {**tone_fixtures(), **speech_fixtures(args.espeak), **broken_fixtures()}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in sorted(files.items()):
        (args.out / name).write_bytes(data)
    total = sum(len(d) for d in files.values())
    print(f"make_audio: wrote {len(files)} files, {total} bytes, to {args.out}")


if __name__ == "__main__":
    main()
