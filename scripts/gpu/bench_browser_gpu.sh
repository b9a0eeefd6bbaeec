#!/usr/bin/env bash
# The browser benchmark on a real GPU: the package's benchmark page (www/bench.html) in headless
# Chromium (Debian's, with the libraries it needs, unpacked with `dpkg -x`) on the machine's
# GPU through WebGPU, beside `susurrus bench --backend wgpu` on the same machine. Prints the
# adapter, its features, encoder ms, ms per token, RTF and GPU memory of both, and the sample
# streamed live with the Silero VAD (latency of its words to first appearance and to commit,
# the loop's real-time factor) in the page and by `susurrus bench --stream`.
#
#   scripts/gpu/bench_browser_gpu.sh prepare    here (Debian, network): Chromium's .debs and those
#                                               of the libraries it links, the Vulkan loader, the
#                                               package, susurrus, the model and the sample,
#                                               packed into parts of at most 46 MiB under
#                                               .gb/chunk-N/ (a device call carries one part
#                                               beside the ~13 MiB working tree)
#   scripts/gpu/bench_browser_gpu.sh add CHUNK  GPU machine: keep one part (calls made back to
#                                               back, every part but the last)
#   scripts/gpu/bench_browser_gpu.sh run CHUNK  GPU machine: the last part, then unpack and bench
#
# Settings (environment): BENCH_RUNS (5), BENCH_TOKENS (64), BENCH_BACKEND (webgpu), BENCH_LONG
# (3600: seconds of a long recording, the sample repeated, transcribed after the bench while the
# GPU's memory is sampled; 0: none).
# BENCH_STREAM (1: stream the sample live after the bench; 0: not).
# GPU-machine state lives in BENCH_WORK (/tmp/browser-bench).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STAGE=$ROOT/.gb
WORK=${BENCH_WORK:-/tmp/browser-bench}
CACHE=${SUSURRUS_CACHE:-$HOME/.cache/susurrus}
CHUNK_MIB=46
RUNS=${BENCH_RUNS:-5}
TOKENS=${BENCH_TOKENS:-64}
BACKEND=${BENCH_BACKEND:-webgpu}
LONG=${BENCH_LONG:-3600}
STREAM=${BENCH_STREAM:-1}
VULKAN_DEBS="libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2"

log() { echo "[browser-bench $(date +%H:%M:%S)] $*" >&2; }
die() { echo "bench_browser_gpu: $*" >&2; exit 1; }

