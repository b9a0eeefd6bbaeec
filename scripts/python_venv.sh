#!/usr/bin/env bash
# Creates the Python environment that runs the reference generators under tests/golden/
# (faster-whisper, pinned, so committed fixtures can be regenerated bit for bit) and
# scripts/models/onnx_export.py (onnx, pinned: it writes the ONNX files, so the same pin gives the
# same bytes). Cached at ~/.cache/susurrus/venv and skipped when already present; the onnx pin has
# its own stamp, so adding or changing it pip-installs onnx alone instead of recreating the venv.
# Prints the venv's python interpreter on its last line.
#
# Safe to run several times at once and to stop at any point: the venv is made under its lock
# (scripts/lib/cache.sh), and in place, not in a temporary folder renamed afterwards, because a
# venv does not survive a move (pip writes its absolute path into bin/). What says it is
# complete is the stamps, each written once its install has finished; an install cut short
# leaves a marker behind, and the next run starts the venv again from nothing rather than
# trusting a package pip may have half written.
set -euo pipefail

venv="${HOME}/.cache/susurrus/venv"
pin="faster-whisper==1.2.1"
stamp="${venv}/.susurrus-${pin}"
onnx_pin="onnx==1.23.2"
onnx_stamp="${venv}/.susurrus-${onnx_pin}"
installing="${venv}/.susurrus-installing"

if [ ! -f "$stamp" ] || [ ! -f "$onnx_stamp" ] || [ -e "$installing" ]; then
  # shellcheck source=lib/cache.sh
  . "$(dirname "$0")/lib/cache.sh"
  cache_lock "$venv"
  if [ ! -f "$stamp" ] || [ -e "$installing" ]; then
    echo "python_venv: creating ${venv} with ${pin} (once)" >&2
    cache_discard "$venv"
    python3 -m venv "$venv"
    touch "$installing"
    "${venv}/bin/python" -m pip install --quiet --upgrade pip >&2
    "${venv}/bin/python" -m pip install --quiet "$pin" >&2
    touch "$stamp"
    rm "$installing"
  fi
  if [ ! -f "$onnx_stamp" ]; then
    echo "python_venv: installing ${onnx_pin} into ${venv} (once)" >&2
    touch "$installing"
    "${venv}/bin/python" -m pip install --quiet "$onnx_pin" >&2
    touch "$onnx_stamp"
    rm "$installing"
  fi
  cache_unlock
fi
echo "${venv}/bin/python"
