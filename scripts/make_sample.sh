#!/usr/bin/env bash
# Regenerates samples/sample.wav, the clip the README's first command transcribes: speech
# synthesised with espeak-ng (our own audio), kept at espeak-ng's 22,050 Hz so that the first
# run also shows resampling to Whisper's 16 kHz.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v espeak-ng >/dev/null || { echo "make_sample: needs espeak-ng (apt-get install espeak-ng)" >&2; exit 1; }
mkdir -p samples
espeak-ng -v en-us -s 140 -w samples/sample.wav \
  "Speech becomes text on your own computer. Nothing you say leaves the machine, and the transcript arrives in a few seconds."
echo "wrote samples/sample.wav"