# The packages of the shared libraries Chromium links (ldd of the installed Debian Chromium and
# its bundled libraries), without the C runtime every system has.
library_packages() {
  ldd /usr/lib/chromium/chromium /usr/lib/chromium/*.so 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
    while read -r lib; do dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true; done |
    cut -d: -f1 | sort -u | grep -v -x -E 'libc6|libgcc-s1|libstdc\+\+6'
}

prepare() {
  command -v apt-get >/dev/null || die "prepare needs apt-get (Debian)"
  [[ -x /usr/lib/chromium/chromium ]] || die "prepare reads Chromium's libraries from the installed package: run scripts/setup.sh"
  local files=$STAGE/files
  rm -rf "$STAGE"
  mkdir -p "$files/debs" "$files/model" "$files/www" "$files/vad"
  log "Chromium, its libraries and the Vulkan loader (.debs)"
  # The Vulkan loader and the GL dispatch libraries the NVIDIA driver's Vulkan ICD links.
  (cd "$files/debs" && apt-get -qq download chromium chromium-common $VULKAN_DEBS $(library_packages) 2>/dev/null)
  log "the package (scripts/web/build_web.sh) and susurrus (release)"
  "$ROOT/scripts/web/build_web.sh" >/dev/null
  (cd "$ROOT" && cargo build -q --release -p susurrus-cli)
  cp "$ROOT/target/release/susurrus" "$files/susurrus"
  strip "$files/susurrus"
  cp -r "$ROOT/www/." "$files/www/"
  cp "$ROOT/samples/sample.wav" "$files/www/sample.wav"
  local model
  model=$("$ROOT/scripts/models/fetch_model.sh" | tail -n 1)
  cp "$model"/* "$files/model/"
  cp "$("$ROOT/scripts/models/fetch_model.sh" silero-vad | tail -n 1)" "$files/vad/"
  log "packing parts of at most $CHUNK_MIB MiB"
  tar -C "$files" -cf "$STAGE/bundle.tar" .
  rm -rf "$files"
  split -b "${CHUNK_MIB}M" -d -a 2 "$STAGE/bundle.tar" "$STAGE/part-"
  rm "$STAGE/bundle.tar"
  local n=0 p
  for p in "$STAGE"/part-*; do
    n=$((n + 1))
    mkdir -p "$STAGE/chunk-$n"
    mv "$p" "$STAGE/chunk-$n/$(basename "$p")"
  done
  log "staged $n parts: carry .gb/chunk-1 .. .gb/chunk-$n, one per call ('add' each but the last, then 'run')"
}

add() {
  local chunk=$1
  [[ -d $chunk ]] || die "no such part folder: $chunk"
  mkdir -p "$WORK/parts"
  cp "$chunk"/part-* "$WORK/parts/"
  log "kept $(ls "$WORK/parts" | wc -l) parts in $WORK/parts"
}

run() {
  add "$1"
  log "unpacking"
  rm -rf "$WORK/files" "$WORK/root"
  mkdir -p "$WORK/files"
  cat "$WORK"/parts/part-* | tar -C "$WORK/files" -xf -
  local f=$WORK/files prefix=$WORK/root
  mkdir -p "$prefix/missing"
  for deb in "$f"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  # Only the libraries this system lacks come from the Debian packages.
  local lib name
  while read -r lib; do
    name=$(basename "$lib")
    ldconfig -p | grep -q " $name " || ln -sf "$lib" "$prefix/missing/$name"
  done < <(find "$prefix/usr/lib/x86_64-linux-gnu" "$prefix/lib/x86_64-linux-gnu" -name '*.so*' 2>/dev/null)
  export LD_LIBRARY_PATH="$prefix/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local chromium=$prefix/usr/lib/chromium/chromium
  local missing
  missing=$(ldd "$chromium" | grep "not found" || true)
  [[ -z $missing ]] || die "Chromium still lacks: $missing"
  # The NVIDIA driver's Vulkan ICD where containers put it (as scripts/gpu/test_wgpu_gpu.sh).
  local icd
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
    if [[ -z ${VK_DRIVER_FILES:-} && -f $icd ]]; then export VK_DRIVER_FILES=$icd; fi
  done
  export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
  chmod +x "$f/susurrus"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true

  log "serving the benchmark page and the model"
  "$f/susurrus" serve --root "$f/www" --model "$f/model" --vad-model "$f/vad/silero_vad_v6.onnx" --port 0 \
    >"$WORK/serve.log" 2>"$WORK/serve.err" &
  SERVER=$!
  trap 'kill "$SERVER" 2>/dev/null || true' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local url="" i
  for i in $(seq 50); do
    url=$(grep -m1 -o 'http://[^ ]*/$' "$WORK/serve.log" 2>/dev/null || true)
    [[ -n $url ]] && break
    sleep 0.2
  done
  [[ -n $url ]] || die "susurrus serve did not start: $(cat "$WORK/serve.err")"

  log "the page in Chromium: backend $BACKEND, $RUNS runs, $TOKENS tokens"
  python3 "$ROOT/scripts/gpu/browser_bench.py" --chromium "$chromium" \
    --url "${url}bench.html?backend=$BACKEND&runs=$RUNS&tokens=$TOKENS&long=$LONG&stream=$STREAM&vad=/vad/silero_vad_v6.onnx" \
    >"$WORK/browser.json" || true
  echo "BROWSER $(cat "$WORK/browser.json")"
  log "susurrus bench --backend wgpu, the same runs"
  "$f/susurrus" bench --backend wgpu --model "$f/model" --audio "$f/www/sample.wav" --runs "$RUNS" \
    --tokens "$TOKENS" --temperature 0 --json >"$WORK/native.json"
  python3 - "$WORK/browser.json" "$WORK/native.json" <<'PY'
import json, sys
browser = json.loads(open(sys.argv[1]).read() or '{"error": "no output"}')
native = json.load(open(sys.argv[2]))
print("NATIVE " + json.dumps({k: v for k, v in native.items() if k != "profile"}))
if "error" in browser:
    sys.exit(f"the browser benchmark failed: {browser['error']}")
a = browser["gpu"]
print(f"\nadapter: {a.get('vendor')} {a.get('architecture')} {a.get('description')} (fallback {a.get('fallback')})")
print(f"features: {', '.join(a.get('features', []))}")
print(f"browser: {browser['userAgent']}; package {browser['version']}, backend {browser['backend']}")
mem = browser["gpuMemoryMiB"]
rows = [
    ("encoder ms / 30 s window", browser["encoderMs"], native["encoder_ms_per_window"]),
    ("decoder ms / token", browser["msPerToken"], native["decoder_ms_per_token"]),
    ("decoder ms / token, one per submission", browser["msPerTokenSingle"], native["decoder_ms_per_token_single"]),
    ("step on the device, ms", browser["deviceMsPerStep"], native["decoder_device_ms_per_step"]),
    ("kernels per step", browser["stepKernels"], native["decoder_step_launches"]),
    (f"transcribe {browser['audioDurationS']:.1f} s, ms", browser["transcribeMs"], native["transcribe_ms"]),
    ("RTF", browser["rtf"], native["real_time_factor"]),
    ("load + compile, ms", browser["loadMs"], native["load_ms"]),
]
def cell(v):
    return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
print("\n| | Chromium, WebGPU | native wgpu | browser / native |\n|---|---|---|---|")
for name, b, n in rows:
    ratio = f"{b / n:.2f}x" if isinstance(b, (int, float)) and isinstance(n, (int, float)) and n else "-"
    print(f"| {name} | {cell(b)} | {cell(n)} | {ratio} |")
print(f"\nGPU memory used (whole GPU, nvidia-smi): {mem['before']} MiB before the browser, peak {mem['peak']} MiB")
live = browser.get("stream")
if live:
    print(f"\nthe sample streamed live in the page ({live['audioS']:.1f} s, VAD {live['vad']}): {live['words']} words, "
          f"{live['wer'] * 100:.1f}% word error against the page's offline transcript; seconds after a word's end:")
    print("\n| live stream | Chromium, WebGPU |\n|---|---|")
    for name, key in [("first seen p50 / p90", "firstSeen"), ("committed p50 / p90", "committed")]:
        print(f"| {name} | {live[key + 'P50']:.2f} / {live[key + 'P90']:.2f} |")
    print(f"| real-time factor | {live['rtf']:.3f} |")
long = browser.get("long")
if long:
    print(f"\nlong recording: {long['audioS']:.0f} s of audio in {long['transcribeMs'] / 1e3:.1f} s "
          f"(RTF {long['rtf']:.4f}), {long['segments']} segments, {long['words']} words")
    print("\n| audio done, s | GPU memory used, MiB |\n|---|---|")
    for t, mib, status in mem["samples"]:
        if status and status.startswith("long recording: ") and " of " in status:
            print(f"| {status.split(': ')[1].split(' of ')[0]} | {mib:.0f} |")
PY
  if [[ $STREAM == 1 ]]; then
    log "susurrus bench --backend wgpu --stream, the same clip"
    # bench --stream finds the network where scripts/models/fetch_model.sh puts it (copied beside
    # it and renamed into place, as that script would).
    local vad=$CACHE/models/silero-vad-v6/silero_vad_v6.onnx
    if [[ ! -f $vad ]]; then
      mkdir -p "$(dirname "$vad")"
      cp "$f/vad/silero_vad_v6.onnx" "$vad.tmp.$$"
      mv -f "$vad.tmp.$$" "$vad"
    fi
    "$f/susurrus" bench --backend wgpu --model "$f/model" --stream "$f/www/sample.wav"
  fi
}

case "${1:-}" in
  prepare) prepare ;;
  add) [[ $# -eq 2 ]] || die "usage: scripts/gpu/bench_browser_gpu.sh add CHUNK_DIR"; add "$2" ;;
  run) [[ $# -eq 2 ]] || die "usage: scripts/gpu/bench_browser_gpu.sh run CHUNK_DIR"; run "$2" ;;
  *) die "usage: scripts/gpu/bench_browser_gpu.sh prepare | add CHUNK_DIR | run CHUNK_DIR" ;;
esac
