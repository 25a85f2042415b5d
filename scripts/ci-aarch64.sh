#!/usr/bin/env bash
# The aarch64 leg of CI (GB200/GB300 Grace nodes are aarch64; every other check runs on x86-64).
# Cross-builds the workspace for aarch64-unknown-linux-gnu, runs its tests under qemu user-mode
# emulation, and checks that the embedded default `specperf replay` prints the same console report
# on aarch64 as on x86-64 apart from timings. Called by .ci/run (see below; it reuses the x86-64
# suite's binary and the fetched tokenizer); runs on its own too.
#
#   scripts/ci-aarch64.sh            toolchain, cross build, tests under qemu, console comparison
#   scripts/ci-aarch64.sh --build    toolchain and cross build only (no test runs); .ci/run starts
#                                    this at nice 19 beside the x86-64 build and tests, then runs
#                                    the whole script after them, whose build is then a no-op
#
# Needs Debian/Ubuntu apt as root for the cross linker and qemu; where that is missing it stops
# with the packages to install. SPECPERF_SKIP_AARCH64=1 skips the whole leg (a developer machine
# without apt); CI never sets it.
#
# What runs under qemu: every unit test of both crates, the integration test binary (loopback
# against the simulator, which itself runs emulated) and tokenizer-encoders' tests. Not run: the
# benches and doc tests (cargo test --lib --bins --tests) -- they exercise no code the tests do
# not, and the x86-64 suite already runs the benches once. When the kernel refuses to register
# qemu for aarch64 executables (binfmt_misc), the tests that start the specperf binary as a child
# process cannot run and are skipped by name, with the reason printed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SPECPERF_SKIP_AARCH64:-0}" = 1 ]; then
  echo "ci-aarch64: skipped (SPECPERF_SKIP_AARCH64=1)"
  exit 0
fi

build_only=0
case "${1:-}" in
  "") ;;
  --build) build_only=1 ;;
  *)
    echo "ci-aarch64: unknown argument '$1' (none, or --build for the cross build alone)" >&2
    exit 2
    ;;
esac

TARGET=aarch64-unknown-linux-gnu
SYSROOT=/usr/aarch64-linux-gnu
start=$SECONDS
say() { echo "ci-aarch64 [$((SECONDS - start))s]: $*"; }

