#!/usr/bin/env bash
# Soak: one long replay at fixed concurrency against a separate `specperf sim` process, sampling the
# replay process's resident memory and open file descriptors, to show they stay flat.
#
#   benches/soak.sh                       # 30 minutes, concurrency 64, sample every 5 s
#   DURATION=600 INTERVAL=2 benches/soak.sh
#
# Not a test: it takes DURATION seconds and its figures are recorded in benches/README.md.
# The simulator runs at its realistic defaults (TTFT 50 ms, 10 ms per step, k 3, p 0.7) with
# 256-token outputs, so the replay keeps CONCURRENCY streams open the whole time, cycles through
# the bundled collection, scrapes /metrics every second and appends every record to records.jsonl.
#
# What grows by design: the aggregator keeps each request's exact values (for numpy-style
# percentiles), about 100 bytes per request, so RSS is expected to rise by roughly
# requests x 100 bytes; anything well beyond that, or any descriptor growth, is a leak.
#
# Output: a CSV of samples (t_s, rss_kib, fds, records) in $OUT/samples.csv, the replay's stdout
# and stderr, and a summary line per figure on stdout.
#
# Environment: PORT (18090), DURATION (1800), INTERVAL (5), CONCURRENCY (64), OSL (256),
# SPECPERF_BIN (target/release/specperf), SKIP_BUILD=1 to use an existing binary, OUT (a new
# temporary directory, kept).
set -euo pipefail

cd "$(dirname "$0")/.."
PORT=${PORT:-18090}
DURATION=${DURATION:-1800}
INTERVAL=${INTERVAL:-5}
CONCURRENCY=${CONCURRENCY:-64}
OSL=${OSL:-256}
BIN=${SPECPERF_BIN:-target/release/specperf}
OUT=${OUT:-$(mktemp -d -t specperf-soak.XXXXXX)}
BASE=http://127.0.0.1:$PORT
mkdir -p "$OUT"

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet
fi
command -v curl >/dev/null || { echo "error: curl is required" >&2; exit 1; }
if curl -sf -o /dev/null "$BASE/health"; then
    echo "error: something already listens on port $PORT (set PORT)" >&2
    exit 1
fi

SIM_PID=
REPLAY_PID=
cleanup() {
    for p in $REPLAY_PID $SIM_PID; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}
trap cleanup EXIT

# The simulator runs from a copy with its own name: on a shared machine a name-based cleanup
# elsewhere (pkill -f 'specperf sim') once took the soak's server down halfway.
cp "$BIN" "$OUT/soak-simulator"
"$OUT/soak-simulator" sim --port "$PORT" >"$OUT/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 100); do
    curl -sf -o /dev/null "$BASE/health" && break
    kill -0 "$SIM_PID" 2>/dev/null || { cat "$OUT/sim.log" >&2; exit 1; }
    sleep 0.1
done

echo "== machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%Y-%m-%dT%H:%MZ)," \
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "== soak: ${DURATION} s, concurrency $CONCURRENCY, osl $OSL, sample every ${INTERVAL} s, output in $OUT"
# The grace period lets the last requests finish; every record still counts.
"$BIN" replay --url "$BASE" --concurrency "$CONCURRENCY" --osl "$OSL" \
    --benchmark-duration "$DURATION" --benchmark-grace-period 30 --progress-interval 60 \
    --metrics-settle-seconds 0 --artifact-dir "$OUT/artifacts" \
    >"$OUT/replay.out" 2>"$OUT/replay.err" &
REPLAY_PID=$!

echo "t_s,rss_kib,fds,records" >"$OUT/samples.csv"
start=$(date +%s)
while kill -0 "$REPLAY_PID" 2>/dev/null; do
    if ! kill -0 "$SIM_PID" 2>/dev/null; then
        # Every request would now fail at once and the figures would measure a failure flood.
        echo "error: the simulator (pid $SIM_PID) died at $(($(date +%s) - start)) s; soak aborted" >&2
        exit 1
    fi
    rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$REPLAY_PID/status" 2>/dev/null || true)
    fds=$(ls "/proc/$REPLAY_PID/fd" 2>/dev/null | wc -l || true)
    recs=$(wc -l <"$OUT/artifacts/records.jsonl" 2>/dev/null || echo 0)
    [[ -n $rss ]] && echo "$(($(date +%s) - start)),$rss,$fds,$recs" >>"$OUT/samples.csv"
    sleep "$INTERVAL"
done
rc=0
wait "$REPLAY_PID" || rc=$?
REPLAY_PID=
echo "replay exit code: $rc"
grep -E '^(Requests|Failures|Throughput):' "$OUT/replay.out" || true

# Figures: start = first sample after 60 s (connections and buffers warmed up), peak, end = the
# last sample; the same for descriptors; and the RSS slope per 1000 requests after warm-up.
awk -F, 'NR == 1 { next }
    { t[++n] = $1; r[n] = $2; f[n] = $3; q[n] = $4 }
    END {
        w = 1; while (w < n && t[w] < 60) w++
        pr = 0; pf = 0; minf = f[w]
        for (i = w; i <= n; i++) { if (r[i] > pr) pr = r[i]; if (f[i] > pf) pf = f[i]; if (f[i] < minf) minf = f[i] }
        printf "samples: %d over %d s\n", n, t[n]
        printf "RSS MiB: first %.1f, at %d s %.1f, peak %.1f, end %.1f\n", r[1] / 1024, t[w], r[w] / 1024, pr / 1024, r[n] / 1024
        printf "open fds: first %d, at %d s %d, min %d, max %d, end %d\n", f[1], t[w], f[w], minf, pf, f[n]
        dq = q[n] - q[w]
        if (dq > 0) printf "RSS growth after warm-up: %.1f MiB over %d records = %.1f bytes per record\n", (r[n] - r[w]) / 1024, dq, (r[n] - r[w]) * 1024 / dq
    }' "$OUT/samples.csv"
