#!/usr/bin/env bash
# InferenceX's multi-node AgentX benchmark stage, run unchanged with specperf as its AIPerf,
# against a loopback Dynamo deployment (scripts/dynamo.sh: frontend + mocker workers, CPU only).
#
#   scripts/inferencex-stage.sh INFX_DIR [dynamo.sh up options]
#
# INFX_DIR is a checkout or snapshot of SemiAnalysisAI/InferenceX; its
# benchmarks/multi_node/agentic_srt.sh runs from there as written (nothing of InferenceX is
# copied). Only PATH and the environment differ from a GB200 job:
#   - scripts/inferencex-stage/bin is first on PATH: `uv` (a stand-in that makes the venv
#     benchmark_lib.sh builds hold the specperf shim as bin/aiperf, the real `hf` from
#     huggingface_hub, and the post-processing packages) and `nvidia-smi` (a stand-in writing
#     synthetic power rows, so the power path runs without a GPU);
#   - the post-processing Python is a venv of scripts/inferencex-stage/post-requirements.txt
#     (pinned), cached under ${SPECPERF_CACHE:-~/.cache/specperf}/inferencex-post-<key>;
#   - the traces (tests/fixtures/agentx/traces.jsonl) and the DeepSeek-V4 tokenizer sit in a
#     fresh offline Hugging Face cache (HF_HUB_OFFLINE=1), where resolve_trace_source's
#     `hf download --repo-type dataset semianalysisai/cc-traces-weka-062126` finds them.
# CONC_LIST (default "2 4", at least two points) and DURATION (default 30 s) may be set by the
# caller; everything else the stage sees is set below (it runs under `env -i`). The dynamo.sh
# options default to `--workers 2 --router kv`.
#
# After the stage it checks, and exits 1 naming each that failed: stage_exit (the stage exited
# 0 and ran every point), aggregate (<RESULT_FILENAME>_conc<C>.json per point), validate
# (validate_agentic_result passed in the stage and passes again here, as InferenceX's workflow
# re-runs it), power (power_valid 1 in the aggregate and the power adapter's sidecar),
# plots (metrics_plots.png per point), server_metric_prefix (the stage's dynamo_ prefix check
# passed, and every worker's /metrics was scraped into the export), drain (agentic_srt.sh's
# drain loop polled between the points until idle, with no failed query, and the frontend
# /metrics it polled carries Dynamo's dynamo_frontend_active_requests gauge).
# Work directory: $SPECPERF_INFERENCEX_WORK, else a new mktemp directory; the stage's log is
# stage.log there. The last line on stdout is the stage's result directory (RESULT_DIR).
# Dynamo is always stopped on exit (also on SIGINT/SIGTERM).
set -euo pipefail

me=inferencex-stage
die() {
  echo "$me: $*" >&2
  exit 2
}
[ $# -ge 1 ] || die "usage: $0 INFX_DIR [dynamo.sh up options]"
[ -d "$1" ] || die "$1 is not a directory (give a checkout or snapshot of SemiAnalysisAI/InferenceX)"
INFX_DIR="$(cd "$1" && pwd)"
shift
REPO="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="$REPO/scripts/inferencex-stage"
STAGE="$INFX_DIR/benchmarks/multi_node/agentic_srt.sh"
if ! [ -f "$STAGE" ] || ! [ -f "$INFX_DIR/benchmarks/benchmark_lib.sh" ]; then
  die "$INFX_DIR has no benchmarks/multi_node/agentic_srt.sh and benchmarks/benchmark_lib.sh (not an InferenceX tree?)"
fi
SPECPERF_BIN="${SPECPERF_BIN:-$REPO/target/release/specperf}"
[ -x "$SPECPERF_BIN" ] || die "$SPECPERF_BIN does not exist: build it with \`cargo build --release --locked\` (or set SPECPERF_BIN)"
DYNAMO="$REPO/scripts/dynamo.sh"
[ -x "$DYNAMO" ] || die "$DYNAMO does not exist (the Dynamo deployment script)"

conc_list="${CONC_LIST:-2 4}"
duration="${DURATION:-30}"
read -r -a concs <<<"$conc_list"
[ "${#concs[@]}" -ge 2 ] || die "CONC_LIST='$conc_list': give at least two points (the drain runs between points)"
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || die "DURATION='$duration': a whole number of seconds"
[ $# -gt 0 ] && dynamo_args=("$@") || dynamo_args=(--workers 2 --router kv)
# The served name, as a srt-slurm recipe sets SERVED_MODEL_NAME beside the hub id in MODEL.
MODEL=deepseek-ai/DeepSeek-V4-Pro
SERVED=DeepSeek-V4-Pro
RESULT_FILENAME=dsv4_fp8_dynamo-vllm_tp1-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_cpu-mocker

WORK="${SPECPERF_INFERENCEX_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/specperf-inferencex.XXXXXX")}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
RESULTS="$WORK/results"
LOG="$WORK/stage.log"
HUB="$WORK/hf-hub"
rm -rf "$RESULTS" "$HUB" "$WORK/aiperf-runtime" "$LOG"
mkdir -p "$RESULTS" "$HUB"

