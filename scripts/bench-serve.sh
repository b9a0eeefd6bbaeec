#!/usr/bin/env bash
# Throughput of `susurrus serve --api` (release build) against concurrency, beside
# faster-whisper's BatchedInferencePipeline on the same requests: requests/s, audio s/s and
# median latency for 1, 4, 16 and 64 clients. See scripts/bench_serve.py for what is timed.
# Usage: scripts/bench-serve.sh [--backend cpu|wgpu|cuda] [--device cpu|cuda] [--concurrency 1,4,16,64]
#        [--requests N] [--threads N]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cargo build --release -q -p susurrus-native
python=$(./scripts/python-venv.sh | tail -n 1)
model=$(./scripts/fetch-model.sh | tail -n 1)
exec "$python" scripts/bench_serve.py --susurrus target/release/susurrus --model "$model" "$@"
