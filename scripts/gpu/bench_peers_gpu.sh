#!/usr/bin/env bash
# The whisper.cpp peer of the GPU benchmark: whisper.cpp 1.9.1 (from the npm package
# nodejs-whisper@0.3.1) built for CUDA and for Vulkan on the GPU machine, run on Whisper tiny.en
# converted from our CTranslate2 folder by scripts/models/ggml_convert.py. See scripts/gpu/PEERS.md.
#
#   scripts/gpu/bench_peers_gpu.sh prepare          here (CPU machine, network): stage everything
#                                                   into chunks under .gm/peers/chunk-N/
#   scripts/gpu/bench_peers_gpu.sh build CHUNK_DIR  GPU machine, call 1: unpack chunk 1, start the
#                                                   CUDA and Vulkan builds in the background and
#                                                   wait for them (at most PEERS_WAIT_S, 520 s)
#   scripts/gpu/bench_peers_gpu.sh run CHUNK_DIR    GPU machine, call 2: add chunk 2 (the rest of
#                                                   the model), wait for the builds, check and
#                                                   bench both, print PEER lines
#   scripts/gpu/bench_peers_gpu.sh status           GPU machine: what is staged, built, running
#
# GPU-machine state lives in PEERS_WORK (/tmp/peers). Results: PEER / PEER_CHECK / PEER_XCHECK
# lines on stdout, every figure measured in that run (also written to $OUT/peers-results.txt
# when $OUT is set).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STAGE=${PEERS_STAGE:-$ROOT/.gm/peers}
WORK=${PEERS_WORK:-/tmp/peers}
CHUNK_MIB=${PEERS_CHUNK_MIB:-46}   # the device call carries the working tree (~13 MiB) + one chunk: 64 MiB in all
CACHE=${SUSURRUS_CACHE:-$HOME/.cache/susurrus}
PEER_CACHE=$CACHE/peers
MODEL_DIR=${PEERS_MODEL_DIR:-$CACHE/models/whisper-tiny.en-ct2}
NPM_PACKAGE=nodejs-whisper@0.3.1
TRIXIE_DEBS="glslc libshaderc1 libvulkan-dev spirv-headers"
BOOKWORM_DEBS="libvulkan1 libegl1 libglvnd0 libgl1 libglx0 libopengl0 libgles2"
BACKENDS=${PEERS_BACKENDS:-"cuda vulkan"}
JOBS=${PEERS_JOBS:-16}
RUNS=${PEERS_RUNS:-20}
THREADS=${PEERS_THREADS:-4}

