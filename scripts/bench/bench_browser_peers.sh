#!/usr/bin/env bash
# The browser side-by-side benchmark: Susurrus's npm package (CPU, 1 and 2 threads, f16 and int8
# weights; WebGPU where the browser has a hardware adapter), transformers.js (WASM, fp32 and q8) and whisper.cpp's wasm
# build, on the same tiny.en weights and clips in one headless Chromium (tests/e2e/peers.mjs,
# which prints the table). Prepares what it needs first: the system packages, the peers'
# npm packages and the jfk.wav clip, the model and its ONNX and ggml conversions, the package,
# and the command (release: it serves the files, so its speed is part of every load time).
#
#   scripts/bench/bench_browser_peers.sh [peers.mjs options: --runs N --threads 1,2 --clips jfk,long ...]
set -euo pipefail
cd "$(dirname "$0")/../.."

./scripts/setup.sh system rust node peers
export PATH="${HOME}/.cache/susurrus/tools/bin:${PATH}"
SUSURRUS_MODEL=$(./scripts/models/fetch_model.sh | tail -n 1)
SUSURRUS_INT8_MODEL=$(./scripts/models/fetch_model.sh tiny.en-int8 | tail -n 1)
SUSURRUS_ONNX_MODEL=$(./scripts/models/fetch_model.sh tiny.en-onnx | tail -n 1)
SUSURRUS_GGML_MODEL="$(./scripts/models/fetch_model.sh tiny.en-ggml | tail -n 1)/ggml-tiny.en.bin"
./scripts/web/build_web.sh
cargo build --release --quiet -p susurrus-cli
export SUSURRUS_BIN="$PWD/target/release/susurrus" SUSURRUS_MODEL SUSURRUS_INT8_MODEL SUSURRUS_ONNX_MODEL SUSURRUS_GGML_MODEL
mkdir -p -m 700 "${XDG_RUNTIME_DIR:=/tmp/xdg-$(id -u)}"
export XDG_RUNTIME_DIR
exec node tests/e2e/peers.mjs --bench "$@"
