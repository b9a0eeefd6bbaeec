#!/usr/bin/env bash
# The CUDA backend's GPU suite: the op harness on the GPU against the reference interpreter,
# the golden clips token for token (alone and decoded together through the batch scheduler),
# graph replay and device errors (crates/cuda/tests/gpu.rs), and the command handing a lost GPU
# to a new process (crates/cli/tests/cuda_handover.rs).
#
#   scripts/gpu/test_cuda.sh        build and run (a machine with cargo and an NVIDIA GPU)
#   scripts/gpu/test_cuda.sh build  build only: target/gpu-suite/cuda-{tests,handover} and susurrus (for a GPU
#                                   machine without cargo; take both along with the repository)
#   scripts/gpu/test_cuda.sh run    run them from the repository root
#
# The run needs the NVIDIA driver, NVRTC and cuBLAS (CUDA 13): the CUDA toolkit's libraries,
# or those of the nvidia-* Python wheels, are put on LD_LIBRARY_PATH when found. The golden
# clips need the model in ~/.cache/susurrus/models (scripts/models/fetch_model.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-all}"
suite=target/gpu-suite

# shellcheck source=scripts/lib/gpu_suite.sh
source scripts/lib/gpu_suite.sh

build() {
  mkdir -p "$suite"
  build_test susurrus-cuda gpu cuda-tests
  build_test susurrus-cli cuda_handover cuda-handover
  # The command, for the device-loss test (a new process takes over from the one that lost
  # the GPU); cargo built it beside the suite for the command's tests.
  cp target/release/susurrus "$suite/susurrus"
  echo "test_cuda: built $suite/cuda-tests, $suite/cuda-handover and $suite/susurrus"
}

run() {
  for b in cuda-tests cuda-handover; do
    [ -x "$suite/$b" ] || { echo "test_cuda: $suite/$b is missing: run 'scripts/gpu/test_cuda.sh build'" >&2; exit 1; }
  done
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
  "$suite/cuda-handover" --include-ignored --test-threads=1 --nocapture "${@}"
}

case "$mode" in
  build) build ;;
  run) shift; run "$@" ;;
  all) build; run ;;
  *) echo "usage: scripts/gpu/test_cuda.sh [build|run]" >&2; exit 2 ;;
esac
