#!/usr/bin/env bash
# Prepares a fresh machine (Debian, rustup toolchain) for building and testing Susurrus.
# Idempotent: installs only what is missing and prints nothing when there is nothing to do.
#
#   scripts/setup.sh [PART...]    PART: rust system node nvrtc fuzz peers api (default: all but fuzz,
#                                 peers, api)
#
# - rust:   the rustfmt and clippy components, the wasm32 and aarch64-apple-darwin targets,
#           wasm-pack and wasm-bindgen-cli (built from crates.io: minutes of CPU, once), and
#           for the web package's threaded build the nightly Rust fuzz/rust-toolchain.toml pins
#           with std's sources and the wasm32 target
# - fuzz:   that nightly and cargo-fuzz, for scripts/fuzz.sh only, which asks for it (not part
#           of the default)
# - system: Debian packages: Mesa's software Vulkan driver (lavapipe) for the native GPU tests,
#           Chromium and its WebDriver for the browser tests, Node.js and npm, Python's venv
#           (CTranslate2's quantizer makes the int8 test model)
# - node:   TypeScript and playwright-core for the web package and its browser tests
# - nvrtc:  NVIDIA's NVRTC library, for compiling the CUDA kernels in the host-side tests
# - peers:  the browser peers tests/e2e/peers.mjs measures Susurrus against (transformers.js with
#           the onnxruntime-web it was built with, whisper.cpp's wasm build @transcribe/shout and
#           its FileTranscriber), unpacked from their npm tarballs without dependencies (the
#           browser bundles need none), and whisper.cpp's jfk.wav sample from nodejs-whisper's
#           tarball (public audio: fetched, never committed); not part of the default
# - api:    OpenAI's Python client library (pinned) in a venv of its own at
#           ~/.cache/susurrus/api-venv: crates/native/tests/serve_api.rs points it at
#           `susurrus serve --api`, as a user of the transcription API would
# The parts other than rust are mostly downloads: scripts/test.sh runs them in the
# background while the compiler works. Tools built from crates.io go to
# ~/.cache/susurrus/tools (put its bin/ on PATH, as scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${HOME}/.cache/susurrus"
tools="${cache}/tools"
mkdir -p "$cache" "$tools"

