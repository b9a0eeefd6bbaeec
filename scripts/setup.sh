#!/usr/bin/env bash
# Prepares a fresh machine (Debian, rustup toolchain) for building and testing Susurrus.
# Idempotent: installs only what is missing and prints nothing when there is nothing to do.
# Safe to run several times at once and to stop at any point: everything it puts under
# ~/.cache/susurrus (and the Debian packages) is made under a lock of its own, in a temporary
# folder renamed into place (scripts/lib/cache.sh).
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
#           ~/.cache/susurrus/api-venv: crates/cli/tests/serve_api.rs points it at
#           `susurrus serve --api`, as a user of the transcription API would
# The parts other than rust are mostly downloads: scripts/test.sh runs them in the
# background while the compiler works. Tools built from crates.io go to
# ~/.cache/susurrus/tools (put its bin/ on PATH, as scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${HOME}/.cache/susurrus"
tools="${cache}/tools"
mkdir -p "$cache" "$tools"
# shellcheck source=lib/cache.sh
. scripts/lib/cache.sh

missing_packages() { # sets `missing`
  missing=()
  for pkg in mesa-vulkan-drivers libvulkan1 chromium chromium-driver python3-venv; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  # Node.js and npm for the web package (kept when another Node.js is already installed).
  command -v npm >/dev/null || missing+=(nodejs npm)
}

