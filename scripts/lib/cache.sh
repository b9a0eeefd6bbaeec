# shellcheck shell=bash
# Sourced (not run) by the scripts that write into ~/.cache/susurrus: the models
# (models/fetch_model.sh), the reference venv (python_venv.sh), and setup.sh's tools, npm
# packages, NVRTC, browser peers and API venv. Each thing they make there (a "target": a folder
# or a file) is made the same way, so that a second run, two runs at once, or a run stopped at
# any point never leave a target that a later run takes for complete:
#
# - a lock per target, TARGET.lock beside it (flock; python3's fcntl where flock(1) is missing),
#   taken only when the target is missing, and the target checked again once the lock is held
#   (the run that held it may have made it);
# - the target built in a fresh temporary folder beside it (.NAME.tmp.XXXXXX: the same file
#   system) and renamed into place: the one step that makes it appear;
# - the temporary folders removed when the script exits, however it exits (this file turns INT,
#   TERM and HUP into an exit); those of a run killed outright (SIGKILL, a power cut) by the next
#   run that takes the target's lock, since no other run can be using them then.
#
#   cache_lock TARGET       waits for TARGET's lock (says so on stderr when another run holds it)
#   cache_unlock            releases the lock taken last (exiting releases them all); locks nest
#                           (up to 4), always from a target to what it is made from
#   cache_tmpdir TARGET     a new temporary folder beside TARGET, in $CACHE_TMP
#   cache_tmpfile TARGET    a new temporary file beside TARGET, in $CACHE_TMP
#   cache_commit TMP TARGET renames TMP (folder or file) to TARGET, replacing what was there
#   cache_discard TARGET    removes TARGET: renamed aside first, so it vanishes in one step
#   cache_track PATH        removes PATH (a scratch folder elsewhere) when the script exits
#   cache_wheel DIR SPEC [pip options]
#                           the path of SPEC's wheel (NAME==VERSION) in DIR, in $CACHE_WHEEL,
#                           downloaded from PyPI once (under its own lock, into a temporary
#                           folder, then renamed into DIR)
#   cache_npm_tarball SPEC FILE
#                           makes FILE, npm pack's tarball of SPEC (NAME@VERSION), once
#
# Call these in the script's own shell, not in $(...): a subshell's temporary folders would
# outlive it. Scripts that set an EXIT trap of their own call cache_cleanup in it.

_cache_tmps=()
_cache_locks=()
_cache_who=${0##*/}
_cache_who=${_cache_who%.sh}

cache_cleanup() {
  local path
  for path in "${_cache_tmps[@]+"${_cache_tmps[@]}"}"; do
    rm -rf "$path"
  done
  _cache_tmps=()
}
trap cache_cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# Folders and files made here get the modes that umask gives everything else (mktemp makes
# them private), so that e.g. deploy/Dockerfile's unprivileged user can read a copied model.
_cache_dir_mode=$(printf '%o' $((0777 & ~0$(umask))))
_cache_file_mode=$(printf '%o' $((0666 & ~0$(umask))))

_cache_flock() { # FD [-n]: an exclusive lock on the open file FD; with -n, fail at once if held
  local fd=$1
  shift
  if command -v flock >/dev/null; then
    flock "$@" "$fd"
  else
    python3 -c 'import fcntl, sys
fcntl.flock(int(sys.argv[1]), fcntl.LOCK_EX | (fcntl.LOCK_NB if sys.argv[2:] == ["-n"] else 0))' \
      "$fd" "$@" 2>/dev/null
  fi
}

cache_lock() {
  local target=$1 dir base fd=$((9 - ${#_cache_locks[@]}))
  dir=$(dirname "$target") base=$(basename "$target")
  ((fd >= 6)) || { echo "${_cache_who}: more than 4 nested cache locks (${target})" >&2; exit 1; }
  mkdir -p "$dir"
  eval "exec ${fd}>\"\${target}.lock\""
  if ! _cache_flock "$fd" -n; then
    echo "${_cache_who}: waiting for another run to finish ${target}" >&2
    _cache_flock "$fd"
  fi
  _cache_locks+=("$target")
  # Temporary folders of runs that were killed outright: nobody else can be using them now.
  rm -rf "${dir}/.${base}.tmp."* "${dir}/.${base}.old."*
}

cache_unlock() {
  local n=${#_cache_locks[@]}
  eval "exec $((9 - n + 1))>&-"
  unset "_cache_locks[$((n - 1))]"
}

cache_tmpdir() {
  local target=$1
  CACHE_TMP=$(mktemp -d "$(dirname "$target")/.$(basename "$target").tmp.XXXXXX")
  _cache_tmps+=("$CACHE_TMP")
  chmod "$_cache_dir_mode" "$CACHE_TMP"
}

cache_tmpfile() {
  local target=$1
  CACHE_TMP=$(mktemp "$(dirname "$target")/.$(basename "$target").tmp.XXXXXX")
  _cache_tmps+=("$CACHE_TMP")
  chmod "$_cache_file_mode" "$CACHE_TMP"
}

cache_track() {
  _cache_tmps+=("$1")
}

cache_discard() {
  local target=$1 aside
  [ -e "$target" ] || [ -L "$target" ] || return 0
  aside=$(mktemp -d "$(dirname "$target")/.$(basename "$target").old.XXXXXX")
  _cache_tmps+=("$aside")
  mv "$target" "$aside/"
  rm -rf "$aside"
}

cache_commit() {
  local tmp=$1 target=$2 path kept=()
  if [ -d "$tmp" ]; then
    # A folder cannot be renamed over another: the old one goes aside first (a target is only
    # replaced when it is incomplete or out of date).
    cache_discard "$target"
    mv "$tmp" "$target"
  else
    mv -f "$tmp" "$target"
  fi
  for path in "${_cache_tmps[@]+"${_cache_tmps[@]}"}"; do
    [ "$path" = "$tmp" ] || kept+=("$path")
  done
  _cache_tmps=("${kept[@]+"${kept[@]}"}")
}

cache_wheel() {
  local dir=$1 spec=$2 stem wheel
  shift 2
  stem=$(tr '-' '_' <<<"${spec%%==*}")-${spec##*==}
  wheel=$(ls "$dir/${stem}"-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$wheel" ]; then
    cache_lock "$dir/${stem}"
    wheel=$(ls "$dir/${stem}"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
      cache_tmpdir "$dir/${stem}"
      python3 -m pip download --quiet --no-deps --only-binary=:all: "$@" -d "$CACHE_TMP" "$spec" >&2
      for wheel in "$CACHE_TMP"/*.whl; do
        mv -f "$wheel" "$dir/"
      done
      wheel=$(ls "$dir/${stem}"-*.whl | head -n 1)
    fi
    cache_unlock
  fi
  # shellcheck disable=SC2034 # the caller's
  CACHE_WHEEL=$wheel
}

cache_npm_tarball() {
  local spec=$1 file=$2 packed
  [ -f "$file" ] && return 0
  cache_lock "$file"
  if [ ! -f "$file" ]; then
    cache_tmpdir "$file"
    packed=$(cd "$CACHE_TMP" && npm pack --silent "$spec" | tail -n 1)
    cache_commit "${CACHE_TMP}/${packed}" "$file"
  fi
  cache_unlock
}
