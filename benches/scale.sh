#!/usr/bin/env bash
# Scale benchmark: up to 10,000 concurrent streams from one `specperf replay` process against a
# separate `specperf sim` process, each stream long enough (~25 s) that all are open together.
#
#   benches/scale.sh                         # build, then 100, 1000 and 10000 streams
#   STEPS="1000 10000" SKIP_BUILD=1 benches/scale.sh
#
# For each stream count N in STEPS, a fresh simulator
#   specperf sim --port PORT --ttft-ms 50 --itl-ms ITL_MS --k 1 --acceptance-prob 0
# (one token per ITL_MS step, so a stream of OSL tokens lasts 50 ms + (OSL - 1) x ITL_MS), then
#   /usr/bin/time -v specperf replay --url ... --concurrency N --request-count N --osl OSL
# Prints per N: outcomes, whether all N streams were in flight at once (every request sent before
# the first one ended, from records.jsonl), TTFT p50/p99, peak RSS and CPU (user + sys) of the
# replay process and of the simulator, and the simulator's emission lateness (from its /metrics);
# with KEEP_WORK=1 also TTFT split into dispatch, send to headers and headers to first token. The
# last line fits peak RSS against N over the steps: the slope is the replay's memory per in-flight
# stream, the intercept its fixed cost.
#
# Environment: PORT (18390), STEPS ("100 1000 10000"), ITL_MS (250), OSL (100),
# SPECPERF_BIN (target/release/specperf), SKIP_BUILD=1 to use an existing binary, KEEP_WORK=1 to
# keep each run's artifacts and time -v reports (the path is printed at the end). Needs GNU time
# (/usr/bin/time), curl, and a hard open-file limit above the largest N plus 200 (both processes
# raise their soft limit to it themselves).
set -euo pipefail

cd "$(dirname "$0")/.."
PORT=${PORT:-18390}
STEPS=${STEPS:-100 1000 10000}
ITL_MS=${ITL_MS:-250}
OSL=${OSL:-100}
BIN=${SPECPERF_BIN:-target/release/specperf}
BASE=http://127.0.0.1:$PORT

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet
fi
[[ -x /usr/bin/time ]] || { echo "error: GNU time (/usr/bin/time) is required" >&2; exit 1; }
command -v curl >/dev/null || { echo "error: curl is required" >&2; exit 1; }
max_n=$(tr ' ' '\n' <<<"$STEPS" | sort -n | tail -1)
hard=$(ulimit -Hn)
if [[ $hard != unlimited && $hard -lt $((max_n + 200)) ]]; then
    echo "error: the hard open-file limit ($hard) is below $((max_n + 200)); raise it (ulimit -Hn as root)" >&2
    exit 1
fi

