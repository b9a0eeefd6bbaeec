#!/usr/bin/env bash
# Fuzzes the readers of untrusted input with cargo fuzz (libFuzzer, AddressSanitizer, debug
# assertions) on the nightly compiler pinned in fuzz/rust-toolchain.toml: the CTranslate2 and
# Hugging Face model files, the tokenizer files, the Silero VAD ONNX file and the audio front end
# (fuzz/src/targets.rs, also run by the test suite's short mutation run). Each target runs
# SECONDS seconds from its committed seed corpus (fuzz/corpus/TARGET/, made by
# fuzz/make_corpus.py). Any panic, abort, sanitizer report, input slower than 20 s or allocation
# over 2 GiB fails the script, which prints the input that did it (fuzz/artifacts/TARGET/) and
# the command that replays it. The first build takes about 15 minutes on 2 cores.
#
#   scripts/fuzz.sh [--merge] [SECONDS] [TARGET...]      default: 20 seconds, every target
#
# What a run discovers goes to target/fuzz/corpus/TARGET/ (kept between runs, never committed);
# the committed corpus is only read. --merge adds to fuzz/corpus/ the discoveries that reach new
# code (libFuzzer's -merge), for a long run's findings to be committed.
set -euo pipefail
cd "$(dirname "$0")/.."

merge=0
if [ "${1:-}" = --merge ]; then
  merge=1
  shift
fi
seconds=${1:-20}
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz: SECONDS must be a whole number, not '${seconds}'" >&2
  exit 2
fi

# The nightly compiler and cargo-fuzz (skipped when present).
./scripts/setup.sh fuzz
export PATH="${HOME}/.cache/susurrus/tools/bin:${PATH}"
toolchain=$(awk -F'"' '/^channel/ { print $2 }' fuzz/rust-toolchain.toml)

# Each target and the longest input it is given, from fuzz/src/targets.rs's TARGETS.
declare -A max_len=()
all_targets=()
while read -r name length; do
  max_len[$name]=$length
  all_targets+=("$name")
done < <(sed -nE 's/^ *\("([a-z0-9_]+)", [a-z0-9_]+, ([0-9]+)\),$/\1 \2/p' fuzz/src/targets.rs)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
  if [ -z "${max_len[$target]:-}" ]; then
    echo "fuzz: unknown target '${target}' (${all_targets[*]})" >&2
    exit 2
  fi
done

target_dir="${CARGO_TARGET_DIR:-target}/fuzz"
bin_dir="${target_dir}/x86_64-unknown-linux-gnu/release"
# Release with debug assertions and overflow checks, AddressSanitizer (cargo fuzz's defaults).
t0=$(date +%s)
build=(cargo "+${toolchain}" fuzz build --target-dir "$target_dir")
# cargo fuzz builds one target or all of them.
if ((${#targets[@]} == 1)); then build+=("${targets[0]}"); fi
"${build[@]}"
echo "fuzz: built in $(($(date +%s) - t0)) s"

# AddressSanitizer's fake stacks (use after return, which safe Rust cannot do) took a third of
# the audio target's time.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_stack_use_after_return=0}"
failed=()
for target in "${targets[@]}"; do
  found="${target_dir}/corpus/${target}"
  artifacts="fuzz/artifacts/${target}/"
  log="${target_dir}/logs/${target}.log"
  mkdir -p "$found" "$artifacts" "$(dirname "$log")"
  flags=(-max_total_time="$seconds" -max_len="${max_len[$target]}" -rss_limit_mb=2048 -malloc_limit_mb=2048
    -timeout=20 -seed=1 -artifact_prefix="$artifacts" -print_final_stats=1)
  printf '\n== fuzz %s: %d s ==\n' "$target" "$seconds"
  if "${bin_dir}/${target}" "${flags[@]}" "$found" "fuzz/corpus/${target}" >"$log" 2>&1; then
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$log" | tr '\n' ' '
    echo
    if ((merge)); then
      "${bin_dir}/${target}" -merge=1 -max_len="${max_len[$target]}" "fuzz/corpus/${target}" "$found" 2>&1 |
        grep -E '^MERGE-OUTER: [0-9]+ new files' || true
    fi
  else
    tail -n 60 "$log"
    crash=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | cut -d' ' -f5 || true)
    echo "fuzz: ${target} FAILED; whole log: ${log}" >&2
    if [ -n "$crash" ]; then
      echo "fuzz: the input: ${crash}" >&2
      echo "fuzz: replay it: ${bin_dir}/${target} ${crash}" >&2
    fi
    failed+=("$target")
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, no failures"
