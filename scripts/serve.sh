#!/usr/bin/env bash
# The web demo: installs what is missing, fetches the model and the Silero VAD network, builds
# the npm package into www/pkg and the `susurrus` command, then serves www/ with the model at
# /model/ and the network at /vad/silero_vad_v6.onnx (the page's "Skip silence") on
# http://127.0.0.1:8080/ until Ctrl-C. Extra arguments go to `susurrus serve` (e.g. --port 9000).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
model=$(./scripts/models/fetch_model.sh | tail -n 1)
vad_model=$(./scripts/models/fetch_model.sh silero-vad | tail -n 1)
./scripts/web/build_web.sh
cargo build --release --quiet -p susurrus-cli
exec ./target/release/susurrus serve --root www --model "$model" --vad-model "$vad_model" "$@"
