#!/usr/bin/env bash
# The project's one test command: formatting, lints, every native test (the GPU ones on Mesa
# lavapipe), the wasm build, the browser suite (WebGPU in headless Chromium) and the
# end-to-end browser tests of the demo page and the npm package.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s ==\n' "$*"; }

step setup
./scripts/setup.sh
export PATH="${HOME}/.cache/susurrus/tools/bin:${PATH}"
# NVRTC for the host-side CUDA tests (installed by setup.sh; no GPU needed).
export LD_LIBRARY_PATH="${HOME}/.cache/susurrus/nvrtc/13.0.88/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
# wgpu's Vulkan loader warns without a private runtime directory.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-${HOME}/.cache/susurrus/xdg}"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

step "cargo fmt --all --check"
cargo fmt --all --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p susurrus-web --target wasm32-unknown-unknown --all-targets -- -D warnings

step "cargo check -p susurrus-native --target aarch64-apple-darwin (macOS, Metal)"
cargo check -p susurrus-native --target aarch64-apple-darwin

step "cargo test --workspace"
cargo test --workspace

step "browser: wasm-pack test --headless --chrome (crates/web)"
(cd crates/web && WASM_BINDGEN_TEST_TIMEOUT=900 wasm-pack test --mode no-install --headless --chrome \
  --chromedriver /usr/bin/chromedriver)

step "browser end to end: the demo page and the npm package with the real model (tests/e2e)"
./tests/e2e/run.sh

step "all passed"
