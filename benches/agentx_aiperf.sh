#!/usr/bin/env bash
# AgentX side by side with AIPerf 0.13.0: the same traces, argv and simulator, one run each
# (AIPerf first), then `scripts/agentx_compare.py` on the two artifact directories.
#
#   benches/agentx_aiperf.sh                    # 40 traces, 16 lanes, 60 s
#   LANES=32 DURATION=120 benches/agentx_aiperf.sh
#
# The traces are `scripts/gen-agentx-traces.py --traces TRACES --seed SEED` (the default
# corpus's shape), written one `<id>.json` per trace, which both tools read. The argv is
# InferenceX's (`docs/agentx.md`) with a short duration under `--unsafe-override` and no
# `--trace-idle-gap-cap-seconds` (AIPerf 0.13 applies that cap to the timestamps at load time,
# specperf at run time as the fork InferenceX pins does, so the start instants would differ).
# AIPerf runs with InferenceX's raised configuration timeouts. Each run gets a fresh simulator.
#
# Prints per tool: CPU seconds (GNU time, user + sys, children included), the peak summed RSS of
# the process tree, records and wall time; the ratios; the comparison's verdict.
#
# Environment: AIPERF_VENV (~/.cache/specperf/aiperf-0.13.0-py3.11, `scripts/test.sh --setup`
# makes it), SPECPERF_BIN (target/release/specperf), SKIP_BUILD=1, PORT (18496), TRACES (40),
# SEED (7), LANES (16), DURATION (60), KEEP=DIR (keep the artifacts there).
set -euo pipefail

cd "$(dirname "$0")/.."
PORT=${PORT:-18496}
TRACES=${TRACES:-40}
SEED=${SEED:-7}
LANES=${LANES:-16}
DURATION=${DURATION:-60}
BIN=${SPECPERF_BIN:-target/release/specperf}
AIPERF_VENV=${AIPERF_VENV:-$HOME/.cache/specperf/aiperf-0.13.0-py3.11}
[[ -x $AIPERF_VENV/bin/aiperf ]] || {
    echo "error: no $AIPERF_VENV/bin/aiperf (run scripts/test.sh --setup, or set AIPERF_VENV)" >&2
    exit 1
}
if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet
fi
scripts/fetch-tokenizer.sh >&2
[[ -x /usr/bin/time ]] || { echo "error: GNU time (/usr/bin/time) is required" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=benches/lib/measure.sh
. benches/lib/measure.sh

WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
SIM_PID=
cleanup() {
    [[ -n $SIM_PID ]] && kill "$SIM_PID" 2>/dev/null
    wait 2>/dev/null || true
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

TOK=$WORK/tok
mkdir -p "$TOK" "$WORK/traces"
cp target/fixtures/deepseek-v4/tokenizer.json "$TOK/"
echo '{"tokenizer_class":"PreTrainedTokenizerFast"}' >"$TOK/tokenizer_config.json"
python3 scripts/gen-agentx-traces.py --out "$WORK/traces.jsonl" --traces "$TRACES" --seed "$SEED" >&2
python3 - "$WORK/traces.jsonl" "$WORK/traces" <<'EOF'
import json, pathlib, sys
out = pathlib.Path(sys.argv[2])
for line in open(sys.argv[1]):
    (out / (json.loads(line)["id"] + ".json")).write_text(line)
EOF

BASE=http://127.0.0.1:$PORT
if curl -sf -o /dev/null "$BASE/health"; then
    echo "error: something already listens on port $PORT (set PORT)" >&2
    exit 1
fi

ARGV=(--scenario inferencex-agentx-mvp --url "$BASE" --endpoint /v1/chat/completions
    --endpoint-type chat --streaming --model specperf-sim --concurrency "$LANES"
    --benchmark-duration "$DURATION" --stats-interval 30 --random-seed 42
    --failed-request-threshold 0.25 --trajectory-start-min-ratio 0.25
    --trajectory-start-max-ratio 0.75 --warmup-grace-period 600 --use-server-token-count
    --no-gpu-telemetry --num-dataset-entries "$TRACES" --slice-duration 1.0
    --input-file "$WORK/traces" --custom-dataset-type weka_trace --unsafe-override
    --tokenizer "$TOK")

# one NAME CMD...: a fresh simulator, then CMD with the argv, measured.
one() {
    local name=$1
    shift
    "$BIN" sim --port "$PORT" --ttft-ms 50 --itl-ms 10 --k 1 --acceptance-prob 0 \
        --kv-block-tokens 64 --kv-blocks 4000000 --prefill-tokens-per-s 0 >"$WORK/$name.sim.log" 2>&1 &
    SIM_PID=$!
    for _ in $(seq 100); do
        curl -sf -o /dev/null "$BASE/health" && break
        sleep 0.1
    done
    measure "$WORK/$name" "$@" "${ARGV[@]}" --output-artifact-dir "$WORK/$name.art"
    kill "$SIM_PID"
    wait "$SIM_PID" 2>/dev/null || true
    SIM_PID=
    local cpu rss n wall
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.1f", s}' "$WORK/$name.time")
    rss=$(($(cat "$WORK/$name.rss") / 1024))
    n=$(grep -c . "$WORK/$name.art/profile_export.jsonl" || true)
    wall=$(awk -F': ' '/Elapsed/ {print $2}' "$WORK/$name.time")
    echo "$name cpu_s $cpu rss_mib $rss records $n wall $wall" | tee -a "$WORK/rows"
}

: >"$WORK/rows"
echo "== $TRACES traces (seed $SEED), $LANES lanes, $DURATION s"
AIPERF_SERVICE_PROFILE_CONFIGURE_TIMEOUT=1800 AIPERF_DATASET_CONFIGURATION_TIMEOUT=1800 \
    one aiperf "$AIPERF_VENV/bin/aiperf" profile
one specperf "$BIN" profile
awk '{cpu[$1] = $3; rss[$1] = $5; n[$1] = $7}
    END {
        printf "ratios aiperf/specperf: cpu %.1fx for the run, %.1fx per record; rss %.0fx\n",
            cpu["aiperf"] / cpu["specperf"],
            (cpu["aiperf"] / n["aiperf"]) / (cpu["specperf"] / n["specperf"]),
            rss["aiperf"] / rss["specperf"]
    }' "$WORK/rows"
# The simulator counts prompt tokens from the text's length (no --tokenizer), and the two
# corpora differ in characters per token: input lengths are compared loosely.
python3 scripts/agentx_compare.py "$WORK/aiperf.art" "$WORK/specperf.art" --isl-tolerance 0.6 \
    >"$WORK/compare.txt" && echo "agentx_compare: the same requests (exit 0)" ||
    { echo "agentx_compare: they differ (exit $?):"; head -20 "$WORK/compare.txt"; }
