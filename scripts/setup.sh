#!/usr/bin/env bash
# Prepares a fresh machine (Debian, rustup toolchain) for building and testing Susurrus.
# Idempotent: installs only what is missing and prints nothing when there is nothing to do.
set -euo pipefail

cache="${HOME}/.cache/susurrus"
mkdir -p "$cache"

installed_components=$(rustup component list --installed)
for component in rustfmt clippy; do
  if ! grep -q "^${component}" <<<"$installed_components"; then
    echo "setup: adding rustup component ${component}"
    rustup component add "$component"
  fi
done

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding rustup target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi
