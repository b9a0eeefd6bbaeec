#!/usr/bin/env bash
# Regenerates tests/fixtures/audio/ (the audio decoder's test inputs and 16 kHz references; see
# tests/audio/make_audio.py). Installs espeak-ng with apt-get when it is missing (needs root) and
# takes the pinned venv from scripts/python_venv.sh (PyAV, numpy). Re-runnable: the same
# espeak-ng and venv give byte-identical files. Extra arguments go to make_audio.py (e.g. --out DIR).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if ! command -v espeak-ng >/dev/null 2>&1; then
  echo "make_audio: installing espeak-ng" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q espeak-ng >&2; then
    apt-get update -q >&2
    apt-get install -y -q espeak-ng >&2
  fi
fi

python=$("${root}/scripts/python_venv.sh" | tail -n 1)

cd "$root"
exec "$python" tests/audio/make_audio.py "$@"
