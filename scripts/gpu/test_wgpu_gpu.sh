#!/usr/bin/env bash
# The wgpu backend's GPU suite: the op harness (every op against the reference interpreter,
# on each kernel family the adapter has: matrix units, f16 weights, the f32 path), the
# executor's tests, and every tiny.en golden clip token for token on each family, on a real
# GPU's Vulkan adapter. CI runs the same tests on lavapipe, where the matrix-unit kernels
# (cooperative matrices) do not exist and the long clips would take an hour.
#
#   scripts/gpu/test_wgpu_gpu.sh        build and run (a machine with cargo, network and a GPU)
#   scripts/gpu/test_wgpu_gpu.sh build  build only: target/gpu-suite/wgpu-* and the Vulkan
#                                       loader's .debs (for a GPU machine without cargo; take
#                                       target/gpu-suite along with the repository)
#   scripts/gpu/test_wgpu_gpu.sh run    run them from the repository root
#
# The run needs the GPU's Vulkan driver. Where the Vulkan loader is missing (the GPU machine:
# Ubuntu with the NVIDIA driver but no libvulkan1), the carried Debian .debs are unpacked to /
# (as root). The golden clips need tiny.en in ~/.cache/susurrus/models (scripts/models/fetch_model.sh)
# and find their fixtures relative to the repository the binaries were built in: run from a
# checkout at that path (or a symlink to it). The multilingual and int8 golden runs on wgpu
# stay in CI (lavapipe): they take no kernel the op harness does not check here.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-all}"
suite=target/gpu-suite
debs="$suite/vulkan-debs"

# shellcheck source=scripts/lib/gpu_suite.sh
source scripts/lib/gpu_suite.sh

build() {
  mkdir -p "$suite" "$debs"
  build_test susurrus-testkit conformance conformance
  build_test susurrus-wgpu executor wgpu-executor
  if ! ls "$debs"/libvulkan1_*.deb >/dev/null 2>&1; then
    (cd "$debs" && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  fi
  echo "test_wgpu_gpu: built $suite/conformance, $suite/wgpu-executor and $debs"
}

run() {
  for b in conformance wgpu-executor; do
    [ -x "$suite/$b" ] || { echo "test_wgpu_gpu: $suite/$b is missing: run 'scripts/gpu/test_wgpu_gpu.sh build'" >&2; exit 1; }
  done
  vulkan_env "$debs"
  "$suite/conformance" --test-threads=1 --nocapture ops::
  # Each executor test in a process of its own: the NVIDIA driver (580, H100) refuses the
  # 31st Vulkan instance of a process ("vulkan drivers/libraries could not be loaded"; a loop
  # that opens, compiles on, runs and drops a backend fails there with nothing leaked), and
  # these tests open more than 30 backends together.
  local failed=0
  for t in $("$suite/wgpu-executor" --list 2>/dev/null | sed -n 's/: test$//p'); do
    "$suite/wgpu-executor" --exact "$t" --quiet || failed=1
  done
  [ "$failed" = 0 ] || { echo "test_wgpu_gpu: an executor test failed" >&2; exit 1; }
  "$suite/conformance" --include-ignored --test-threads=1 --nocapture golden::gpu_every_kernel_family
  "$suite/conformance" --test-threads=1 --nocapture golden::wgpu_with_small_buffers
}

case "$mode" in
  build) build ;;
  run) run ;;
  all) build; run ;;
  *) echo "usage: scripts/gpu/test_wgpu_gpu.sh [build|run]" >&2; exit 2 ;;
esac