log() { echo "[peers $(date +%H:%M:%S)] $*" >&2; }
die() { echo "bench_peers_gpu: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# prepare (CPU machine)
# ---------------------------------------------------------------------------------------------

venv_python() {
  local py=$CACHE/venv/bin/python
  [[ -x $py ]] || py=$("$ROOT/scripts/python_venv.sh")
  "$py" -c 'import numpy, faster_whisper, ctranslate2' 2>/dev/null || die "$py lacks numpy/faster-whisper/ctranslate2 (scripts/python_venv.sh installs them)"
  echo "$py"
}

# whisper.cpp's source, trimmed to what the CPU, CUDA and Vulkan builds and the cli/bench
# examples configure with (the examples CMakeLists adds every listed example folder).
trimmed_source() {
  local out=$1 src=$PEER_CACHE/nw/package/cpp/whisper.cpp
  if [[ ! -d $src ]]; then
    # The tarball (shared with scripts/setup.sh peers) and its unpacked copy, each under a lock
    # and renamed into place once whole (scripts/lib/cache.sh).
    . "$ROOT/scripts/lib/cache.sh"
    cache_lock "$PEER_CACHE/nw"
    if [[ ! -d $src ]]; then
      cache_npm_tarball "$NPM_PACKAGE" "$PEER_CACHE/nodejs-whisper-0.3.1.tgz"
      cache_tmpdir "$PEER_CACHE/nw"
      tar -xzf "$PEER_CACHE/nodejs-whisper-0.3.1.tgz" -C "$CACHE_TMP"
      cache_commit "$CACHE_TMP" "$PEER_CACHE/nw"
    fi
    cache_unlock
  fi
  grep -q 'project("whisper.cpp" VERSION 1.9.1)' "$src/CMakeLists.txt" || die "$src is not whisper.cpp 1.9.1"
  local keep=(
    whisper.cpp/CMakeLists.txt whisper.cpp/LICENSE whisper.cpp/cmake whisper.cpp/include whisper.cpp/src
    whisper.cpp/ggml/CMakeLists.txt whisper.cpp/ggml/cmake whisper.cpp/ggml/include
    whisper.cpp/bindings/javascript/package-tmpl.json   # configure_file'd by the top CMakeLists
  )
  local f
  for f in "$src"/ggml/src/*; do
    case $(basename "$f") in
      ggml-cann|ggml-hexagon|ggml-hip|ggml-metal|ggml-musa|ggml-opencl|ggml-openvino|ggml-rpc|ggml-sycl|\
      ggml-virtgpu|ggml-webgpu|ggml-zdnn|ggml-zendnn) ;;
      *) keep+=("whisper.cpp/ggml/src/$(basename "$f")") ;;
    esac
  done
  for f in "$src"/examples/*; do
    case $(basename "$f") in
      CMakeLists.txt|*.h|*.hpp|*.cpp|*.c|cli|bench|server|quantize|vad-speech-segments|parakeet-cli|\
      parakeet-quantize|deprecation-warning) keep+=("whisper.cpp/examples/$(basename "$f")") ;;
    esac
  done
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$(dirname "$src")" -cf - "${keep[@]}" \
    | xz -9 -T1 >"$out"
}

prepare() {
  command -v apt-get >/dev/null || die "prepare needs apt-get (Debian)"
  local py files
  py=$(venv_python)
  files=$STAGE/files
  rm -rf "$STAGE/chunk-"* "$files"
  mkdir -p "$files/debs-trixie" "$files/debs-bookworm" "$files/reference"

  log "whisper.cpp source (from $NPM_PACKAGE), trimmed"
  trimmed_source "$files/whisper.cpp-1.9.1.tar.xz"

  log "Debian trixie: $TRIXIE_DEBS (private apt lists under $PEER_CACHE/apt-trixie)"
  local a=$PEER_CACHE/apt-trixie
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$a/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$a/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$a/lists"
              -o "Dir::Cache=$a/cache" -o APT::Get::List-Cleanup=0 -o APT::Architecture=amd64 -o APT::Architectures=amd64)
  apt-get "${opts[@]}" -qq update 2>/dev/null
  (cd "$files/debs-trixie" && apt-get "${opts[@]}" -qq download $TRIXIE_DEBS 2>/dev/null)

  log "Debian bookworm Vulkan/GL loaders: $BOOKWORM_DEBS"
  local b=$PEER_CACHE/apt-bookworm
  mkdir -p "$b/lists/partial"
  local bopts=(-o APT::Architecture=amd64 -o APT::Architectures=amd64 -o "Dir::State::Lists=$b/lists")
  apt-get "${bopts[@]}" -qq update 2>/dev/null
  (cd "$files/debs-bookworm" && apt-get "${bopts[@]}" -qq download $BOOKWORM_DEBS 2>/dev/null)

  log "sample clip at 16 kHz, reference windows (faster-whisper mel, CTranslate2 greedy ids)"
  "$py" "$ROOT/scripts/gpu/bench_peers.py" sample "$ROOT/samples/sample.wav" "$files/sample-16k.wav"
  "$py" "$ROOT/scripts/gpu/bench_peers.py" reference "$files/reference" "$MODEL_DIR"

  log "model: $MODEL_DIR -> ggml"
  "$py" "$ROOT/scripts/models/ggml_convert.py" "$MODEL_DIR" "$files/ggml-tiny.en.bin"

  log "packing chunks of at most $CHUNK_MIB MiB"
  "$py" "$ROOT/scripts/gpu/bench_peers.py" pack "$STAGE" "$CHUNK_MIB"
  local tree
  tree=$(cd "$ROOT" && { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  log "working tree that travels with each call: $((tree / 1048576)) MiB (+ one chunk must stay under 64 MiB)"
  du -sb "$STAGE"/chunk-* >&2
}

# ---------------------------------------------------------------------------------------------
# GPU machine
# ---------------------------------------------------------------------------------------------

# Copy a carried chunk into WORK and unpack what it completes (idempotent).
stage() {
  local chunk=$1
  [[ -d $chunk ]] || die "no chunk folder $chunk (carry it: .gm/peers/chunk-N)"
  (cd "$chunk" && sha256sum -c --quiet SHA256SUMS) || die "checksum mismatch in $chunk"
  mkdir -p "$WORK/in"
  cp -f "$chunk"/* "$WORK/in/"
  # The background builds use copies: the repo's copy on this machine may be refreshed by the
  # next call while they run.
  cp -f "$ROOT/scripts/gpu/bench_peers_gpu.sh" "$ROOT/scripts/gpu/whisper_cpp_bench.cpp" "$WORK/"
  log "staged $chunk ($(du -sh "$chunk" | cut -f1))"
  if [[ -f $WORK/in/build.tar && ! -f $WORK/unpacked ]]; then
    tar -xf "$WORK/in/build.tar" -C "$WORK"
    mkdir -p "$WORK/src" "$WORK/vkprefix"
    if command -v xz >/dev/null; then
      tar -xJf "$WORK/files/whisper.cpp-1.9.1.tar.xz" -C "$WORK/src"
    else  # Python's lzma, should xz-utils be missing
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$WORK/files/whisper.cpp-1.9.1.tar.xz" "$WORK/src"
    fi
    local d
    for d in "$WORK"/files/debs-trixie/*.deb; do dpkg-deb -x "$d" "$WORK/vkprefix"; done
    touch "$WORK/unpacked"
    log "unpacked source and debs into $WORK"
  fi
  local parts total
  if [[ ! -f $WORK/files/ggml-tiny.en.bin ]] && [[ -f $WORK/in/MODEL_PARTS ]]; then
    total=$(wc -l <"$WORK/in/MODEL_PARTS")
    parts=$(cd "$WORK/in" && ls ggml-tiny.en.bin.part-* 2>/dev/null | wc -l)
    if [[ $parts == "$total" ]]; then
      mkdir -p "$WORK/files"
      (cd "$WORK/in" && cat $(cat MODEL_PARTS) >"$WORK/files/ggml-tiny.en.bin.tmp")
      (cd "$WORK/files" && echo "$(cat "$WORK/in/MODEL_SHA256")  ggml-tiny.en.bin.tmp" | sha256sum -c --quiet) \
        || die "assembled model has the wrong sha256"
      mv "$WORK/files/ggml-tiny.en.bin.tmp" "$WORK/files/ggml-tiny.en.bin"
      rm -f "$WORK"/in/ggml-tiny.en.bin.part-*
      log "model assembled ($parts parts, sha256 ok)"
    else
      log "model: $parts of $total parts here"
    fi
  fi
}

# The Vulkan and GL loaders (Debian bookworm) unpacked to /, as the repo does on this machine.
vulkan_loader() {
  if ! ldconfig -p | grep -q 'libvulkan.so.1 ' || ! ldconfig -p | grep -q 'libGLdispatch.so.0 '; then
    local d
    for d in "$WORK"/files/debs-bookworm/*.deb; do dpkg -x "$d" /; done
    ldconfig
    log "unpacked the bookworm Vulkan/GL loaders to /"
  fi
}

vulkan_env() {
  local icd
  for icd in ${VK_DRIVER_FILES:-} /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
             /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [[ -f $icd ]]; then export VK_DRIVER_FILES=$icd; break; fi
  done
  local egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  [[ -f $egl ]] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
  return 0
}

configure_args() {
  local backend=$1 p=$WORK/vkprefix
  local common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_POLICY_VERSION_MINIMUM=3.5
                -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_SERVER=OFF -DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF
                -DGGML_CCACHE=OFF)
  case $backend in
    cuda)
      local nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
      echo "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${PEERS_CUDA_ARCH:-90} -DCMAKE_CUDA_COMPILER=$nvcc ;;
    vulkan)
      echo "${common[@]}" -DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR=$p/usr/include \
        -DVulkan_LIBRARY=${PEERS_VULKAN_LIBRARY:-/usr/lib/x86_64-linux-gnu/libvulkan.so.1} \
        -DVulkan_GLSLC_EXECUTABLE=${PEERS_GLSLC:-$p/usr/bin/glslc} \
        -DSPIRV-Headers_DIR=$p/usr/share/cmake/SPIRV-Headers ;;
    cpu) echo "${common[@]}" ;;
    *) die "unknown backend $backend" ;;
  esac
}

# One backend's build, run in the background: configure, the two whisper.cpp programs, and our
# timing harness linked against the same libraries. Writes build-BACKEND.{log,rc,seconds}.
build_one() {
  local backend=$1
  local dir=$WORK/build-$backend started=$SECONDS src=$WORK/src/whisper.cpp
  export LD_LIBRARY_PATH=$WORK/vkprefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # glslc's libshaderc
  local rc=0
  {
    # shellcheck disable=SC2046
    cmake -S "$src" -B "$dir" $(configure_args "$backend") &&
    cmake --build "$dir" -j "$JOBS" --target whisper-cli whisper-bench &&
    c++ -O2 -std=c++17 "$WORK/whisper_cpp_bench.cpp" -I"$src/include" -I"$src/ggml/include" \
      -L"$dir/bin" -lwhisper -lggml -lggml-base -Wl,-rpath,"$dir/bin" -o "$dir/bin/whisper_cpp_bench"
  } >"$WORK/build-$backend.log" 2>&1 || rc=$?
  echo $((SECONDS - started)) >"$WORK/build-$backend.seconds"
  echo $rc >"$WORK/build-$backend.rc"
}

start_builds() {
  [[ -f $WORK/unpacked ]] || die "chunk 1 not staged yet"
  local b
  for b in $BACKENDS; do
    [[ $b == vulkan ]] && { vulkan_loader; }
    if [[ -f $WORK/build-$b.rc || -f $WORK/build-$b.pid ]] && { [[ -f $WORK/build-$b.rc ]] || kill -0 "$(cat "$WORK/build-$b.pid")" 2>/dev/null; }; then
      continue
    fi
    rm -f "$WORK/build-$b.rc"
    PEERS_WORK=$WORK setsid nohup bash "$WORK/bench_peers_gpu.sh" _build_one "$b" >/dev/null 2>&1 </dev/null &
    echo $! >"$WORK/build-$b.pid"
    log "started the $b build in the background (pid $!, -j$JOBS, log $WORK/build-$b.log)"
  done
}

wait_builds() {
  local start=$SECONDS deadline=$((SECONDS + $1)) b pending
  while :; do
    pending=""
    for b in $BACKENDS; do [[ -f $WORK/build-$b.rc ]] || pending+=" $b"; done
    [[ -z $pending ]] && break
    if ((SECONDS >= deadline)); then log "still building:$pending"; return 1; fi
    sleep 10
    if (( (SECONDS - start) % 60 < 10 )); then
      for b in $pending; do log "$b: $(grep -o '^\[[0-9]*/[0-9]*\]' "$WORK/build-$b.log" 2>/dev/null | tail -1 || true)"; done
    fi
  done
  for b in $BACKENDS; do
    log "$b build: exit $(cat "$WORK/build-$b.rc") after $(cat "$WORK/build-$b.seconds") s"
    [[ $(cat "$WORK/build-$b.rc") == 0 ]] || tail -30 "$WORK/build-$b.log" >&2
  done
}

