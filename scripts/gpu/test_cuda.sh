#!/usr/bin/env bash
# The CUDA backend's GPU suite: the op harness on the GPU against the reference interpreter,
# the golden clips token for token (alone and decoded together through the batch scheduler),
# graph replay and device errors (crates/native/tests/cuda.rs).
#
#   scripts/gpu/test_cuda.sh        build and run (a machine with cargo and an NVIDIA GPU)
#   scripts/gpu/test_cuda.sh build  build only: target/gpu-suite/cuda-tests and susurrus (for a GPU
#                                   machine without cargo; take both along with the repository)
#   scripts/gpu/test_cuda.sh run    run target/gpu-suite/cuda-tests from the repository root
#
# The run needs the NVIDIA driver, NVRTC and cuBLAS (CUDA 13): the CUDA toolkit's libraries,
# or those of the nvidia-* Python wheels, are put on LD_LIBRARY_PATH when found. The golden
# clips need the model in ~/.cache/susurrus/models (scripts/models/fetch_model.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-all}"
suite=target/gpu-suite

build() {
  mkdir -p "$suite"
  local bin
  bin=$(cargo test --release -p susurrus-native --test cuda --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "cuda" and m.get("executable"):
        print(m["executable"])' | tail -n 1)
  [ -n "$bin" ] || { echo "test_cuda: the test binary was not built" >&2; exit 1; }
  cp "$bin" "$suite/cuda-tests"
  # The command, for the device-loss test (a new process takes over from the one that lost
  # the GPU); cargo built it beside the suite for the tests.
  cp target/release/susurrus "$suite/susurrus"
  echo "test_cuda: built $suite/cuda-tests and $suite/susurrus"
}

run() {
  [ -x "$suite/cuda-tests" ] || { echo "test_cuda: $suite/cuda-tests is missing: run 'scripts/gpu/test_cuda.sh build'" >&2; exit 1; }
  local libs=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && libs="${libs}:${d}"
  done
  for d in $(python3 -c 'import glob, site; [print(p) for s in site.getsitepackages() for p in glob.glob(s + "/nvidia/*/lib") + glob.glob(s + "/nvidia/*/*/lib")]' 2>/dev/null); do
    libs="${libs}:${d}"
  done
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}${libs}"
  # The golden tests find the fixtures and the fetch script relative to the repository the
  # binary was built in.
  "$suite/cuda-tests" --include-ignored --test-threads=1 --nocapture "${@}"
}

case "$mode" in
  build) build ;;
  run) shift; run "$@" ;;
  all) build; run ;;
  *) echo "usage: scripts/gpu/test_cuda.sh [build|run]" >&2; exit 2 ;;
esac
