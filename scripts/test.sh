#!/usr/bin/env bash
# The project's one test command: formatting, lints, every native test (the GPU ones on Mesa
# lavapipe; the fuzz targets' corpus and a seeded mutation run of it among them), the wasm
# build, the browser suite (WebGPU in headless Chromium) and the end-to-end browser tests of the
# demo page and the npm package. Prints each stage's duration as it ends and a table of all of
# them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="${HOME}/.cache/susurrus/tools/bin:${PATH}"
# NVRTC for the host-side CUDA tests (installed by setup.sh; no GPU needed).
export LD_LIBRARY_PATH="${HOME}/.cache/susurrus/nvrtc/13.0.88/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
# wgpu's Vulkan loader warns without a private runtime directory.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-${HOME}/.cache/susurrus/xdg}"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

started=$(date +%s)
timings=()
# stage NAME COMMAND...: runs COMMAND under a heading and records how long it took.
stage() {
  local name=$1 t0
  shift
  printf '\n== %s ==\n' "$name"
  t0=$(date +%s)
  "$@"
  timings+=("$(printf '%6d s  %s' $(($(date +%s) - t0)) "$name")")
  printf -- '-- %s: %d s\n' "$name" $(($(date +%s) - t0))
}
report() {
  printf '\n== stage durations ==\n'
  printf '%s\n' "${timings[@]}"
  printf '%6d s  total\n' $(($(date +%s) - started))
  # The build shares the machine's disk with whatever else is there: say how much it took.
  printf 'target/: %s; disk free: %s\n' "$(du -sh target 2>/dev/null | cut -f1)" \
    "$(df -h --output=avail . | tail -n 1 | tr -d ' ')"
}
trap report EXIT

# Downloads (Debian packages, npm tools, NVRTC, the models) go on in the background while the
# compiler works in the foreground; the tests wait for them.
downloads_log="${HOME}/.cache/susurrus/downloads.log"
mkdir -p "$(dirname "$downloads_log")"
(./scripts/setup.sh system node nvrtc peers api && ./scripts/models/fetch_model.sh && ./scripts/models/fetch_model.sh base &&
  ./scripts/models/fetch_model.sh silero-vad &&
  ./scripts/models/fetch_model.sh tiny.en-int8 && ./scripts/models/fetch_model.sh tiny.en-onnx &&
  ./scripts/models/fetch_model.sh tiny.en-ggml) \
  >"$downloads_log" 2>&1 &
downloads=$!
wait_for_downloads() {
  if ! wait "$downloads"; then
    cat "$downloads_log" >&2
    echo "test: setting up the system packages, npm tools, NVRTC or the models failed" >&2
    return 1
  fi
  grep -v '^/' "$downloads_log" || true
}

stage "setup: rust components, targets and tools" ./scripts/setup.sh rust
stage "cargo fmt --all --check" cargo fmt --all --check
stage "cargo clippy --workspace --all-targets (native, wasm32)" \
  bash -c 'cargo clippy --workspace --all-targets -- -D warnings &&
    cargo clippy -p susurrus-web -p susurrus-cpu --target wasm32-unknown-unknown --all-targets -- -D warnings'
stage "cargo check -p susurrus-native --target aarch64-apple-darwin (macOS, Metal)" \
  cargo check -p susurrus-native --target aarch64-apple-darwin
stage "cargo test --workspace: build" cargo test --workspace --no-run
stage "setup: system packages, npm tools, browser peers, OpenAI's Python client, NVRTC, the models, int8/ONNX/ggml tiny.en (background)" wait_for_downloads
stage "cargo test --workspace" cargo test --workspace
# The browser suite and the end-to-end tests side by side: each spends most of its time in a
# single-threaded WebAssembly transcription or waiting on Chromium, so two cores serve both
# (their builds take turns on cargo's lock). The suite is built in release, as the package the
# end-to-end tests build is, so the dependencies are compiled for wasm32 once, not twice. Each
# writes a log of its own, printed when both end.
browser_suites() {
  local logs failed=() name
  logs=$(mktemp -d)
  timed() {
    local t0=$SECONDS rc=0
    "$@" || rc=$?
    echo "-- took $((SECONDS - t0)) s (exit code $rc)"
    return "$rc"
  }
  (cd crates/web && timed env WASM_BINDGEN_TEST_TIMEOUT=900 wasm-pack test --release --mode no-install \
    --headless --chrome --chromedriver /usr/bin/chromedriver) >"$logs/browser" 2>&1 &
  local browser=$!
  timed ./tests/e2e/run.sh >"$logs/e2e" 2>&1 &
  local e2e=$!
  wait "$browser" || failed+=("the browser suite")
  wait "$e2e" || failed+=("the end-to-end tests")
  for name in browser e2e; do
    printf '\n-- %s --\n' "$name"
    cat "$logs/$name"
  done
  rm -rf "$logs"
  if ((${#failed[@]})); then
    echo "test: failed: ${failed[*]}" >&2
    return 1
  fi
}
stage "browser: wasm-pack test --headless --chrome (crates/web) beside the end to end tests of the demo page and the npm package with the real model (tests/e2e)" \
  browser_suites

printf '\n== all passed ==\n'
