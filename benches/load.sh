#!/usr/bin/env bash
# Load-harness measurement of the release binary against a separate simulator process.
#
#   benches/load.sh                # build, 3 x 20000 zero-delay requests, 1 x 2000 realistic
#   RUNS=5 REQUESTS=50000 benches/load.sh
#
# Part 1: `specperf sim` with zero delays (TTFT 0, ITL 0, 256-token streams), then RUNS times
#   `/usr/bin/time -v specperf replay --concurrency 64 --request-count REQUESTS --osl 256`;
#   prints per run and the medians of requests/s ("Throughput:" line), CPU seconds (user + sys)
#   per 1000 requests, and peak RSS of the replay process.
# Part 2: a fresh simulator at its realistic defaults (TTFT 50 ms, ITL 10 ms), one replay of
#   REAL_REQUESTS; prints TTFT p50/p99 from the console table and the simulator's emission lateness
#   quantiles from its /metrics.
#
# Environment: PORT (18080), RUNS (3), REQUESTS (20000), REAL_REQUESTS (2000), CONCURRENCY (64),
# SPECPERF_BIN (target/release/specperf), SKIP_BUILD=1 to use an existing binary.
set -euo pipefail

cd "$(dirname "$0")/.."
PORT=${PORT:-18080}
RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-20000}
REAL_REQUESTS=${REAL_REQUESTS:-2000}
CONCURRENCY=${CONCURRENCY:-64}
BIN=${SPECPERF_BIN:-target/release/specperf}
BASE=http://127.0.0.1:$PORT

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet
fi
if [[ ! -x /usr/bin/time ]]; then
    echo "installing GNU time (/usr/bin/time)" >&2
    apt-get install -y time >/dev/null
fi
command -v curl >/dev/null || { echo "error: curl is required" >&2; exit 1; }

WORK=$(mktemp -d)
SIM_PID=
stop_sim() {
    if [[ -n $SIM_PID ]]; then
        kill "$SIM_PID" 2>/dev/null || true
        wait "$SIM_PID" 2>/dev/null || true
        SIM_PID=
    fi
}
cleanup() {
    stop_sim
    rm -rf "$WORK"
}
trap cleanup EXIT

# start_sim TTFT_MS ITL_MS: starts the simulator in the background and waits until it answers.
start_sim() {
    if curl -sf -o /dev/null "$BASE/health"; then
        echo "error: something already listens on port $PORT (set PORT)" >&2
        exit 1
    fi
    "$BIN" sim --port "$PORT" --ttft-ms "$1" --itl-ms "$2" >"$WORK/sim.log" 2>&1 &
    SIM_PID=$!
    for _ in $(seq 100); do
        if curl -sf -o /dev/null "$BASE/health"; then
            return
        fi
        kill -0 "$SIM_PID" 2>/dev/null || { cat "$WORK/sim.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "error: simulator did not come up on $BASE" >&2
    cat "$WORK/sim.log" >&2
    exit 1
}

# replay N OUT_PREFIX: one timed replay; stdout in OUT_PREFIX.out, time -v in OUT_PREFIX.time.
replay() {
    local rc=0
    /usr/bin/time -v -o "$2.time" "$BIN" replay --url "$BASE" --concurrency "$CONCURRENCY" \
        --request-count "$1" --osl 256 --progress-interval 0 --metrics-settle-seconds 0 --artifact-dir "$2.artifacts" \
        >"$2.out" 2>"$2.err" || rc=$?
    if [[ $rc -ne 0 ]]; then
        echo "warning: replay exited $rc" >&2
        cat "$2.err" >&2
    fi
    grep '^Requests:' "$2.out" >&2 || true
    if grep -q '^Failures:' "$2.out"; then
        grep '^Failures:' "$2.out" >&2
    fi
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

echo "== machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%Y-%m-%dT%H:%MZ)," \
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "== part 1: zero-delay sim, concurrency $CONCURRENCY, $REQUESTS requests x 256 tokens, $RUNS runs"
start_sim 0 0
: >"$WORK/rps" && : >"$WORK/cpu" && : >"$WORK/rss"
for i in $(seq "$RUNS"); do
    replay "$REQUESTS" "$WORK/run$i"
    rps=$(sed -n 's/^Throughput: \([0-9.]*\) req\/s.*/\1/p' "$WORK/run$i.out")
    user=$(sed -n 's/^\tUser time (seconds): //p' "$WORK/run$i.time")
    sys=$(sed -n 's/^\tSystem time (seconds): //p' "$WORK/run$i.time")
    rss_kb=$(sed -n 's/^\tMaximum resident set size (kbytes): //p' "$WORK/run$i.time")
    wall=$(sed -n 's/^\tElapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/run$i.time")
    cpu=$(awk -v u="$user" -v s="$sys" -v n="$REQUESTS" 'BEGIN {printf "%.3f", (u + s) / n * 1000}')
    rss=$(awk -v k="$rss_kb" 'BEGIN {printf "%.1f", k / 1024}')
    echo "run $i: ${rps} req/s, user ${user} s + sys ${sys} s = ${cpu} CPU s / 1000 req," \
        "peak RSS ${rss} MiB, wall ${wall}"
    echo "$rps" >>"$WORK/rps"
    echo "$cpu" >>"$WORK/cpu"
    echo "$rss" >>"$WORK/rss"
done
stop_sim
echo "median: $(median <"$WORK/rps") req/s, $(median <"$WORK/cpu") CPU s / 1000 req," \
    "peak RSS $(median <"$WORK/rss") MiB"

echo "== part 2: sim at TTFT 50 ms / ITL 10 ms, concurrency $CONCURRENCY, $REAL_REQUESTS requests"
start_sim 50 10
replay "$REAL_REQUESTS" "$WORK/real"
# Console row: label, then avg min p50 p90 p99 max std.
ttft=$(grep '^Time to first token (ms)' "$WORK/real.out" | awk '{print $(NF-4), $(NF-2)}')
itl=$(grep '^Inter-token latency (ms)' "$WORK/real.out" | awk '{print $(NF-4), $(NF-2)}')
grep '^Throughput:' "$WORK/real.out"
echo "TTFT p50/p99: ${ttft/ / / } ms"
echo "ITL p50/p99: ${itl/ / / } ms"
curl -sf "$BASE/metrics" | grep specperf_sim_emission_lateness >"$WORK/lateness"
late() { sed -n "s/^specperf_sim_emission_lateness_quantile_seconds{quantile=\"$1\"} //p" "$WORK/lateness"; }
awk -v a="$(late 0.5)" -v b="$(late 0.99)" -v c="$(late 1)" \
    'BEGIN {printf "sim emission lateness p50/p99/max: %.3f / %.3f / %.3f ms\n", a * 1e3, b * 1e3, c * 1e3}'
grep -E '_(count|sum) ' "$WORK/lateness"
