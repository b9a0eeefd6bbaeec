#!/usr/bin/env bash
# Regenerates tests/fixtures/golden/ (test speech from espeak-ng and faster-whisper's reference
# outputs for it; see tests/golden/make_golden.py). Installs espeak-ng with apt-get when it is
# missing (needs root), and takes the pinned venv and the model from scripts/. Re-runnable: the
# same espeak-ng, venv and model give byte-identical fixtures (all but timing.json).
# Extra arguments go to make_golden.py (e.g. --out DIR).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if ! command -v espeak-ng >/dev/null 2>&1; then
  echo "make_golden: installing espeak-ng" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q espeak-ng >&2; then
    apt-get update -q >&2
    apt-get install -y -q espeak-ng >&2
  fi
fi

python=$("${root}/scripts/python-venv.sh" | tail -n 1)
model=$("${root}/scripts/fetch-model.sh" | tail -n 1)

cd "$root"
exec "$python" tests/golden/make_golden.py --model "$model" "$@"