WORK=$(mktemp -d)
SIM_PID=
# SIM_PID is GNU time's; the simulator is its child, and time writes its report when that exits.
stop_sim() {
    if [[ -n $SIM_PID ]]; then
        pkill -TERM -P "$SIM_PID" 2>/dev/null || true
        wait "$SIM_PID" 2>/dev/null || true
        SIM_PID=
    fi
}
cleanup() {
    stop_sim
    if [[ -n ${KEEP_WORK:-} ]]; then
        echo "artifacts kept in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

# start_sim OUT_PREFIX: the simulator under time -v in the background; waits until it answers.
start_sim() {
    if curl -sf -o /dev/null "$BASE/health"; then
        echo "error: something already listens on port $PORT (set PORT)" >&2
        exit 1
    fi
    /usr/bin/time -v -o "$1.sim.time" "$BIN" sim --port "$PORT" --ttft-ms 50 --itl-ms "$ITL_MS" \
        --k 1 --acceptance-prob 0 >"$1.sim.log" 2>&1 &
    SIM_PID=$!
    for _ in $(seq 100); do
        curl -sf -o /dev/null "$BASE/health" && return
        kill -0 "$SIM_PID" 2>/dev/null || { cat "$1.sim.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "error: simulator did not come up on $BASE" >&2
    exit 1
}

quantile() { sort -g | awk -v p="$1" '{ v[NR] = $1 } END { printf "%.0f", v[int(p * (NR - 1)) + 1] }'; }
field() { sed -n "s/^\t$1: //p" "$2"; }
cpu_of() { awk -v u="$(field 'User time (seconds)' "$1")" -v s="$(field 'System time (seconds)' "$1")" 'BEGIN {printf "%.2f", u + s}'; }
rss_of() { awk -v k="$(field 'Maximum resident set size (kbytes)' "$1")" 'BEGIN {printf "%.1f", k / 1024}'; }

echo "== machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), kernel $(uname -r)," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)," \
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "== streams of $OSL tokens, one per ${ITL_MS} ms step after a 50 ms TTFT" \
    "($(awk -v o="$OSL" -v i="$ITL_MS" 'BEGIN {printf "%.1f", (50 + (o - 1) * i) / 1000}') s each)"
: >"$WORK/fit"
for n in $STEPS; do
    p="$WORK/n$n"
    start_sim "$p"
    rc=0
    /usr/bin/time -v -o "$p.time" "$BIN" replay --url "$BASE" --concurrency "$n" --request-count "$n" \
        --osl "$OSL" --progress-interval 5 --metrics-settle-seconds 0 --artifact-dir "$p.artifacts" \
        >"$p.out" 2>"$p.err" || rc=$?
    # How late the simulator's emissions were (its own timer's view), before it stops.
    curl -sf "$BASE/metrics" | grep '^specperf_sim_emission_lateness_quantile_seconds' >"$p.lateness" || true
    stop_sim
    [[ $rc -eq 0 ]] || { echo "warning: replay exited $rc" >&2; tail -5 "$p.err" >&2; }
    # All in flight together: the last send came before the first end.
    overlap=$(awk '
        match($0, /"sent_ns":[0-9]+/) { s = substr($0, RSTART + 10, RLENGTH - 10) + 0 }
        match($0, /"end_ns":[0-9]+/) { e = substr($0, RSTART + 9, RLENGTH - 9) + 0 }
        { if (s > last_sent) last_sent = s; if (NR == 1 || e < first_end) first_end = e }
        END {
            if (last_sent < first_end) printf "all %d in flight together from %.1f s to %.1f s", NR, last_sent / 1e9, first_end / 1e9
            else printf "NOT all in flight together (last send %.1f s, first end %.1f s)", last_sent / 1e9, first_end / 1e9
        }' "$p.artifacts/records.jsonl")
    ttft=$(grep '^Time to first token (ms)' "$p.out" | awk '{print $(NF-4) " / " $(NF-2)}')
    rss=$(rss_of "$p.time")
    cpu=$(cpu_of "$p.time")
    echo "N=$n: $(sed -n 's/^Requests: //p' "$p.out"); $overlap; TTFT p50/p99 $ttft ms"
    echo "    replay: peak RSS $rss MiB, CPU $cpu s (user $(field 'User time (seconds)' "$p.time")" \
        "+ sys $(field 'System time (seconds)' "$p.time")), wall $(field 'Elapsed (wall clock) time (h:mm:ss or m:ss)' "$p.time")," \
        "$(awk -v c="$cpu" -v t="$((n * OSL))" 'BEGIN {printf "%.1f", c / t * 1e6}') µs CPU per token"
    late() { sed -n "s/.*{quantile=\"$1\"} //p" "$p.lateness"; }
    echo "    sim:    peak RSS $(rss_of "$p.sim.time") MiB, CPU $(cpu_of "$p.sim.time") s," \
        "emission lateness p50/p99/max $(awk -v a="$(late 0.5)" -v b="$(late 0.99)" -v c="$(late 1)" \
            'BEGIN {printf "%.1f / %.1f / %.1f ms", a * 1e3, b * 1e3, c * 1e3}')"
    if [[ -n ${KEEP_WORK:-} ]]; then
        # Where the first token's time went: dispatch (ticket to send), send to headers, headers
        # to first token; quantiles over all requests.
        awk '
            function num(k) { return match($0, "\"" k "\":[0-9]+") ? substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3) + 0 : 0 }
            { printf "%.3f %.3f %.3f\n", (num("sent_ns") - num("intended_ns")) / 1e6,
                (num("headers_ns") - num("sent_ns")) / 1e6, (num("first_token_ns") - num("headers_ns")) / 1e6 }
        ' "$p.artifacts/records.jsonl" >"$p.parts"
        part() { cut -d' ' -f"$1" "$p.parts" | quantile "$2"; }
        echo "    TTFT parts p50/p99 (ms): dispatch $(part 1 0.5) / $(part 1 0.99)," \
            "to headers $(part 2 0.5) / $(part 2 0.99), headers to first token $(part 3 0.5) / $(part 3 0.99)"
    fi
    echo "$n $rss" >>"$WORK/fit"
done
awk '{ n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
    END {
        if (n < 2) exit
        b = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - b * sx) / n
        printf "replay peak RSS ~ %.1f MiB + %.1f KiB x streams (least squares over %d steps)\n", a, b * 1024, n
    }' "$WORK/fit"
