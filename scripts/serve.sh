#!/usr/bin/env bash
# The web demo: installs what is missing, fetches the model, builds the npm package into
# www/pkg and the `susurrus` command, then serves www/ with the model at /model/ on
# http://127.0.0.1:8080/ until Ctrl-C. Extra arguments go to `susurrus serve` (e.g. --port 9000).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
model=$(./scripts/fetch-model.sh | tail -n 1)
./scripts/build-web.sh
cargo build --release --quiet -p susurrus-native
exec ./target/release/susurrus serve --root www --model "$model" "$@"
