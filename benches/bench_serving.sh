#!/usr/bin/env bash
# `specperf bench-serving` side by side with InferenceX's benchmark_serving.py, same argv, same
# simulator, alternating run by run, at the point where the Python client is the bottleneck.
#
#   INFERENCEX_DIR=/path/to/InferenceX benches/bench_serving.sh
#   BIG=1 benches/bench_serving.sh          # also specperf alone at concurrency 16,384
#   FLOOR=1 benches/bench_serving.sh        # also the kernel-and-runtime floor for the same load
#
# The simulator runs as its own process at ITL_MS per step with acceptance probability 0 (one
# token per step), so the true TPOT and ITL are exactly ITL_MS. Each run: InferenceX's
# run_benchmark_serving argv (random dataset, range ratio 0.8, --request-rate inf,
# --max-concurrency C, --num-prompts 10*C, --num-warmups 2*C, --ignore-eos, --save-result).
# Prints per run and as medians with ratios: CPU seconds (user + sys, children included), peak
# RSS summed over the process tree, request throughput, and mean TTFT / TPOT / ITL from each
# tool's own result file.
#
# FLOOR=1 adds, after each specperf run, examples/floor_client.rs on the same load (one connection
# per request, the same request count with warmups, bodies of FLOOR_BODY_BYTES, the mean of the
# default argv's bodies, asking for the mean output length): only connect, write and read to EOF,
# nothing parsed, so its CPU is what any client pays for this load, and specperf's CPU above it is
# specperf's own (prompts, tokenizer, HTTP, SSE, records).
#
# Each row also has sent_tpot_ms / sent_itl_ms: the simulator's own vLLM histograms
# (vllm:request_time_per_output_token_seconds, vllm:inter_token_latency_seconds) from the client's
# "Warmup completed." line (polled every 10 ms; both clients print it unbuffered) to its exit,
# i.e. what the simulator really sent in the measured window, and each client's error against
# them; sent_tpot_pace_err_pct and tpot_pace_err_pct are what was sent and what the client read
# against the configured ITL_MS. PIN=1 runs the simulator on CPU 0 and the clients on the others.
#
# Environment: INFERENCEX_DIR (without it, specperf alone), PIN=1, SIM_ARGS (more `specperf sim`
# flags, e.g. "--kv-blocks 10000000" so that BIG's 16,384 requests all run at once instead of
# queueing for the default pool's 2,097,152 tokens), PYTHON (target/aiperf-venv/bin/python:
# numpy, transformers, aiohttp), PORT (18090), CONCURRENCY (512), RATE (inf: --request-rate, so an
# open-loop point can be compared too), ISL (256), OSL (64), ITL_MS (1),
# TTFT_MS (20), RUNS (3), SPECPERF_BIN (target/release/specperf), SKIP_BUILD=1, BIG=1,
# BIG_CONCURRENCY (16384), BIG_ISL (1024), BIG_OSL (64), BIG_PROMPTS (BIG_CONCURRENCY: one per slot).
set -euo pipefail