status() {
  ls -la "$WORK" "$WORK/in" 2>/dev/null || echo "nothing staged in $WORK"
  local b
  for b in $BACKENDS; do
    if [[ -f $WORK/build-$b.rc ]]; then echo "$b: exit $(cat "$WORK/build-$b.rc") after $(cat "$WORK/build-$b.seconds") s"
    elif [[ -f $WORK/build-$b.log ]]; then echo "$b: building: $(grep -o '^\[[0-9]*/[0-9]*\]' "$WORK/build-$b.log" | tail -1)"
    else echo "$b: not started"; fi
  done
}

bench_one() {
  local b=$1 bin=$WORK/build-$1/bin model=$WORK/files/ggml-tiny.en.bin out=$WORK/results-$1
  mkdir -p "$out"
  if [[ ! -f $WORK/build-$b.rc || $(cat "$WORK/build-$b.rc") != 0 ]]; then
    echo "PEER system=whisper.cpp-1.9.1 backend=$b error=build_failed_or_unfinished"
    return 0
  fi
  local gpu=""
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
  [[ $b == vulkan ]] && vulkan_env
  log "$b: which device whisper.cpp uses"
  "$bin/whisper-cli" -m "$model" -f "$WORK/files/sample-16k.wav" -t "$THREADS" -bs 1 >"$out/cli.txt" 2>"$out/cli.err" || true
  grep -E "ggml_cuda_init|Device 0:|ggml_vulkan: [0-9]|whisper_backend_init_gpu" "$out/cli.err" | sort -u | head -8 \
    | sed "s/^/PEER_DEVICE backend=$b /"
  echo "PEER_CLI backend=$b text=$(sed 's/^\[[^]]*\] *//' "$out/cli.txt" | tr '\n' ' ' | tr -s ' ')"
  if ! grep -qE "whisper_backend_init_gpu: using (CUDA|Vulkan)[0-9]+ backend" "$out/cli.err"; then
    echo "PEER system=whisper.cpp-1.9.1 backend=$b error=no_gpu_device_found_see_$out/cli.err"
    tail -20 "$out/cli.err" >&2
    return 0
  fi
  log "$b: conversion/numerics check against CTranslate2 (flash attention on, then off)"
  python3 "$ROOT/scripts/gpu/bench_peers.py" check "$b" "$bin/whisper_cpp_bench" "$model" "$WORK/files/reference" --threads "$THREADS" || true
  python3 "$ROOT/scripts/gpu/bench_peers.py" check "$b" "$bin/whisper_cpp_bench" "$model" "$WORK/files/reference" --threads "$THREADS" --no-fa || true
  log "$b: timing harness ($RUNS runs)"
  if "$bin/whisper_cpp_bench" "$model" "$WORK/files/sample-16k.wav" --runs "$RUNS" --threads "$THREADS" >"$out/bench.txt" 2>"$out/bench.err"; then
    python3 "$ROOT/scripts/gpu/bench_peers.py" result "$b" "$out/bench.txt" "$gpu" "$out/bench.err"
  else
    echo "PEER system=whisper.cpp-1.9.1 backend=$b error=harness_failed"; tail -20 "$out/bench.err" >&2
  fi
  log "$b: whisper-bench (whisper.cpp's own benchmark, cross-check)"
  "$bin/whisper-bench" -m "$model" -t "$THREADS" >"$out/whisper-bench.txt" 2>&1 || true
  python3 "$ROOT/scripts/gpu/bench_peers.py" whisper-bench "$b" "$out/whisper-bench.txt" || true
}

