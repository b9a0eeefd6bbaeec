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