# --- the post-processing venv (pinned, cached outside the clone) -------------------------------
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
req="$TOOLS/post-requirements.txt"
key="py$pyver-$(sha256sum "$req" | cut -c1-12)"
POST="${SPECPERF_CACHE:-$HOME/.cache/specperf}/inferencex-post-$key"
post_ok() {
  [ -x "$POST/bin/python" ] && cmp -s "$req" "$POST/requirements.txt" \
    && "$POST/bin/python" -c 'import matplotlib, numpy, huggingface_hub' 2>/dev/null \
    && [ -x "$POST/bin/hf" ]
}
if ! post_ok; then
  echo "$me: installing InferenceX's post-processing packages into $POST (about 1 minute)" >&2
  rm -rf "$POST"
  mkdir -p "$(dirname "$POST")"
  "$PY" -m venv "$POST"
  "$POST/bin/pip" install --quiet --disable-pip-version-check -r "$req" \
    || { rm -rf "$POST"; die "pip install -r $req failed"; }
  cp "$req" "$POST/requirements.txt"
  post_ok || die "$POST does not import matplotlib, numpy and huggingface_hub after install"
fi

# --- the offline Hugging Face cache: traces as resolve_trace_source names them, tokenizer ----
# huggingface_hub's layout: <repo dir>/blobs/<sha256>, snapshots/<rev>/<file> -> blob, refs/main.
hub_put() { # repo-dir file-name source
  local sha rev
  sha=$(sha256sum "$3" | cut -d' ' -f1)
  rev=$(printf '%s' "$sha" | sha1sum | cut -c1-40)
  mkdir -p "$HUB/$1/blobs" "$HUB/$1/refs" "$HUB/$1/snapshots/$rev"
  cp "$3" "$HUB/$1/blobs/$sha"
  ln -sfn "../../blobs/$sha" "$HUB/$1/snapshots/$rev/$2"
  printf '%s' "$rev" >"$HUB/$1/refs/main"
}
# MODEL_PREFIX=dsv4 makes resolve_trace_source pick semianalysis_cc_traces_weka_062126.
hub_put datasets--semianalysisai--cc-traces-weka-062126 traces.jsonl \
  "$REPO/tests/fixtures/agentx/traces.jsonl"
"$REPO/scripts/fetch-tokenizer.sh" >&2
hub_put "models--${MODEL/\//--}" tokenizer.json \
  "${SPECPERF_DSV4_TOKENIZER:-$REPO/target/fixtures/deepseek-v4/tokenizer.json}"

# --- Dynamo, stopped on every exit -------------------------------------------------------------
stage_pid=""
dynamo_state="$WORK/dynamo"
dynamo_started=0
# shellcheck disable=SC2317 # the EXIT trap runs it
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$stage_pid" ] && kill -0 "$stage_pid" 2>/dev/null; then
    echo "$me: stopping the stage (process group $stage_pid)" >&2
    kill -TERM -- "-$stage_pid" 2>/dev/null || kill -TERM "$stage_pid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$stage_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$stage_pid" 2>/dev/null || true
  fi
  if [ "$dynamo_started" = 1 ]; then
    "$DYNAMO" down "$dynamo_state" >&2 || echo "$me: scripts/dynamo.sh down $dynamo_state failed" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

