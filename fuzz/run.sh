#!/usr/bin/env bash
# Runs the cargo-fuzz targets one after the other, each for a bounded time, and prints the
# libFuzzer figures of each run (see README.md here).
#
#   fuzz/run.sh                      # every target, 600 s each
#   fuzz/run.sh sse 60               # one target for 60 s
#   TARGETS="prom dataset" fuzz/run.sh "" 120
#
# New inputs go to fuzz/work/<target>/ (git-ignored); the committed seeds in fuzz/corpus/<target>/
# are only read. A crash stops that target and leaves the input in fuzz/artifacts/<target>/.
# The stable toolchain runs cargo-fuzz with RUSTC_BOOTSTRAP=1 (it passes -Z flags for the
# sanitizer and the libFuzzer instrumentation).
set -euo pipefail
cd "$(dirname "$0")"
SECS=${2:-600}
TARGETS=${1:-${TARGETS:-sse prom dataset inject encoders}}
command -v cargo-fuzz >/dev/null || { echo "error: install cargo-fuzz (cargo install cargo-fuzz)" >&2; exit 1; }
export RUSTC_BOOTSTRAP=1
cargo fuzz build
status=0
for t in $TARGETS; do
    mkdir -p "work/$t"
    echo "== $t: ${SECS} s, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(rustc --version)"
    # -timeout: one input taking 10 s is a finding (a quadratic path), not patience.
    rc=0
    cargo fuzz run "$t" "work/$t" "corpus/$t" -- -max_total_time="$SECS" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 >"work/$t.log" 2>&1 || rc=$?
    grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|Done [0-9]+ runs|==[0-9]+==|SUMMARY|.*panicked)' "work/$t.log" || true
    echo "corpus: $(ls "work/$t" | wc -l) new files + $(ls "corpus/$t" | wc -l) seeds; exit $rc"
    [[ $rc -eq 0 ]] || status=$rc
done
exit $status
