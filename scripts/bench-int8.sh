#!/usr/bin/env bash
# int8 against f16 on the golden clips: model size, peak memory, transcription time, word error
# rate and token agreement with the f16 reference, for susurrus and faster-whisper side by side
# (scripts/bench_int8.py says what is measured).
# Usage: scripts/bench-int8.sh [--backend cpu|wgpu|cuda|auto] [--repeats N]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$("${root}/scripts/python-venv.sh" | tail -n 1)
exec "$python" "${root}/scripts/bench_int8.py" "$@"
