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
# Part 3, only with AIPERF=1: specperf and AIPerf 0.13.0 side by side against the same simulator
#   settings, alternating run by run: AIPerf is installed from PyPI into a throwaway virtualenv
#   (AIPERF_VENV to reuse one) and given a local tokenizer (the DeepSeek-V4 tokenizer.json from
#   scripts/fetch-tokenizer.sh, in a directory with a minimal tokenizer_config.json), with
#   --use-server-token-count. Both tools write profile_export.jsonl / profile_export_aiperf.json, so
#   one parser reads both. Prints medians and ratios of: requests/s at concurrency 64 with
#   zero-delay 256-token streams (SBS_REQUESTS each), CPU seconds per 1,000 requests (user + sys of
#   the process and its children), peak RSS summed over the process tree (sampled every 0.1 s),
#   mean requests in flight (Σ request durations / span, from the records), start-up (a
#   one-request run: time from launch to the first request's start, and the whole run's wall
#   time including the measuring shell's fork/exec of GNU time), and TTFT/ITL p50/p99 error against a simulator at TTFT 50 ms / 10 ms per step with
#   acceptance probability 0 (one token per step, so the true ITL is exactly 10 ms; ACC_REQUESTS).
#
# Environment: PORT (18080), RUNS (3), REQUESTS (20000), REAL_REQUESTS (2000), CONCURRENCY (64),
# SPECPERF_BIN (target/release/specperf), SKIP_BUILD=1 to use an existing binary, SKIP_SPECPERF=1
# to skip parts 1 and 2; AIPERF=1, AIPERF_VENV, SBS_REQUESTS (5000), ACC_REQUESTS (1000).
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
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -z ${SKIP_SPECPERF:-} ]]; then
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
stop_sim
fi

[[ -n ${AIPERF:-} ]] || exit 0

# ---------------------------------------------------------------------------------------------
# Part 3: side by side with AIPerf.
SBS_REQUESTS=${SBS_REQUESTS:-5000}
ACC_REQUESTS=${ACC_REQUESTS:-1000}
VENV=${AIPERF_VENV:-$WORK/aiperf-venv}
if [[ ! -x $VENV/bin/aiperf ]]; then
    echo "installing aiperf==0.13.0 into $VENV" >&2
    t0=$(date +%s.%N)
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check aiperf==0.13.0
    echo "aiperf install: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}') s," \
        "venv $(du -sm "$VENV" | cut -f1) MB"
fi
AIPERF_BIN=$VENV/bin/aiperf
echo "== part 3: side by side, $("$AIPERF_BIN" --version 2>/dev/null | tail -1 | sed 's/^/aiperf /') vs specperf $("$BIN" --version | cut -d' ' -f2)"
scripts/fetch-tokenizer.sh >&2
TOK=$WORK/tokenizer
mkdir -p "$TOK"
cp target/fixtures/deepseek-v4/tokenizer.json "$TOK/"
echo '{"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1048576}' >"$TOK/tokenizer_config.json"

# shellcheck source=benches/lib/measure.sh
. benches/lib/measure.sh

# tool NAME OUT N CONC: one run of NAME against $BASE writing artifacts to OUT.artifacts.
tool() {
    case $1 in
    specperf)
        measure "$2" "$BIN" replay --url "$BASE" --model specperf-sim --concurrency "$4" \
            --request-count "$3" --osl 256 --progress-interval 0 --ui none \
            --metrics-settle-seconds 0 --artifact-dir "$2.artifacts" ;;
    aiperf)
        measure "$2" "$AIPERF_BIN" profile -m specperf-sim --url "$BASE" --endpoint-type chat \
            --streaming --concurrency "$4" --request-count "$3" --osl 256 --isl 100 \
            --tokenizer "$TOK" --use-server-token-count --ui none --random-seed 0 \
            --output-artifact-dir "$2.artifacts" ;;
    esac
}

# stats OUT N: one line of numbers from a run's artifacts and time -v output.
stats() {
    python3 - "$1" "$2" <<'PYEOF'
import json, re, sys
out, n = sys.argv[1], int(sys.argv[2])
t = open(out + ".time").read()
cpu = float(re.search(r"User time \(seconds\): ([\d.]+)", t)[1]) + float(re.search(r"System time \(seconds\): ([\d.]+)", t)[1])
# time -v prints the wall time in 10 ms steps; launch and end stamps are finer.
wall = (int(open(out + ".end_ns").read()) - int(open(out + ".launch_ns").read())) / 1e9
a = json.load(open(out + ".artifacts/profile_export_aiperf.json"))
recs = [json.loads(l) for l in open(out + ".artifacts/profile_export.jsonl") if l.strip()]
recs = [r["metadata"] for r in recs if r["metadata"].get("benchmark_phase", "profiling") == "profiling"]
starts = [r["request_start_ns"] for r in recs]
ends = [r["request_end_ns"] for r in recs]
inflight = sum(e - s for s, e in zip(starts, ends)) / (max(ends) - min(starts))
first = (min(starts) - int(open(out + ".launch_ns").read())) / 1e6
p = lambda m, q: a.get(m, {}).get(q, float("nan"))
print(f'{a["request_throughput"]["avg"]:.1f} {cpu / n * 1000:.3f} {int(open(out + ".rss").read()) / 1024:.1f} '
      f'{inflight:.2f} {first:.1f} {wall * 1000:.0f} {p("time_to_first_token", "p50"):.3f} '
      f'{p("time_to_first_token", "p99"):.3f} {p("inter_token_latency", "p50"):.4f} '
      f'{p("inter_token_latency", "p99"):.4f} {a["request_count"]["avg"]:.0f}')
PYEOF
}

