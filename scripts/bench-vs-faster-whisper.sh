#!/usr/bin/env bash
# Times `susurrus transcribe` (release build) against faster-whisper (float32, 2 threads, the
# same beam size, warm) on the golden clips and prints milliseconds and their ratio per clip, and
# whether the texts match. See scripts/bench_vs_faster_whisper.py for what is timed.
# Usage: scripts/bench-vs-faster-whisper.sh [--backend auto|cpu|wgpu] [--beam-size N] [--repeats N]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$("${root}/scripts/python-venv.sh" | tail -n 1)
exec "$python" "${root}/scripts/bench_vs_faster_whisper.py" "$@"
