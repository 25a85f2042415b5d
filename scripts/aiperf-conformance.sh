#!/usr/bin/env bash
# Conformance check against AIPerf's own readers: a private venv with aiperf==0.13.0 from PyPI
# (pinned), then scripts/aiperf_conformance.py on artifact directories.
#
#   scripts/aiperf-conformance.sh --setup        create (or reuse) the venv and print its path
#   scripts/aiperf-conformance.sh DIR... [--speed-bench DIR=CATEGORY]...
#                                               setup, then check each specperf artifact DIR with
#                                               AIPerf's readers (scripts/aiperf_conformance.py)
#
# The venv lands outside the clone, under
# ${SPECPERF_CACHE:-~/.cache/specperf}/aiperf-0.13.0-py<python version>, keyed by the Python
# version (a venv is tied to its interpreter): a fresh machine installs it, the next run reuses it.
# `pip freeze` of the resolved set is written next to it (pip-freeze.txt). The tests find it
# through `target/aiperf-venv` (a symlink this script writes) or $SPECPERF_AIPERF_VENV.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.13.0
PY="${PYTHON:-python3}"
pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV="${SPECPERF_AIPERF_VENV:-${SPECPERF_CACHE:-$HOME/.cache/specperf}/aiperf-$VERSION-py$pyver}"

# A venv is usable when its aiperf imports and reports the pinned version; anything else (a
# half-finished install, a moved interpreter) is rebuilt from scratch.
venv_ok() {
  [ -x "$VENV/bin/python" ] && [ -s "$VENV/pip-freeze.txt" ] \
    && "$VENV/bin/python" - "$VERSION" >/dev/null 2>&1 <<'PYEOF'
import importlib.metadata as m, sys
import aiperf.common.models  # noqa: F401 (the models the check validates with)
sys.exit(0 if m.version("aiperf") == sys.argv[1] else 1)
PYEOF
}

if ! venv_ok; then
  echo "aiperf-conformance: installing aiperf==$VERSION into $VENV (1.2 GB, about 5 minutes on 2 busy cores)" >&2
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "aiperf==$VERSION" \
    || { echo "aiperf-conformance: pip install aiperf==$VERSION failed" >&2; rm -rf "$VENV"; exit 1; }
  "$VENV/bin/pip" freeze --disable-pip-version-check >"$VENV/pip-freeze.txt.part"
  mv "$VENV/pip-freeze.txt.part" "$VENV/pip-freeze.txt"
  venv_ok || { echo "aiperf-conformance: $VENV does not import aiperf $VERSION" >&2; exit 1; }
fi

mkdir -p target
# By its real path: $SPECPERF_AIPERF_VENV may be this very link (it would then point at itself).
real=$(cd "$VENV" && pwd -P)
[ "$real" = "$(cd target && pwd -P)/aiperf-venv" ] || ln -sfn "$real" target/aiperf-venv

if [ "${1:-}" = "--setup" ]; then
  echo "$VENV"
  exit 0
fi
[ $# -gt 0 ] || { echo "usage: $0 --setup | ARTIFACT_DIR... [--speed-bench DIR=CATEGORY]..." >&2; exit 2; }
exec "$VENV/bin/python" scripts/aiperf_conformance.py "$@"