col() { awk -v c="$1" '{print $c}' "$2" | median; }

start_sim 0 0
: >"$WORK/sbs.specperf" && : >"$WORK/sbs.aiperf"
for i in $(seq "$RUNS"); do
    for t in specperf aiperf; do
        tool "$t" "$WORK/sbs_${t}_$i" "$SBS_REQUESTS" "$CONCURRENCY"
        stats "$WORK/sbs_${t}_$i" "$SBS_REQUESTS" | tee -a "$WORK/sbs.$t" | sed "s/^/$t run $i: /" >&2
    done
done
: >"$WORK/up.specperf" && : >"$WORK/up.aiperf"
for i in $(seq "$RUNS"); do
    for t in specperf aiperf; do
        tool "$t" "$WORK/up_${t}_$i" 1 1
        stats "$WORK/up_${t}_$i" 1 >>"$WORK/up.$t"
    done
done
stop_sim
sim_acc() {
    "$BIN" sim --port "$PORT" --ttft-ms 50 --itl-ms 10 --acceptance-prob 0 >"$WORK/sim.log" 2>&1 &
    SIM_PID=$!
    for _ in $(seq 100); do curl -sf -o /dev/null "$BASE/health" && return; sleep 0.1; done
    echo "error: simulator did not come up" >&2
    exit 1
}
sim_acc
for t in specperf aiperf; do
    tool "$t" "$WORK/acc_$t" "$ACC_REQUESTS" "$CONCURRENCY"
    stats "$WORK/acc_$t" "$ACC_REQUESTS" >"$WORK/acc.$t"
done
stop_sim

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.1fx", a / b }'; }
row() { # label specperf aiperf better(higher|lower)
    local r
    if [[ $4 == higher ]]; then r=$(ratio "$2" "$3"); else r=$(ratio "$3" "$2"); fi
    printf '%-52s %14s %14s %12s\n' "$1" "$2" "$3" "$r"
}
echo
printf '%-52s %14s %14s %12s\n' "median of $RUNS runs (alternating)" specperf "aiperf 0.13.0" "specperf adv."
row "requests/s (c=$CONCURRENCY, zero delay, 256 tok, $SBS_REQUESTS req)" "$(col 1 "$WORK/sbs.specperf")" "$(col 1 "$WORK/sbs.aiperf")" higher
row "CPU s per 1000 requests (user+sys, with children)" "$(col 2 "$WORK/sbs.specperf")" "$(col 2 "$WORK/sbs.aiperf")" lower
row "peak RSS, MiB (process tree)" "$(col 3 "$WORK/sbs.specperf")" "$(col 3 "$WORK/sbs.aiperf")" lower
row "mean requests in flight (of $CONCURRENCY)" "$(col 4 "$WORK/sbs.specperf")" "$(col 4 "$WORK/sbs.aiperf")" higher
row "one-request run: launch -> first request (ms)" "$(col 5 "$WORK/up.specperf")" "$(col 5 "$WORK/up.aiperf")" lower
row "one-request run: wall time (ms)" "$(col 6 "$WORK/up.specperf")" "$(col 6 "$WORK/up.aiperf")" lower
echo "accuracy at true TTFT 50 ms / ITL 10 ms (AL 1), c=$CONCURRENCY, $ACC_REQUESTS requests, one run each:"
read -r _ _ _ _ _ _ st50 st99 si50 si99 _ <"$WORK/acc.specperf"
read -r _ _ _ _ _ _ at50 at99 ai50 ai99 _ <"$WORK/acc.aiperf"
err() { awk -v m="$1" -v t="$2" 'BEGIN {printf "%+.3f", m - t}'; }
printf '%-52s %14s %14s\n' "TTFT p50 / p99 error (ms)" "$(err "$st50" 50) / $(err "$st99" 50)" "$(err "$at50" 50) / $(err "$at99" 50)"
printf '%-52s %14s %14s\n' "ITL p50 / p99 error (ms)" "$(err "$si50" 10) / $(err "$si99" 10)" "$(err "$ai50" 10) / $(err "$ai99" 10)"
echo "== done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
