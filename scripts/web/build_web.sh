#!/usr/bin/env bash
# Builds the npm package `susurrus` into target/npm/susurrus (wasm-pack for the wasm-bindgen
# module, tsc for the main-thread client and the worker, crates/web/js) and copies it to
# www/pkg, where the demo page imports it. Run scripts/setup.sh first (tools on PATH).
#
# The module is built twice: the plain build (stable Rust), and in threads/ the threaded one
# (shared memory: atomics, and std rebuilt with them, which needs the nightly compiler that
# fuzz/rust-toolchain.toml pins, with rust-src; its own target folder, target/threads, so the
# two builds do not rebuild each other). The worker loads the threaded build where the page is
# cross-origin isolated, the plain one elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="${HOME}/.cache/susurrus/tools/bin:${PATH}"
tsc="${HOME}/.cache/susurrus/npm/node_modules/.bin/tsc"
out=target/npm/susurrus

rm -rf "$out"
nightly=$(awk -F'"' '/^channel/ { print $2 }' fuzz/rust-toolchain.toml)
# Shared memory, imported (each worker instantiates the module on the same memory), up to
# WebAssembly's 4 GiB, and the thread-local storage symbols wasm-bindgen sets up per thread.
threads_link_args() {
  local args=(--shared-memory --import-memory --max-memory=4294967296 --export=__wasm_init_tls
    --export=__tls_size --export=__tls_align --export=__tls_base)
  printf -- '-C link-arg=%s ' "${args[@]}"
}
# The threaded build runs beside the plain one: its own target folder, so neither waits for
# the other's lock (nor for a test build holding target/'s). It runs in a process group of its
# own (job control on while it starts), stopped whole if this script exits before it ends
# (a failure, Ctrl-C, TERM).
threaded=""
trap '[ -z "$threaded" ] || kill -TERM -- "-$threaded" 2>/dev/null || true' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
set -m
(cd crates/web && RUSTUP_TOOLCHAIN="$nightly" CARGO_TARGET_DIR=../../target/threads \
  RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128 $(threads_link_args)" \
  wasm-pack --quiet build --mode no-install --target web --release \
  --out-dir "../../${out}/threads" --out-name susurrus . -- -Z build-std=panic_abort,std) </dev/null &
threaded=$!
set +m
plain_rc=0 threaded_rc=0
(cd crates/web && wasm-pack --quiet build --mode no-install --target web --release \
  --out-dir "../../${out}" --out-name susurrus) || plain_rc=$?
wait "$threaded" || threaded_rc=$?
threaded=""
((plain_rc == 0)) || exit 1
((threaded_rc == 0)) || exit "$threaded_rc"
# wasm-pack's own .gitignore would hide the package from git-based tools; package.json says
# which files ship.
rm -f "${out}/.gitignore" "${out}/threads/.gitignore" "${out}/threads/package.json"
# wasm-bindgen's classes declare [Symbol.dispose]; name the lib that declares it, so consumers
# type-check with any lib setting (e.g. ["dom", "es2022"]).
sed -i '1i /// <reference lib="esnext.disposable" />' "${out}/susurrus.d.ts" "${out}/threads/susurrus.d.ts"

# The modules ship without their name section (function names for stack traces: 0.8 MB of
# each module, 0.15 MB gzipped), as wasm-opt would drop it; a panic's message and place still
# reach the console.
node - "${out}/susurrus_bg.wasm" "${out}/threads/susurrus_bg.wasm" <<'JS'
const fs = require("fs");
for (const path of process.argv.slice(2)) {
  const wasm = fs.readFileSync(path);
  const leb = (at) => {
    let value = 0, shift = 0, byte;
    do { byte = wasm[at++]; value += (byte & 0x7f) * 2 ** shift; shift += 7; } while (byte & 0x80);
    return [value, at];
  };
  const kept = [wasm.subarray(0, 8)];
  for (let at = 8; at < wasm.length; ) {
    const [size, body] = leb(at + 1);
    const end = body + size;
    const [nameLength, name] = leb(body);
    const custom = wasm[at] === 0 && wasm.toString("latin1", name, name + nameLength);
    if (custom !== "name") kept.push(wasm.subarray(at, end));
    at = end;
  }
  fs.writeFileSync(path, Buffer.concat(kept));
}
JS

cp crates/web/js/*.ts crates/web/js/tsconfig.json crates/web/js/README.md "$out/"
"$tsc" -p "${out}/tsconfig.json"
rm -f "${out}/tsconfig.json" "${out}/index.ts" "${out}/worker.ts" "${out}/protocol.ts" "${out}/microphone.ts" \
  "${out}/microphone-worklet.ts"

node - "$out" <<'JS'
const fs = require("fs");
const dir = process.argv[2];
const built = JSON.parse(fs.readFileSync(`${dir}/package.json`, "utf8"));
const pkg = {
  name: "susurrus",
  version: built.version,
  description: "Whisper speech recognition in the browser on WebGPU, on Susurrus's own graph compiler",
  license: built.license,
  repository: built.repository,
  type: "module",
  main: "index.js",
  module: "index.js",
  types: "index.d.ts",
  exports: {
    ".": { types: "./index.d.ts", default: "./index.js" },
    "./worker.js": "./worker.js",
    "./susurrus.js": { types: "./susurrus.d.ts", default: "./susurrus.js" },
  },
  files: ["index.js", "index.d.ts", "worker.js", "worker.d.ts", "protocol.js", "protocol.d.ts",
          "microphone.js", "microphone.d.ts", "microphone-worklet.js", "microphone-worklet.d.ts",
          "susurrus.js", "susurrus.d.ts", "susurrus_bg.wasm", "susurrus_bg.wasm.d.ts", "README.md",
          "threads/susurrus.js", "threads/susurrus.d.ts", "threads/susurrus_bg.wasm",
          "threads/susurrus_bg.wasm.d.ts", "threads/snippets"],
  sideEffects: false,
  keywords: ["whisper", "speech-recognition", "transcription", "webgpu", "wasm"],
};
fs.writeFileSync(`${dir}/package.json`, JSON.stringify(pkg, null, 2) + "\n");
for (const f of pkg.files) if (!fs.existsSync(`${dir}/${f}`)) throw new Error(`build_web: ${dir}/${f} is missing`);
JS

rm -rf www/pkg
cp -r "$out" www/pkg
printf 'build_web: %s (wasm %s KB, threaded %s KB) -> www/pkg\n' "$out" \
  "$(( $(stat -c %s "${out}/susurrus_bg.wasm") / 1024 ))" "$(( $(stat -c %s "${out}/threads/susurrus_bg.wasm") / 1024 ))"
