#!/usr/bin/env bash
# The project's one test command: formatting, lints, the set-up scripts' cache locking, every
# native test (the GPU ones on Mesa lavapipe; the fuzz targets' corpus and a seeded mutation run
# of it among them), the wasm build, the browser suite (WebGPU in headless Chromium) and the
# end-to-end browser tests of the demo page and the npm package. Prints each stage's duration as
# it ends and a table of all of them at the end.
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

# Jobs in the background (the downloads, the two browser suites) each run in a process group of
# their own (job control on while they start), so that each can be stopped whole: when this
# script exits, however it exits (a stage that failed, Ctrl-C, TERM, HUP), every group still
# running gets TERM, and KILL 10 s later. The set-up and fetch scripts in them remove their
# temporary folders on TERM; what a KILL leaves, their next run removes.
background=() # process group ids (= their first process's id) not yet waited for
in_background() { # COMMAND...: starts it, its stdin empty; its group id in $background_pid
  set -m
  "$@" </dev/null &
  background_pid=$!
  set +m
  background+=("$background_pid")
}
waited() { # PID: its group no longer needs stopping
  local g kept=()
  for g in "${background[@]+"${background[@]}"}"; do
    [ "$g" = "$1" ] || kept+=("$g")
  done
  background=("${kept[@]+"${kept[@]}"}")
}
stop_background() {
  local g _
  ((${#background[@]})) || return 0
  for g in "${background[@]}"; do
    kill -TERM -- "-$g" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    for g in "${background[@]}"; do
      if kill -0 -- "-$g" 2>/dev/null; then
        sleep 0.2
        continue 2
      fi
    done
    return 0
  done
  for g in "${background[@]}"; do
    kill -KILL -- "-$g" 2>/dev/null || true
  done
}
trap 'stop_background; rm -f "${downloads_log:-}"; report' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# Downloads (Debian packages, npm tools, NVRTC, the models) go on in the background while the
# compiler works in the foreground; the tests wait for them. Their log is this run's own.
mkdir -p "${HOME}/.cache/susurrus"
downloads_log=$(mktemp "${HOME}/.cache/susurrus/downloads.XXXXXX.log")
downloads() {
  ./scripts/setup.sh system node nvrtc peers api && ./scripts/models/fetch_model.sh &&
    ./scripts/models/fetch_model.sh base && ./scripts/models/fetch_model.sh silero-vad &&
    ./scripts/models/fetch_model.sh tiny.en-int8 && ./scripts/models/fetch_model.sh tiny.en-onnx &&
    ./scripts/models/fetch_model.sh tiny.en-ggml
}
in_background downloads >"$downloads_log" 2>&1
downloads=$background_pid
wait_for_downloads() {
  local rc=0
  wait "$downloads" || rc=$?
  waited "$downloads"
  if ((rc)); then
    cat "$downloads_log" >&2
    echo "test: setting up the system packages, npm tools, NVRTC or the models failed" >&2
    return 1
  fi
  grep -v '^/' "$downloads_log" || true
}

stage "setup: rust components, targets and tools" ./scripts/setup.sh rust
stage "cargo fmt --all --check" cargo fmt --all --check
stage "scripts: locks and temporary folders of the set-up cache (scripts/lib/test_cache.sh)" ./scripts/lib/test_cache.sh
stage "cargo clippy --workspace --all-targets (native, wasm32)" \
  bash -c 'cargo clippy --workspace --all-targets -- -D warnings &&
    cargo clippy -p susurrus-web -p susurrus-cpu --target wasm32-unknown-unknown --all-targets -- -D warnings'
stage "cargo check -p susurrus-cli --target aarch64-apple-darwin (macOS, Metal)" \
  cargo check -p susurrus-cli --target aarch64-apple-darwin
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
  # The browser the suites ran in: Debian's package, whose version follows the machine's
  # package lists (148 on a fresh Debian 12 machine on 2026-12-07, 156 on others).
  echo "browser: $(/usr/bin/chromium --version 2>/dev/null | head -n 1); $(/usr/bin/chromedriver --version 2>/dev/null | head -n 1)"
  logs=$(mktemp -d)
  timed() {
    local t0=$SECONDS rc=0
    "$@" || rc=$?
    echo "-- took $((SECONDS - t0)) s (exit code $rc)"
    return "$rc"
  }
  browser_suite() {
    cd crates/web && timed env WASM_BINDGEN_TEST_TIMEOUT=900 wasm-pack test --release --mode no-install \
      --headless --chrome --chromedriver /usr/bin/chromedriver
  }
  in_background browser_suite >"$logs/browser" 2>&1
  local browser=$background_pid
  in_background timed ./tests/e2e/run.sh >"$logs/e2e" 2>&1
  local e2e=$background_pid
  wait "$browser" || failed+=("the browser suite")
  waited "$browser"
  wait "$e2e" || failed+=("the end-to-end tests")
  waited "$e2e"
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
