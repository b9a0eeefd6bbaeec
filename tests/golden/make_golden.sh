#!/usr/bin/env bash
# Regenerates tests/fixtures/golden/ (test speech from espeak-ng and faster-whisper's reference
# outputs for it; see tests/golden/make_golden.py): the tiny.en set, then the multilingual base
# set in base/. Installs espeak-ng with apt-get when it is missing (needs root), and takes the
# pinned venv and the models from scripts/. Re-runnable: the same espeak-ng, venv and models
# give byte-identical fixtures (all but timing.json).
#
#   tests/golden/make_golden.sh [--set tiny.en|base] [make_golden.py options, e.g. --out DIR]
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

sets=(tiny.en base)
if [ "${1:-}" = "--set" ]; then
  sets=("$2")
  shift 2
fi

python=$("${root}/scripts/python_venv.sh" | tail -n 1)
cd "$root"
for set in "${sets[@]}"; do
  model=$("${root}/scripts/models/fetch_model.sh" "$set" | tail -n 1)
  "$python" tests/golden/make_golden.py --set "$set" --model "$model" "$@"
done