dynamo_started=1
"$DYNAMO" up "$dynamo_state" "${dynamo_args[@]}" --model-name "$SERVED" --owner-pid $$ >&2
# shellcheck disable=SC1091
. "$dynamo_state/env"
[ "$DYNAMO_MODEL" = "$SERVED" ] || die "Dynamo serves '$DYNAMO_MODEL', the stage sends '$SERVED'"
# agentic_srt.sh polls http://localhost:$PORT/metrics and AIPerf's default URL is
# http://localhost:$PORT: the frontend must be on loopback, and PORT is its port.
[[ "$DYNAMO_URL" =~ ^http://(127\.0\.0\.1|localhost):([0-9]+)/?$ ]] \
  || die "DYNAMO_URL=$DYNAMO_URL is not a loopback http://127.0.0.1:PORT"
port="${BASH_REMATCH[2]}"
# The workers' own /metrics, as a GB200 job lists its workers (AIPerf scrapes the frontend's
# /metrics on its own).
workers_metrics="${DYNAMO_WORKER_METRICS_URLS:-}"
[ -n "$workers_metrics" ] || die "scripts/dynamo.sh wrote no DYNAMO_WORKER_METRICS_URLS"

# --- the stage, unchanged ----------------------------------------------------------------------
stage_env=(
  HOME="$HOME" LANG="${LANG:-C.UTF-8}" TERM="${TERM:-dumb}"
  PATH="$TOOLS/bin:$PATH"
  INFMAX_CONTAINER_WORKSPACE="$INFX_DIR"
  MODEL="$MODEL" SERVED_MODEL_NAME="$SERVED" MODEL_PREFIX=dsv4
  FRAMEWORK=dynamo-vllm PRECISION=fp8 KV_OFFLOADING=none
  CONC="${concs[0]}" CONC_LIST="$conc_list" DURATION="$duration"
  RESULT_FILENAME="$RESULT_FILENAME" RESULT_DIR="$RESULTS" AGENTIC_OUTPUT_DIR="$RESULTS"
  PORT="$port"
  AIPERF_SERVER_METRICS_URLS="$workers_metrics"
  AIPERF_REQUIRED_SERVER_METRIC_PREFIX=dynamo_
  AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID=true
  AIPERF_USE_DYNAMO_CONV_AWARE_ROUTING=0
  AIPERF_DRAIN_POLL_SECONDS=2 AIPERF_DRAIN_TIMEOUT_SECONDS=300
  AIPERF_RUNTIME_DIR="$WORK/aiperf-runtime"
  HF_HUB_CACHE="$HUB" HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
  SPECPERF_BIN="$SPECPERF_BIN" SPECPERF_INFERENCEX_POST_VENV="$POST"
)
# The stand-in's board count (default 1 = TP*PP*PCP, what the power adapter expects).
if [ -n "${SPECPERF_NVIDIA_SMI_GPUS:-}" ]; then
  stage_env+=(SPECPERF_NVIDIA_SMI_GPUS="$SPECPERF_NVIDIA_SMI_GPUS")
fi
printf '%s\n' "${stage_env[@]}" >"$WORK/stage.env"
echo "$me: running $STAGE (environment: $WORK/stage.env, log: $LOG)" >&2
started=$SECONDS
# Its own process group (setsid), so an interrupt stops the replay and the power monitor too.
setsid env -i "${stage_env[@]}" bash "$STAGE" >"$LOG" 2>&1 </dev/null &
stage_pid=$!
tail -n +1 -F --pid="$stage_pid" "$LOG" >&2 2>/dev/null &
stage_rc=0
wait "$stage_pid" || stage_rc=$?
stage_pid=""
echo "$me: the stage exited $stage_rc after $((SECONDS - started)) s" >&2

# The pages the drain loop polled (the frontend's, then each worker's), read while Dynamo is up.
pages="$WORK/metrics-after-stage"
"$POST/bin/python" - "$pages" "http://localhost:$port/metrics" "${workers_metrics//,/ }" <<'PYEOF' || true
import sys, urllib.request
from pathlib import Path
out = Path(sys.argv[1])
out.mkdir(exist_ok=True)
for i, url in enumerate([sys.argv[2]] + sys.argv[3].split()):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            (out / f"{i}.txt").write_bytes(r.read())
    except OSError as e:
        print(f"inferencex-stage: {url}: {e}", file=sys.stderr)
PYEOF

# --- pass criteria -----------------------------------------------------------------------------
set +e
(cd "$INFX_DIR" && "$POST/bin/python" - "$RESULTS" "$LOG" "$RESULT_FILENAME" "$stage_rc" \
  "$workers_metrics" "$pages" "${concs[@]}") <<'PYEOF'
import json, re, subprocess, sys
from pathlib import Path

results, log_path, rf, stage_rc = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
workers = [u for u in sys.argv[5].split(",") if u]
pages = Path(sys.argv[6])
concs = sys.argv[7:]
log = log_path.read_text(errors="replace")
failed = []

def check(name, problems):
    if problems:
        failed.append(name)
        for p in problems:
            print(f"FAIL {name}: {p}", file=sys.stderr)
    else:
        print(f"PASS {name}", file=sys.stderr)

def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return e

started = [m for m in re.findall(r"^Running agentic concurrency (\d+) of:", log, re.M)]
p = [] if stage_rc == 0 else [f"agentic_srt.sh exited {stage_rc} (see {log_path})"]
if started != concs:
    p.append(f"points started {started}, expected {concs}")
for c in concs:
    if not (results / f"conc_{c}" / "aiperf_artifacts" / "profile_export_aiperf.json").is_file():
        p.append(f"conc {c}: no aiperf_artifacts/profile_export_aiperf.json")
check("stage_exit", p)

aggs, p = {}, []
for c in concs:
    path = results / f"{rf}_conc{c}.json"
    agg = load(path) if path.is_file() else None
    if not isinstance(agg, dict):
        p.append(f"{path}: {'missing' if agg is None else agg}")
    elif agg.get("conc") != int(c):
        p.append(f"{path}: conc {agg.get('conc')!r}, expected {c}")
    else:
        aggs[c] = agg
check("aggregate", p)

p = []
n = log.count("Validated aiperf request error rate")
if n != len(concs):
    p.append(f"the stage's validate_agentic_result passed {n} times, expected {len(concs)}")
for c in concs:
    r = subprocess.run(
        [sys.executable, "-m", "utils.agentic.validation.validate_agentic_result",
         str(results / f"conc_{c}" / "aiperf_artifacts"), "--failed-request-threshold", "0.10"],
        capture_output=True, text=True)
    if r.returncode != 0:
        p.append(f"conc {c}: validate_agentic_result exited {r.returncode}: {r.stderr.strip()}")
check("validate", p)

p = []
for c in concs:
    agg = aggs.get(c)
    if agg is not None and agg.get("power_valid") != 1:
        p.append(f"conc {c}: aggregate power_valid {agg.get('power_valid')!r}")
    side = load(results / f"conc_{c}" / "power_validation.json")
    if not isinstance(side, dict) or side.get("power_valid") is not True:
        why = side.get("reasons") if isinstance(side, dict) else side
        p.append(f"conc {c}: power_validation.json power_valid not true ({why})")
check("power", p)

check("plots", [f"conc {c}: no metrics_plots.png" for c in concs
                if not ((results / f"conc_{c}" / "metrics_plots.png").is_file()
                        and (results / f"conc_{c}" / "metrics_plots.png").stat().st_size > 0)])

p = []
n = log.count("Validated required AIPerf server metrics prefix 'dynamo_'")
if n != len(concs):
    p.append(f"the stage's required-prefix check passed {n} times, expected {len(concs)}")
for c in concs:
    export = results / f"conc_{c}" / "aiperf_artifacts" / "server_metrics_export.json"
    text = export.read_text(errors="replace") if export.is_file() else ""
    for u in workers:
        if u not in text:
            p.append(f"conc {c}: worker {u} is not in {export.name}")
check("server_metric_prefix", p)

p = []
for a, b in zip(concs, concs[1:]):
    m = re.search(rf"^Running agentic concurrency {a} of:(.*?)^Running agentic concurrency {b} of:",
                  log, re.M | re.S)
    between = m.group(1) if m else ""
    polls = re.findall(r"^Agentic drain status: frontend_active=(\S+) worker_running_or_waiting=(\S+)",
                       between, re.M)
    if not polls:
        p.append(f"no drain poll between conc {a} and conc {b}")
    if "Agentic servers remained idle for three polls" not in between:
        p.append(f"the drain between conc {a} and conc {b} did not end idle")
    if "Agentic drain metrics query failed" in between:
        p.append(f"a drain query failed between conc {a} and conc {b}")
    if polls:
        print(f"drain between conc {a} and {b}: {len(polls)} polls, frontend_active "
              f"{' '.join(x for x, _ in polls)}", file=sys.stderr)
def page(i):
    f = pages / f"{i}.txt"
    return f.read_text(errors="replace") if f.is_file() else ""
def has(text, name):
    return re.search(rf"^{re.escape(name)}(\{{| )", text, re.M) is not None
if not has(page(0), "dynamo_frontend_active_requests"):
    p.append("the frontend /metrics the drain polls has no dynamo_frontend_active_requests sample")
for i, u in enumerate(workers, 1):
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        if not has(page(i), name):
            p.append(f"worker {u} has no {name} sample (the drain would read 0 there)")
check("drain", p)

if failed:
    print("inferencex-stage: FAILED: " + " ".join(failed), file=sys.stderr)
    sys.exit(1)
print("inferencex-stage: all pass criteria met", file=sys.stderr)
PYEOF
checks_rc=$?
set -e
echo "$RESULTS"
exit "$checks_rc"
