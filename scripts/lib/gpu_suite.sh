# Sourced by the GPU suites (scripts/gpu/test_cuda.sh, scripts/gpu/test_wgpu_gpu.sh), which are
# built here and run on a GPU machine without cargo.

# build_test PACKAGE TARGET NAME: the test binary of `cargo test --release -p PACKAGE --test
# TARGET`, copied to $suite/NAME without symbols (a third of the size, for carrying to the GPU
# machine).
build_test() {
  local package=$1 target=$2 name=$3 bin
  bin=$(cargo test --release -p "$package" --test "$target" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$target" | tail -n 1)
  [ -n "$bin" ] || { echo "$(basename "$0"): $target was not built" >&2; exit 1; }
  cp "$bin" "$suite/$name"
  strip "$suite/$name"
}

# vulkan_env DEBS: the Vulkan loader from the carried Debian .debs in DEBS where the machine
# lacks it (unpacked to /, as root), and the NVIDIA driver's ICD where containers put it.
vulkan_env() {
  local debs=$1 icd glvnd f
  if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
    for f in "$debs"/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
    if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then
      export VK_DRIVER_FILES="$icd"
      glvnd="$(dirname "$(dirname "$icd")")/glvnd/egl_vendor.d/10_nvidia.json"
      if [ -f "$glvnd" ]; then export __EGL_VENDOR_LIBRARY_FILENAMES="$glvnd"; fi
    fi
  done
  export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
}
