# Timed stages and niced background jobs, for scripts/test.sh and .ci/run (sourced, not run).
#
#   stage NAME CMD...      run CMD in the foreground and record how long it took
#   bg NAME NICE CMD...    start CMD in the background at niceness NICE, its output to a log
#   bg_join NAME           wait for it and record its own duration; a failure prints its log and
#                          fails the caller
#   jobs_summary           (the EXIT trap) stop what is still running, print one line per stage
#
# Each sourcing script prints its own summary under its own title (JOBS_TITLE). A failed run must
# not leave a build running behind it, so the trap kills every background job's process tree.

timings=()
jobs_start=$SECONDS
declare -A bg_pid=() bg_log=()

# Stops a process and everything it started.
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

jobs_summary() {
  local rc=$? name
  for name in "${!bg_pid[@]}"; do kill_tree "${bg_pid[$name]}"; done
  echo "${JOBS_TITLE:-timing} (s):"
  for t in "${timings[@]}"; do echo "  $t"; done
  echo "  total $((SECONDS - jobs_start)) (exit $rc)"
}
trap jobs_summary EXIT

stage() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-26s %5d' "$name" $((SECONDS - t0)))")
}

bg() {
  local name=$1 niceness=$2
  shift 2
  bg_log[$name]=$(mktemp)
  (
    t0=$(date +%s)
    rc=0
    # renice, not nice: CMD may be a function of the sourcing script.
    renice -n "$niceness" -p "$BASHPID" >/dev/null
    "$@" || rc=$?
    echo "$(($(date +%s) - t0))" >"${bg_log[$name]}.secs"
    exit "$rc"
  ) </dev/null >"${bg_log[$name]}" 2>&1 &
  bg_pid[$name]=$!
}

bg_join() {
  local name=$1 rc=0
  wait "${bg_pid[$name]}" || rc=$?
  unset "bg_pid[$name]"
  timings+=("$(printf '%-26s %5s' "$name (background)" "$(cat "${bg_log[$name]}.secs" 2>/dev/null || echo '?')")")
  if [ "$rc" != 0 ]; then
    cat "${bg_log[$name]}"
    echo "${JOBS_TITLE:-jobs}: $name failed (exit $rc; its output is above)" >&2
    exit 1
  fi
}
