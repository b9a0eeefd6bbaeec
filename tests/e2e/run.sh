#!/usr/bin/env bash
# The end-to-end browser tests: the demo page (tests/e2e/page.mjs) and the npm package
# (tests/e2e/npm-package.mjs) with the real whisper-tiny.en model, and the multilingual base
# model's golden runs in the package (tests/e2e/multilingual.mjs), the Silero VAD golden run in
# the package (tests/e2e/vad.mjs), live captions from Chromium's fake microphone in the demo page
# and the package's stream API (tests/e2e/live.mjs), the int8 tiny.en in the demo
# page (tests/e2e/int8.mjs) and a large-v3-shaped model loading in the demo page on WebGPU
# (tests/e2e/large.mjs), the benchmark page (tests/e2e/bench-page.mjs) and the side-by-side
# benchmark with the browser peers as a smoke check (tests/e2e/peers.mjs), in headless Debian Chromium
# through playwright-core. Run from anywhere after ./scripts/setup.sh; builds what it needs.
# The real model on Chromium's SwiftShader WebGPU adapter is slow: expect minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$(date +%s)
mkdir -p -m 700 "${XDG_RUNTIME_DIR:=/tmp/xdg-$(id -u)}"
export XDG_RUNTIME_DIR

# The package first: its threaded build has a target folder of its own, so it starts at once
# even while the browser suite's build holds target/'s lock (the test command runs the two side
# by side). Then the command and the random-model example as `cargo test --workspace` builds
# them (target/debug), so after the test command's cargo stage nothing is left to compile: a
# `cargo build -p susurrus-cli` resolves the dependencies' features for that package alone
# and rebuilt most of them (6.75 minutes on two cores).
./scripts/web/build_web.sh
cargo test --workspace --no-run -q
model=$(./scripts/models/fetch_model.sh | tail -n 1)
base_model=$(./scripts/models/fetch_model.sh base | tail -n 1)
int8_model=$(./scripts/models/fetch_model.sh tiny.en-int8 | tail -n 1)
vad_model=$(./scripts/models/fetch_model.sh silero-vad | tail -n 1)
onnx_model=$(./scripts/models/fetch_model.sh tiny.en-onnx | tail -n 1)
ggml_model="$(./scripts/models/fetch_model.sh tiny.en-ggml | tail -n 1)/ggml-tiny.en.bin"
./scripts/setup.sh peers
# large-v3's widths, one layer each side, random weights; its tokenizer from the base model's.
large_model="$PWD/target/e2e/large-v3"
target/debug/examples/random_model large-v3 1 "$large_model" "${base_model}/tokenizer.json"

export SUSURRUS_BIN="$PWD/target/debug/susurrus"
export SUSURRUS_MODEL="$model"
export SUSURRUS_BASE_MODEL="$base_model"
export SUSURRUS_INT8_MODEL="$int8_model"
export SUSURRUS_VAD_MODEL="$vad_model"
export SUSURRUS_LARGE_MODEL="$large_model"
export SUSURRUS_ONNX_MODEL="$onnx_model"
export SUSURRUS_GGML_MODEL="$ggml_model"
# Both suites run even when the first fails, so one run reports every failure.
failed=()
node tests/e2e/page.mjs || failed+=(page)
node tests/e2e/npm-package.mjs || failed+=(npm-package)
node tests/e2e/multilingual.mjs || failed+=(multilingual)
node tests/e2e/vad.mjs || failed+=(vad)
node tests/e2e/live.mjs || failed+=(live)
node tests/e2e/int8.mjs || failed+=(int8)
node tests/e2e/large.mjs || failed+=(large)
node tests/e2e/bench-page.mjs || failed+=(bench-page)
node tests/e2e/peers.mjs || failed+=(peers)

elapsed=$(($(date +%s) - started))
if ((${#failed[@]})); then
  echo "e2e: FAILED: ${failed[*]} (${elapsed} s)" >&2
  exit 1
fi
echo "e2e: all passed in ${elapsed} s"
