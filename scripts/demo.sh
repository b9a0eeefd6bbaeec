#!/usr/bin/env bash
# Builds the `susurrus` command in release mode and runs its demo (extra arguments go to it).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cargo run --release -p susurrus-native -- demo "$@"
