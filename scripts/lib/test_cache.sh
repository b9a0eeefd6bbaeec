#!/usr/bin/env bash
# Checks scripts/lib/cache.sh, with which every script that writes into ~/.cache/susurrus makes
# its targets, on a made-up target in a temporary folder (no network, a few seconds): four runs
# at once build it once and all succeed; a run stopped by TERM mid-build leaves neither the
# target nor its temporary folder; a run killed outright (SIGKILL) leaves its temporary folder
# but not its lock, and the next run removes the folder and builds the target; an incomplete
# target is replaced whole; a run with nothing to do prints nothing. Part of scripts/test.sh.
set -euo pipefail

lib="$(cd "$(dirname "$0")" && pwd)/cache.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target="${work}/cache/thing"
fail() {
  echo "test_cache: $*" >&2
  exit 1
}

# make.sh NAME: makes $target (20 files written 0.05 s apart, then `done`) as the scripts do,
# and appends NAME to $work/builders when it is the run that builds it.
cat >"${work}/make.sh" <<EOF
#!/usr/bin/env bash
set -euo pipefail
target="${target}"
[ -f "\${target}/done" ] && exit 0
. "${lib}"
cache_lock "\$target"
if [ ! -f "\${target}/done" ]; then
  echo "\$1" >>"${work}/builders"
  cache_tmpdir "\$target"
  mkdir "\${CACHE_TMP}/thing"
  for i in \$(seq 20); do
    echo "\$1 \$i" >"\${CACHE_TMP}/thing/\$i"
    sleep 0.05
  done
  touch "\${CACHE_TMP}/thing/done"
  cache_commit "\${CACHE_TMP}/thing" "\$target"
fi
cache_unlock
EOF
chmod +x "${work}/make.sh"

# Leftover temporary folders, and whether the target is whole: 20 files of one builder + done.
leftovers() { find "${work}/cache" -mindepth 1 -maxdepth 1 -name '.*'; }
whole() {
  [ -f "${target}/done" ] && [ "$(find "$target" -type f | wc -l)" = 21 ] &&
    [ "$(cat "$target"/[0-9]* | cut -d' ' -f1 | sort -u | wc -l)" = 1 ]
}
# started: waits until a run has written 3 files into its temporary folder.
started() {
  local _
  for _ in $(seq 200); do
    [ "$(find "${work}/cache" -path '*/.thing.tmp.*/thing/*' 2>/dev/null | wc -l)" -ge 3 ] && return 0
    sleep 0.02
  done
  fail "the build never started"
}

# Four at once.
pids=()
for n in 1 2 3 4; do
  timeout 20 "${work}/make.sh" "run$n" 2>>"${work}/stderr" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a run of four at once failed"; done
[ "$(wc -l <"${work}/builders")" = 1 ] || fail "four runs at once built the target $(wc -l <"${work}/builders") times"
whole || fail "four runs at once left an incomplete target"
[ -z "$(leftovers)" ] || fail "four runs at once left $(leftovers)"
grep -qv 'waiting for another run' "${work}/stderr" && fail "unexpected output: $(cat "${work}/stderr")"

# Nothing to do: no output.
[ -z "$("${work}/make.sh" again 2>&1)" ] || fail "a run with nothing to do printed something"

# Stopped by TERM mid-build: no target, no temporary folder; the next run builds it.
rm -rf "$target" "${work}/builders"
"${work}/make.sh" stopped &
p=$!
started
kill -TERM "$p"
status=0
wait "$p" || status=$?
[ "$status" = 143 ] || fail "a run stopped by TERM exited with $status"
[ ! -e "$target" ] || fail "a run stopped by TERM left a target"
[ -z "$(leftovers)" ] || fail "a run stopped by TERM left $(leftovers)"
timeout 20 "${work}/make.sh" after-term || fail "the run after a stopped one failed"
whole || fail "the run after a stopped one left an incomplete target"

# Killed outright: its temporary folder stays, its lock does not (once its last child, which
# holds the lock's file descriptor too, has exited); the next run cleans up.
rm -rf "$target"
"${work}/make.sh" killed &
p=$!
started
kill -KILL "$p"
{ wait "$p"; } 2>/dev/null || true
[ ! -e "$target" ] || fail "a killed run left a target"
[ -n "$(leftovers)" ] || fail "a killed run left no temporary folder (it was meant to be killed mid-build)"
timeout 20 "${work}/make.sh" after-kill 2>/dev/null || fail "the run after a killed one failed (or waited on its lock)"
whole || fail "the run after a killed one left an incomplete target"
[ -z "$(leftovers)" ] || fail "the run after a killed one left $(leftovers)"

# An incomplete target (no `done`, as an older script might have left) is replaced whole.
rm -rf "$target"
mkdir -p "$target"
echo stale >"${target}/1"
timeout 20 "${work}/make.sh" replacing || fail "replacing an incomplete target failed"
whole || fail "an incomplete target was not replaced whole"
[ -z "$(leftovers)" ] || fail "replacing an incomplete target left $(leftovers)"

echo "test_cache: four runs at once, TERM, SIGKILL, an incomplete target: as expected"