setup_system() {
  local missing=()
  for pkg in mesa-vulkan-drivers libvulkan1 chromium chromium-driver python3-venv; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  # Node.js and npm for the web package (kept when another Node.js is already installed).
  command -v npm >/dev/null || missing+=(nodejs npm)
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

setup_rust() {
  local installed_components installed_targets
  installed_components=$(rustup component list --installed)
  for component in rustfmt clippy; do
    if ! grep -q "^${component}" <<<"$installed_components"; then
      echo "setup: adding rustup component ${component}"
      rustup component add "$component"
    fi
  done
  # wasm32 for the browser package; aarch64-apple-darwin to check that the native crate (Metal)
  # keeps compiling for macOS.
  installed_targets=$(rustup target list --installed)
  for target in wasm32-unknown-unknown aarch64-apple-darwin; do
    if ! grep -qx "$target" <<<"$installed_targets"; then
      echo "setup: adding rustup target ${target}"
      rustup target add "$target"
    fi
  done
  # wasm-pack drives the browser tests; wasm-bindgen-cli must match the wasm-bindgen in Cargo.lock.
  install_tool wasm-pack 0.15.1 wasm-pack --locked
  local bindgen_version
  bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
  install_tool wasm-bindgen-cli "$bindgen_version" wasm-bindgen
  setup_nightly rust-src
  if ! rustup target list --toolchain "$(nightly)" --installed | grep -qx wasm32-unknown-unknown; then
    echo "setup: adding rustup target wasm32-unknown-unknown to $(nightly)"
    rustup target add --toolchain "$(nightly)" wasm32-unknown-unknown
  fi
}

# The nightly Rust fuzz/rust-toolchain.toml pins: cargo fuzz needs one (sanitizers, coverage
# instrumentation), and so does the web package's threaded build (std rebuilt with atomics).
nightly() {
  awk -F'"' '/^channel/ { print $2 }' fuzz/rust-toolchain.toml
}

# Installs that nightly with the fewest components, and `$@`'s components.
setup_nightly() {
  if ! rustup toolchain list | grep -q "^$(nightly)-"; then
    echo "setup: installing the Rust toolchain $(nightly)"
    rustup toolchain install --profile minimal "$(nightly)"
  fi
  local component
  for component in "$@"; do
    if ! rustup component list --toolchain "$(nightly)" --installed | grep -q "^${component}"; then
      echo "setup: adding rustup component ${component} to $(nightly)"
      rustup component add --toolchain "$(nightly)" "$component"
    fi
  done
}

install_tool() { # crate version binary [--locked]
  local crate=$1 version=$2 binary=$3
  shift 3
  if [ -x "${tools}/bin/${binary}" ] && "${tools}/bin/${binary}" --version 2>/dev/null | grep -q " ${version}\b"; then
    return
  fi
  echo "setup: installing ${crate} ${version} (a few minutes, once)"
  cargo install --quiet --root "$tools" "$@" "${crate}" --version "${version}" --force
}

# Node tools for the web package and its browser tests: tsc compiles the package's client
# and checks its types; playwright-core drives Debian's Chromium (never a downloaded browser).
setup_node() {
  local npm_dir="${cache}/npm"
  local npm_tools=(typescript@5.9.3 playwright-core@1.65.1)
  npm_have() { # name@version
    local name=${1%@*} version=${1##*@}
    [ -f "${npm_dir}/node_modules/${name}/package.json" ] &&
      grep -q "\"version\": \"${version}\"" "${npm_dir}/node_modules/${name}/package.json"
  }
  for tool in "${npm_tools[@]}"; do
    if ! npm_have "$tool"; then
      echo "setup: installing ${npm_tools[*]} into ${npm_dir}"
      mkdir -p "$npm_dir"
      [ -f "${npm_dir}/package.json" ] || echo '{"private": true}' >"${npm_dir}/package.json"
      (cd "$npm_dir" && npm install --silent --no-audit --no-fund "${npm_tools[@]}")
      break
    fi
  done
}

# NVRTC, CUDA's runtime compiler (from NVIDIA's PyPI wheel; a CPU library, no GPU needed): the
# host-side CUDA tests compile the whole kernel module with it. scripts/test.sh puts its folder
# on LD_LIBRARY_PATH.
setup_nvrtc() {
  local nvrtc_version=13.0.88
  local nvrtc_dir="${cache}/nvrtc/${nvrtc_version}"
  if [ ! -f "${nvrtc_dir}/lib/libnvrtc.so.13" ]; then
    echo "setup: installing NVRTC ${nvrtc_version} into ${nvrtc_dir} (90 MB download, once)"
    local downloads="${cache}/downloads" unpacked
    mkdir -p "$downloads"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux2010_x86_64 \
      -d "$downloads" "nvidia-cuda-nvrtc==${nvrtc_version}"
    unpacked=$(mktemp -d)
    python3 -m zipfile -e "$downloads"/nvidia_cuda_nvrtc-"${nvrtc_version}"-*.whl "$unpacked"
    rm -rf "${nvrtc_dir}.partial"
    mkdir -p "${nvrtc_dir}.partial"
    cp -r "${unpacked}/nvidia/cu13/lib" "${nvrtc_dir}.partial/lib"
    rm -rf "$unpacked"
    mv "${nvrtc_dir}.partial" "$nvrtc_dir"
  fi
}

# The browser peers, each npm tarball unpacked into ~/.cache/susurrus/peers/npm/NAME (no
# dependency install: transformers.min.js bundles onnxruntime-web's JavaScript and needs only its
# .wasm files; shout's module embeds its wasm), and the 11 s jfk.wav clip whisper.cpp ships.
setup_peers() {
  local dir="${cache}/peers" packages=(
    @huggingface/transformers@4.3.2 onnxruntime-web@1.31.0-dev.20260914-8d85527a0
    @transcribe/shout@1.0.7 @transcribe/transcriber@3.0.1
  )
  local spec name version tarball
  for spec in "${packages[@]}"; do
    name=${spec%@*} version=${spec##*@}
    if ! grep -qs "\"version\": \"${version}\"" "${dir}/npm/${name}/package.json"; then
      echo "setup: unpacking ${spec} into ${dir}/npm/${name}"
      mkdir -p "${dir}/tarballs"
      tarball=$(cd "${dir}/tarballs" && npm pack --silent "$spec" | tail -n 1)
      rm -rf "${dir}/npm/${name}"
      mkdir -p "${dir}/npm/${name}"
      tar -xzf "${dir}/tarballs/${tarball}" -C "${dir}/npm/${name}" --strip-components=1
    fi
  done
  if [ ! -f "${dir}/jfk.wav" ]; then
    [ -f "${dir}/nodejs-whisper-0.3.1.tgz" ] || (cd "$dir" && npm pack --silent nodejs-whisper@0.3.1 >/dev/null)
    tar -xzf "${dir}/nodejs-whisper-0.3.1.tgz" -O package/cpp/whisper.cpp/bindings/go/samples/jfk.wav >"${dir}/jfk.wav.partial"
    mv "${dir}/jfk.wav.partial" "${dir}/jfk.wav"
  fi
}

setup_api() {
  local venv="${cache}/api-venv" pin="openai==3.57.0"
  if [ ! -f "${venv}/.susurrus-${pin}" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check "$pin"
    touch "${venv}/.susurrus-${pin}"
  fi
}

setup_fuzz() {
  setup_nightly
  install_tool cargo-fuzz 0.13.2 cargo-fuzz --locked
}

parts=("$@")
((${#parts[@]})) || parts=(system rust node nvrtc)
for part in "${parts[@]}"; do
  case "$part" in
    system | rust | node | nvrtc | fuzz | peers | api) "setup_${part}" ;;
    *)
      echo "setup: unknown part '${part}' (rust, system, node, nvrtc, fuzz, peers, api)" >&2
      exit 2
      ;;
  esac
done
