#!/usr/bin/env bash
# The end-to-end browser tests: the demo page (tests/e2e/page.mjs) and the npm package
# (tests/e2e/npm-package.mjs), in headless Debian Chromium through playwright-core, with the
# real whisper-tiny.en model. Run from anywhere after ./scripts/setup.sh; builds what it needs.
# The real model on Chromium's SwiftShader WebGPU adapter is slow: expect minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$(date +%s)
mkdir -p -m 700 "${XDG_RUNTIME_DIR:=/tmp/xdg-$(id -u)}"
export XDG_RUNTIME_DIR

cargo build -p susurrus-native
./scripts/build-web.sh
model=$(./scripts/fetch-model.sh | tail -n 1)

export SUSURRUS_BIN="$PWD/target/debug/susurrus"
export SUSURRUS_MODEL="$model"
# Both suites run even when the first fails, so one run reports every failure.
failed=()
node tests/e2e/page.mjs || failed+=(page)
node tests/e2e/npm-package.mjs || failed+=(npm-package)

elapsed=$(($(date +%s) - started))
if ((${#failed[@]})); then
  echo "e2e: FAILED: ${failed[*]} (${elapsed} s)" >&2
  exit 1
fi
echo "e2e: all passed in ${elapsed} s"
