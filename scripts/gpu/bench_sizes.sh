#!/usr/bin/env bash
# The size matrix (scripts/gpu/bench_sizes.py) on a GPU machine without cargo: every Whisper size
# on CUDA, wgpu with matrix units and wgpu's browser path, beside PyTorch fp16, in one call.
#
#   scripts/gpu/bench_sizes.sh build        here: the release `susurrus` and random_model binaries
#                                           (stripped), the Vulkan loader's .debs and the base
#                                           model's tokenizer.json, in target/gpu-suite/sizes
#   scripts/gpu/bench_sizes.sh run [ARGS]   there, from the repository root: bench_sizes.py with
#                                           ARGS (--sizes, --runs, --int8, --json)
#   scripts/gpu/bench_sizes.sh ops [ARGS]   there: `susurrus bench-ops ARGS`, each op of one size
#                                           timed on the backends named (--size, --backend)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=target/gpu-suite/sizes
debs=target/gpu-suite/vulkan-debs

# shellcheck source=scripts/lib/gpu_suite.sh
source scripts/lib/gpu_suite.sh

case "${1:-}" in
  build)
    mkdir -p "$dir" "$debs"
    cargo build --release -p susurrus-cli --bin susurrus
    cargo build --release -p susurrus-testkit --example random_model
    cp target/release/susurrus target/release/examples/random_model "$dir/"
    strip "$dir/susurrus" "$dir/random_model"
    cp "$(scripts/models/fetch_model.sh base | tail -n 1)/tokenizer.json" "$dir/"
    if ! ls "$debs"/libvulkan1_*.deb >/dev/null 2>&1; then
      (cd "$debs" && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    fi
    du -sh "$dir" "$debs"
    ;;
  run|ops)
    command=$1
    shift
    for f in susurrus random_model tokenizer.json; do
      [ -e "$dir/$f" ] || { echo "bench_sizes: $dir/$f is missing: run 'scripts/gpu/bench_sizes.sh build'" >&2; exit 1; }
    done
    vulkan_env "$debs"
    # CUDA's libraries (NVRTC, cuBLAS) from the toolkit or PyTorch's nvidia-* wheels.
    libs=""
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(python3 -c 'import glob, site
for s in site.getsitepackages():
    for p in glob.glob(s + "/nvidia/*/lib") + glob.glob(s + "/nvidia/*/*/lib"): print(p)' 2>/dev/null); do
      [ -d "$d" ] && libs="${libs}:${d}"
    done
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}${libs}"
    if [ "$command" = ops ]; then
      exec "$dir/susurrus" bench-ops "$@"
    fi
    cd scripts/gpu
    exec python3 bench_sizes.py "../../$dir/susurrus" "../../$dir/random_model" --tokenizer "../../$dir/tokenizer.json" "$@"
    ;;
  *)
    echo "usage: scripts/gpu/bench_sizes.sh build | run [--sizes S,...] [--runs N] [--int8] [--json OUT] | ops [--size S] [--backend B,...]" >&2
    exit 2
    ;;
esac
