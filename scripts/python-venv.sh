#!/usr/bin/env bash
# Creates the Python environment that runs the reference generators under tests/golden/
# (faster-whisper, pinned, so committed fixtures can be regenerated bit for bit).
# Cached at ~/.cache/susurrus/venv and skipped when already present. Prints the venv's python
# interpreter on its last line.
set -euo pipefail

venv="${HOME}/.cache/susurrus/venv"
pin="faster-whisper==1.2.1"
stamp="${venv}/.susurrus-${pin}"

if [ ! -f "$stamp" ]; then
  echo "python-venv: creating ${venv} with ${pin} (once)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "${venv}/bin/python" -m pip install --quiet --upgrade pip >&2
  "${venv}/bin/python" -m pip install --quiet "$pin" >&2
  touch "$stamp"
fi
echo "${venv}/bin/python"