setup_system() {
  local missing
  missing_packages
  ((${#missing[@]})) || return 0
  # apt-get refuses to run beside another (dpkg's lock): a second run waits here instead, and
  # finds the packages installed.
  cache_lock "${cache}/debian-packages"
  missing_packages
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  cache_unlock
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

tool_present() { # binary version
  [ -x "${tools}/bin/$1" ] && "${tools}/bin/$1" --version 2>/dev/null | grep -q " $2\b"
}

# cargo install into a temporary root beside the tools, whose binaries then move into
# tools/bin (a rename each), the one that says the tool is there last.
install_tool() { # crate version binary [--locked]
  local crate=$1 version=$2 binary=$3 bin
  shift 3
  tool_present "$binary" "$version" && return
  cache_lock "${tools}/${crate}"
  if ! tool_present "$binary" "$version"; then
    echo "setup: installing ${crate} ${version} (a few minutes, once)"
    cache_tmpdir "${tools}/${crate}"
    cargo install --quiet --root "$CACHE_TMP" "$@" "${crate}" --version "${version}"
    mkdir -p "${tools}/bin"
    for bin in "${CACHE_TMP}/bin/"*; do
      [ "$(basename "$bin")" = "$binary" ] || mv -f "$bin" "${tools}/bin/"
    done
    mv -f "${CACHE_TMP}/bin/${binary}" "${tools}/bin/${binary}"
  fi
  cache_unlock
}

# Node tools for the web package and its browser tests: tsc compiles the package's client
# and checks its types; playwright-core drives Debian's Chromium (never a downloaded browser).
# The folder is made whole, in a temporary folder renamed into place (node_modules/.bin links
# are relative, so it survives the move).
npm_tools_dir="${cache}/npm"
npm_tools=(typescript@5.9.3 playwright-core@1.65.1)
npm_tools_present() {
  local tool name version
  for tool in "${npm_tools[@]}"; do
    name=${tool%@*} version=${tool##*@}
    grep -qs "\"version\": \"${version}\"" "${npm_tools_dir}/node_modules/${name}/package.json" || return 1
  done
}
setup_node() {
  npm_tools_present && return
  cache_lock "$npm_tools_dir"
  if ! npm_tools_present; then
    echo "setup: installing ${npm_tools[*]} into ${npm_tools_dir}"
    cache_tmpdir "$npm_tools_dir"
    echo '{"private": true}' >"${CACHE_TMP}/package.json"
    (cd "$CACHE_TMP" && npm install --silent --no-audit --no-fund "${npm_tools[@]}")
    cache_commit "$CACHE_TMP" "$npm_tools_dir"
  fi
  cache_unlock
}

# NVRTC, CUDA's runtime compiler (from NVIDIA's PyPI wheel; a CPU library, no GPU needed): the
# host-side CUDA tests compile the whole kernel module with it. scripts/test.sh puts its folder
# on LD_LIBRARY_PATH.
nvrtc_present() { [ -f "${nvrtc_dir}/lib/libnvrtc.so.13" ]; }
setup_nvrtc() {
  local nvrtc_version=13.0.88 tmp
  local nvrtc_dir="${cache}/nvrtc/${nvrtc_version}"
  nvrtc_present && return
  cache_lock "$nvrtc_dir"
  if ! nvrtc_present; then
    echo "setup: installing NVRTC ${nvrtc_version} into ${nvrtc_dir} (90 MB download, once)"
    cache_tmpdir "$nvrtc_dir"
    tmp=$CACHE_TMP
    cache_wheel "${cache}/downloads" "nvidia-cuda-nvrtc==${nvrtc_version}" --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2010_x86_64
    python3 -m zipfile -e "$CACHE_WHEEL" "${tmp}/unpacked"
    mkdir "${tmp}/nvrtc"
    cp -r "${tmp}/unpacked/nvidia/cu13/lib" "${tmp}/nvrtc/lib"
    cache_commit "${tmp}/nvrtc" "$nvrtc_dir"
  fi
  cache_unlock
}

# The browser peers, each npm tarball unpacked into ~/.cache/susurrus/peers/npm/NAME (no
# dependency install: transformers.min.js bundles onnxruntime-web's JavaScript and needs only its
# .wasm files; shout's module embeds its wasm), and the 11 s jfk.wav clip whisper.cpp ships.
setup_peers() {
  local dir="${cache}/peers" packages=(
    @huggingface/transformers@4.3.2 onnxruntime-web@1.31.0-dev.20260914-8d85527a0
    @transcribe/shout@1.0.7 @transcribe/transcriber@3.0.1
  )
  local spec name version target tmp tarball
  for spec in "${packages[@]}"; do
    name=${spec%@*} version=${spec##*@}
    target="${dir}/npm/${name}"
    grep -qs "\"version\": \"${version}\"" "${target}/package.json" && continue
    cache_lock "$target"
    if ! grep -qs "\"version\": \"${version}\"" "${target}/package.json"; then
      echo "setup: unpacking ${spec} into ${target}"
      cache_tmpdir "$target"
      tmp=$CACHE_TMP
      tarball=$(cd "$tmp" && npm pack --silent "$spec" | tail -n 1)
      mkdir "${tmp}/package"
      tar -xzf "${tmp}/${tarball}" -C "${tmp}/package" --strip-components=1
      cache_commit "${tmp}/package" "$target"
      mkdir -p "${dir}/tarballs"
      mv -f "${tmp}/${tarball}" "${dir}/tarballs/${tarball}"
    fi
    cache_unlock
  done
  if [ ! -f "${dir}/jfk.wav" ]; then
    cache_lock "${dir}/jfk.wav"
    if [ ! -f "${dir}/jfk.wav" ]; then
      cache_npm_tarball nodejs-whisper@0.3.1 "${dir}/nodejs-whisper-0.3.1.tgz"
      cache_tmpfile "${dir}/jfk.wav"
      tar -xzf "${dir}/nodejs-whisper-0.3.1.tgz" -O package/cpp/whisper.cpp/bindings/go/samples/jfk.wav >"$CACHE_TMP"
      cache_commit "$CACHE_TMP" "${dir}/jfk.wav"
    fi
    cache_unlock
  fi
}

# Made in place under its lock, not renamed into place: a venv does not survive a move (pip
# writes its absolute path into bin/). The stamp, written last, says it is complete; without
# it the venv is made again from nothing.
setup_api() {
  local venv="${cache}/api-venv" pin="openai==3.57.0"
  [ -f "${venv}/.susurrus-${pin}" ] && return
  cache_lock "$venv"
  if [ ! -f "${venv}/.susurrus-${pin}" ]; then
    cache_discard "$venv"
    python3 -m venv "$venv"
    "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check "$pin"
    touch "${venv}/.susurrus-${pin}"
  fi
  cache_unlock
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
