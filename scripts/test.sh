#!/usr/bin/env bash
# The project's one test command: formatting, lints, every test, and the wasm build.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s ==\n' "$*"; }

step setup
./scripts/setup.sh

step "cargo fmt --all --check"
cargo fmt --all --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test --workspace"
cargo test --workspace

step "cargo check -p susurrus-web --target wasm32-unknown-unknown"
cargo check -p susurrus-web --target wasm32-unknown-unknown

step "all passed"