# --- toolchain (idempotent, every step bounded) --------------------------------------------------
# qemu-user provides qemu-aarch64; qemu-user-binfmt (+ binfmt-support, as containers have no
# systemd) registers it for aarch64 ELF files, so a test that spawns the cross-built specperf
# binary runs it under qemu too.
pkgs=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || pkgs+=(gcc-aarch64-linux-gnu)
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || pkgs+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || pkgs+=(qemu-user)
[ -e /usr/share/binfmts/qemu-aarch64 ] || pkgs+=(qemu-user-binfmt)
command -v update-binfmts >/dev/null 2>&1 || pkgs+=(binfmt-support)
if [ ${#pkgs[@]} -gt 0 ]; then
  say "installing ${pkgs[*]}"
  if ! command -v apt-get >/dev/null 2>&1 \
    || ! (timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 \
      apt-get install -y -qq --no-install-recommends "${pkgs[@]}") >/tmp/ci-aarch64-apt.log 2>&1; then
    echo "ci-aarch64: could not install ${pkgs[*]} with apt-get (needs Debian or Ubuntu, as root," >&2
    echo "  with the package mirror reachable; log: /tmp/ci-aarch64-apt.log). Install them by hand," >&2
    echo "  or set SPECPERF_SKIP_AARCH64=1 to skip the aarch64 leg on this machine." >&2
    exit 1
  fi
fi
if ! timeout 300 rustup target add "$TARGET" >/dev/null 2>&1; then
  echo "ci-aarch64: \`rustup target add $TARGET\` failed; the aarch64 standard library is needed" >&2
  exit 1
fi

# Registering needs root and a kernel that lets this container mount binfmt_misc; best effort.
binfmt=0
timeout 30 update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
if grep -qs '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
  binfmt=1
fi

# --- cross build and tests under qemu ------------------------------------------------------------
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $SYSROOT"
# The dynamic loader and libc for aarch64 programs that binfmt starts (children of the tests).
export QEMU_LD_PREFIX="$SYSROOT"
# The test profile with light optimisation: an unoptimised build under emulation runs the
# integration tests several times slower than the wall-clock bounds in them allow. Debug
# assertions and overflow checks stay on, as in the x86-64 run; no debug info (build time).
# Its own profile directory (target/aarch64-unknown-linux-gnu/qemu) keeps it apart from the rest.
# Emulation is still a few times slower than native, so the tests that tell faults apart by
# wall-clock thresholds (tests/integration/fault_matrix.rs) scale those by this factor; natively 1.
export SPECPERF_TEST_TIME_SCALE=4
PROFILE=(
  --config 'profile.qemu.inherits="dev"'
  --config 'profile.qemu.opt-level=1'
  --config 'profile.qemu.debug=false'
  --profile qemu
)
say "building the tests for $TARGET"
cargo test --locked --workspace --target "$TARGET" "${PROFILE[@]}" --lib --bins --tests --no-run
if [ "$build_only" = 1 ]; then
  say "built (--build: no tests run)"
  exit 0
fi

# The real-server suite (llamacpp::) drives llama-server, an x86-64 binary built for this CPU by
# scripts/llamacpp.sh: the x86-64 leg runs it; under qemu it would measure emulation, not our code.
SKIP=(--skip llamacpp::)
# Likewise the Dynamo suite (the Python frontend and mocker, x86-64), and the InferenceX stage
# harness built on it (it skips itself without SPECPERF_INFERENCEX_DIR anyway).
SKIP+=(--skip dynamo:: --skip inferencex::)
# The hung-server test bounds the whole run's wall time: under qemu the emulated start-up would
# be measured, not the waits it checks (the x86-64 leg runs it).
SKIP+=(--skip newcomer::a_hung_server)
# The SLA search test judges TTFT against a fixed millisecond limit: under qemu it would measure
# the emulated client, not where the simulator saturates (the x86-64 leg runs it).
SKIP+=(--skip sweep::the_sla_search)
# The bench-serving pacing test bounds ITL and TTFT in milliseconds: likewise.
SKIP+=(--skip bench_serving::tpot_and_itl_are_the_servers_pacing)
if [ "$binfmt" = 0 ]; then
  # These start target/<triple>/qemu/specperf as a child process (CARGO_BIN_EXE_specperf), which
  # the kernel can only execute through a binfmt_misc registration.
  echo "ci-aarch64: note: qemu could not be registered for aarch64 executables (binfmt_misc);"
  echo "  skipping the tests that spawn the binary: agentx, agentx_cli, bench_serving, completions, crash, gate,"
  echo "  inject, process, render, reports, security and shards::*, and the sweep and AgentX tests that do"
  for m in agentx_cli bench_serving completions crash gate inject process render reports security shards; do
    SKIP+=(--skip "$m::")
  done
  # By test name: `--skip agentx::` would also match the library's agentx::tests.
  SKIP+=(--skip agentx::profile_replays --skip agentx::the_replay_matches)
  SKIP+=(--skip agentx::conv_aware_routing)
  SKIP+=(--skip agentx::an_agentx_concurrency_sweep --skip sweep::sigterm_stops)
  SKIP+=(--skip sweep::bad_sweep_flags --skip sweep::a_concurrency_sweep_waits)
fi
say "running the tests under qemu-aarch64"
cargo test --locked --workspace --target "$TARGET" "${PROFILE[@]}" --lib --bins --tests \
  --no-fail-fast -- "${SKIP[@]}"

# --- console comparison --------------------------------------------------------------------------
# The embedded default (no --url: built-in simulator, bundled collection, fixed seeds) on both
# architectures; everything but timings must match: request and token counts, ISL/OSL, the
# acceptance length and its per-position rates. Masked: the loopback port, the artifact path, and
# every number on a latency, rate or throughput line (with its padding: column widths follow them),
# and the per-category AL rows: the simulator draws request n's plan from (seed, n) with n the
# arrival order, so which prompt gets which draws follows timing; the run's totals do not.
say "comparing the embedded default's console output with x86-64"
# The x86-64 binary of the test build (the same command, so nothing is rebuilt after the suite:
# `cargo build --bin` alone resolves the features without the dev-dependencies and builds again).
cargo test --quiet --locked --workspace --all-targets --no-run
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mask() {
  sed -E \
    -e 's#(http://127\.0\.0\.1:)[0-9]+#\1PORT#' \
    -e 's#^Artifacts: .*#Artifacts: DIR#' \
    -e '/\(ms\)|tokens\/s|^Throughput:/ s/ +[0-9]+(\.[0-9]+)?/ #/g' \
    -e '/^  [^ ]+ +[0-9]+ +([0-9.]+|n\/a)( |$)/ s/ +[0-9]+\.[0-9]+/ #/g' \
    "$1"
}
target/debug/specperf replay --ui none --artifact-dir "$tmp/x86_64" >"$tmp/x86_64.txt"
qemu-aarch64 -L "$SYSROOT" "target/$TARGET/qemu/specperf" replay --ui none \
  --artifact-dir "$tmp/aarch64" >"$tmp/aarch64.txt"
if ! diff -u <(mask "$tmp/x86_64.txt") <(mask "$tmp/aarch64.txt"); then
  echo "ci-aarch64: the aarch64 console report differs from x86-64's beyond timings (diff above)" >&2
  exit 1
fi
grep '^Acceptance length' "$tmp/aarch64.txt"
say "done: aarch64 build, tests under qemu and console comparison passed"
