#!/usr/bin/env bash
# Creates the Python environment that runs the reference generators under tests/golden/
# (faster-whisper, pinned, so committed fixtures can be regenerated bit for bit) and
# scripts/models/onnx_export.py (onnx, pinned: it writes the ONNX files, so the same pin gives the same
# bytes). Cached at ~/.cache/susurrus/venv and skipped when already present; the onnx pin has its
# own stamp, so adding or changing it pip-installs onnx alone instead of recreating the venv.
# Prints the venv's python interpreter on its last line.
set -euo pipefail

venv="${HOME}/.cache/susurrus/venv"
pin="faster-whisper==1.2.1"
stamp="${venv}/.susurrus-${pin}"
onnx_pin="onnx==1.23.2"
onnx_stamp="${venv}/.susurrus-${onnx_pin}"

if [ ! -f "$stamp" ]; then
  echo "python_venv: creating ${venv} with ${pin} (once)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "${venv}/bin/python" -m pip install --quiet --upgrade pip >&2
  "${venv}/bin/python" -m pip install --quiet "$pin" >&2
  touch "$stamp"
fi
if [ ! -f "$onnx_stamp" ]; then
  echo "python_venv: installing ${onnx_pin} into ${venv} (once)" >&2
  "${venv}/bin/python" -m pip install --quiet "$onnx_pin" >&2
  touch "$onnx_stamp"
fi
echo "${venv}/bin/python"
