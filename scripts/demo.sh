#!/usr/bin/env bash
# The main job on a fresh machine: fetches Whisper tiny.en once (scripts/models/fetch_model.sh),
# builds the `susurrus` command and transcribes
# the bundled sample (samples/sample.wav, our own espeak-ng speech) on the fastest backend
# here, then says how to open the web demo (scripts/serve.sh). Extra arguments go to `susurrus transcribe`
# (e.g. `--format srt`, `--backend wgpu`). It installs only what that needs: the test tools
# (Chromium, wasm tools, NVRTC, ...) are scripts/setup.sh's, run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Vulkan loader (probed by --backend auto) wants a private runtime folder.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-${HOME}/.cache/susurrus/xdg}"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
model=$(./scripts/models/fetch_model.sh | tail -n 1)
cargo build --release --quiet -p susurrus-cli
./target/release/susurrus transcribe --model "$model" "$@" samples/sample.wav
cat <<'NOTE'

Web demo (transcription in the browser, on WebGPU or the CPU, in a worker):
  ./scripts/serve.sh          # builds the npm package into www/pkg, serves www/ and the model
  then open http://127.0.0.1:8080/ in Chrome or Edge (WebGPU), or any browser (CPU)
More: ./target/release/susurrus --help, and the README's "Commands" and "Web" sections.
NOTE