cd "$(dirname "$0")/.."
PORT=${PORT:-18090}
CONCURRENCY=${CONCURRENCY:-512}
ISL=${ISL:-256}
OSL=${OSL:-64}
ITL_MS=${ITL_MS:-1}
RATE=${RATE:-inf}
TTFT_MS=${TTFT_MS:-20}
RUNS=${RUNS:-3}
BIN=${SPECPERF_BIN:-target/release/specperf}
PYTHON=${PYTHON:-target/aiperf-venv/bin/python}
[[ $PYTHON = /* ]] || PYTHON=$PWD/$PYTHON
BASE=http://127.0.0.1:$PORT

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet
fi
FLOOR_BIN=target/release/examples/floor_client
if [[ -n ${FLOOR:-} && ( -z ${SKIP_BUILD:-} || ! -x $FLOOR_BIN ) ]]; then
    cargo build --release --quiet --example floor_client
fi
scripts/fetch-tokenizer.sh >&2
command -v curl >/dev/null || { echo "error: curl is required" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: GNU time (/usr/bin/time) is required" >&2; exit 1; }
# Every stream holds a socket in the client and one in the simulator.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=benches/lib/measure.sh
. benches/lib/measure.sh

WORK=$(mktemp -d)
SIM_PID=
cleanup() {
    [[ -n $SIM_PID ]] && kill "$SIM_PID" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

TOK=$WORK/tokenizer
mkdir -p "$TOK"
cp target/fixtures/deepseek-v4/tokenizer.json "$TOK/"
echo '{"tokenizer_class": "PreTrainedTokenizerFast"}' >"$TOK/tokenizer_config.json"

if curl -sf -o /dev/null "$BASE/health"; then
    echo "error: something already listens on port $PORT (set PORT)" >&2
    exit 1
fi
# PIN=1: the simulator on CPU 0, the clients on the others (taskset), as a server on its own
# hardware would be; sharing cores, each process's threads delay the other's and a client can
# read a whole stream at once that the simulator wrote on time.
SIM_PIN=() CLIENT_PIN=()
if [[ -n ${PIN:-} ]]; then
    command -v taskset >/dev/null || { echo "error: PIN=1 needs taskset (util-linux)" >&2; exit 1; }
    last=$(($(nproc) - 1))
    [[ $last -ge 1 ]] || { echo "error: PIN=1 needs at least 2 CPUs" >&2; exit 1; }
    SIM_PIN=(taskset -c 0) CLIENT_PIN=(taskset -c "1-$last")
fi
# shellcheck disable=SC2086
"${SIM_PIN[@]}" "$BIN" sim --port "$PORT" --ttft-ms "$TTFT_MS" --itl-ms "$ITL_MS" --acceptance-prob 0 \
    ${SIM_ARGS:-} >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 100); do
    curl -sf -o /dev/null "$BASE/health" && break
    sleep 0.1
done

UPSTREAM=
if [[ -n ${INFERENCEX_DIR:-} ]]; then
    UPSTREAM=$INFERENCEX_DIR/utils/bench_serving/benchmark_serving.py
    [[ -f $UPSTREAM ]] || { echo "error: no $UPSTREAM" >&2; exit 1; }
fi

# argv CONC ISL OSL DIR [PROMPTS]: InferenceX's run_benchmark_serving call (10 prompts per slot).
argv() {
    echo --model specperf-sim --tokenizer "$TOK" --backend vllm --base-url "http://0.0.0.0:$PORT" \
        --dataset-name random --random-input-len "$2" --random-output-len "$3" \
        --random-range-ratio 0.8 --num-prompts "${5:-$((10 * $1))}" --max-concurrency "$1" \
        --request-rate "$RATE" --ignore-eos --save-result --num-warmups $((2 * $1)) \
        --percentile-metrics ttft,tpot,itl,e2el --result-dir "$4" --result-filename r.json
}

# sent FILE: the simulator's vLLM latency histograms (sums and counts over its engines), timed as
# each token went out: what it actually sent, which on a loaded machine can fall behind ITL_MS.
sent() {
    curl -sf "$BASE/metrics" | awk '
        /^vllm:(request_time_per_output_token|inter_token_latency)_seconds_(sum|count)[{ ]/ {
            split($1, n, "{"); v[n[1]] += $NF
        }
        END { for (k in v) printf "%s %.9f\n", k, v[k] }' >"$1.tmp"
    mv "$1.tmp" "$1"
}

# measured OUT CMD...: `measure` with the simulator's histograms read into OUT.sent0 when CMD
# prints "Warmup completed." (before it starts, when it has no warmups) and into OUT.sent1 after.
measured() {
    local o=$1
    sent "$o.sent0"
    : >"$o.out"
    (
        until grep -q '^Warmup completed\.' "$o.out" 2>/dev/null; do sleep 0.01; done
        sent "$o.sent0"
    ) &
    local watcher=$!
    measure "$@"
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    sent "$o.sent1"
}

# row NAME OUT: one line of figures from GNU time, the RSS sampler, the tool's result file and
# the simulator's own histograms over the run (OUT.sent0 before, OUT.sent1 after).
row() {
    local t=$2.time
    local cpu rss
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$t")
    rss=$(awk -v k="$(cat "$2.rss")" 'BEGIN {printf "%.0f", k / 1024}')
    "$PYTHON" - "$1" "$cpu" "$rss" "$2.dir/r.json" "$2.sent0" "$2.sent1" "$ITL_MS" <<'EOF'
import json, sys
name, cpu, rss, path, before, after, pace = sys.argv[1:]
pace = float(pace)
r = json.load(open(path))
def read(p):
    return {k: float(v) for k, v in (line.split() for line in open(p))}
b, a = read(before), read(after)
def mean_ms(h):
    n = a[f"vllm:{h}_seconds_count"] - b[f"vllm:{h}_seconds_count"]
    return 1e3 * (a[f"vllm:{h}_seconds_sum"] - b[f"vllm:{h}_seconds_sum"]) / n
tpot, itl = mean_ms("request_time_per_output_token"), mean_ms("inter_token_latency")
# The requests the simulator finished in the window: the measured ones when the window is right.
n = round(a["vllm:request_time_per_output_token_seconds_count"]
          - b["vllm:request_time_per_output_token_seconds_count"])
print(f"{name:<10} cpu_s {cpu:>7}  rss_mib {rss:>6}  req_s {r['request_throughput']:9.1f}  "
      f"completed {r['completed']:>6}  ttft_ms {r['mean_ttft_ms']:8.2f}  "
      f"tpot_ms {r['mean_tpot_ms']:6.3f}  itl_ms {r['mean_itl_ms']:6.3f}  "
      f"sent_tpot_ms {tpot:6.3f}  tpot_err_pct {100 * (r['mean_tpot_ms'] / tpot - 1):+7.1f}  "
      f"sent_itl_ms {itl:6.3f}  itl_err_pct {100 * (r['mean_itl_ms'] / itl - 1):+7.1f}  "
      f"sent_requests {n:>6}  sent_tpot_pace_err_pct {100 * (tpot / pace - 1):+7.1f}  "
      f"tpot_pace_err_pct {100 * (r['mean_tpot_ms'] / pace - 1):+7.1f}")
EOF
}

: >"$WORK/rows"
[[ $RUNS -gt 0 ]] && echo "== concurrency $CONCURRENCY, request rate $RATE, ISL $ISL, OSL $OSL, $((10 * CONCURRENCY)) prompts, simulator TTFT ${TTFT_MS} ms, ${ITL_MS} ms per token"
for i in $(seq "$RUNS"); do
    if [[ -n $UPSTREAM ]]; then
        o=$WORK/upstream$i
        mkdir -p "$o.dir"
        # shellcheck disable=SC2046
        (cd "$(dirname "$UPSTREAM")" && measured "$o" "${CLIENT_PIN[@]}" "$PYTHON" -u "$UPSTREAM" \
            $(argv "$CONCURRENCY" "$ISL" "$OSL" "$o.dir"))
        row upstream "$o" | tee -a "$WORK/rows"
    fi
    o=$WORK/specperf$i
    mkdir -p "$o.dir"
    # shellcheck disable=SC2046
    measured "$o" "${CLIENT_PIN[@]}" "$BIN" bench-serving $(argv "$CONCURRENCY" "$ISL" "$OSL" "$o.dir") --disable-tqdm
    row specperf "$o" | tee -a "$WORK/rows"
    if [[ -n ${FLOOR:-} ]]; then
        o=$WORK/floor$i
        measure "$o" "${CLIENT_PIN[@]}" "$FLOOR_BIN" --url "$BASE" --concurrency "$CONCURRENCY" \
            --requests $((12 * CONCURRENCY)) --body-bytes "${FLOOR_BODY_BYTES:-2425}" \
            --max-tokens $(((OSL * 9 + 5) / 10))
        awk -F': ' '/User time|System time/ {s += $2} END {printf "floor      cpu_s %.2f", s}' "$o.time"
        awk -v k="$(cat "$o.rss")" '{printf "  rss_mib %.0f  req_s %.1f  completed %d\n", k / 1024, $3 / $11, $3}' \
            "$o.out"
    fi | tee -a "$WORK/rows"
done
"$PYTHON" - "$WORK/rows" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append({f[i]: float(f[i + 1]) for i in range(1, len(f), 2)})
med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in rows.items()}
for n, m in med.items():
    print(f"median {n:<10} " + "  ".join(f"{k} {v:g}" for k, v in m.items()))
if "upstream" in med and "specperf" in med:
    u, s = med["upstream"], med["specperf"]
    print(f"ratios upstream/specperf: cpu_s {u['cpu_s'] / s['cpu_s']:.1f}x, "
          f"rss {u['rss_mib'] / s['rss_mib']:.1f}x; specperf/upstream req_s "
          f"{s['req_s'] / u['req_s']:.2f}x")
if "floor" in med and "specperf" in med:
    f, s = med["floor"], med["specperf"]
    print(f"specperf above the floor: cpu_s {s['cpu_s'] - f['cpu_s']:.2f} "
          f"({s['cpu_s'] / f['cpu_s']:.1f}x the floor's {f['cpu_s']:.2f})")
    if "upstream" in med:
        print(f"upstream/floor cpu_s: {med['upstream']['cpu_s'] / f['cpu_s']:.1f}x")
EOF

if [[ -n ${BIG:-} ]]; then
    C=${BIG_CONCURRENCY:-16384}
    N=${BIG_PROMPTS:-$C}
    echo "== specperf alone: concurrency $C, ISL ${BIG_ISL:-1024}, OSL ${BIG_OSL:-64}, $N prompts"
    o=$WORK/big
    mkdir -p "$o.dir"
    # shellcheck disable=SC2046
    measured "$o" "${CLIENT_PIN[@]}" "$BIN" bench-serving $(argv "$C" "${BIG_ISL:-1024}" "${BIG_OSL:-64}" "$o.dir" "$N") --disable-tqdm
    row specperf "$o"
    tail -3 "$o.err"
fi