run_benches() {
  [[ -f $WORK/files/ggml-tiny.en.bin ]] || die "the model is not assembled yet (stage every chunk)"
  wait_builds "${PEERS_WAIT_S:-420}" || true
  local b
  {
    for b in $BACKENDS; do bench_one "$b"; done
  } | tee "$WORK/results.txt"
  if [[ -n ${OUT:-} ]]; then
    cp "$WORK/results.txt" "$OUT/peers-results.txt"
    for b in $BACKENDS; do [[ -f $WORK/build-$b.log ]] && tail -c 200000 "$WORK/build-$b.log" >"$OUT/peers-build-$b.log"; done
  fi
  return 0
}

case ${1:-} in
  prepare) prepare ;;
  build)
    [[ $# -ge 2 ]] && stage "$2"
    start_builds
    wait_builds "${PEERS_WAIT_S:-520}" || log "builds go on in the background: call '$0 run CHUNK_DIR' within 30 s"
    ;;
  run)
    [[ $# -ge 2 ]] && stage "$2"
    start_builds
    run_benches
    ;;
  stage) stage "${2:?chunk folder}" ;;
  status) status ;;
  _build_one)
    # Whatever happens, leave an exit status for wait_builds.
    trap '[[ -f $WORK/build-$2.rc ]] || { echo 98 >"$WORK/build-$2.rc"; echo 0 >"$WORK/build-$2.seconds"; }' EXIT
    build_one "$2" ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
