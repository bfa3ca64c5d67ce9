#!/usr/bin/env bash
# The classic experiments' own tables, in their own languages, from the programs concur ships
# (src/classic/, the ones `--classic` runs one cell at a time):
#   gil.py --table   (CPython GIL experiment)   -> $OUT/gil.txt, $OUT/gil.json
#   mailer.rb bm     (Ruby mailer experiment)   -> $OUT/mailer.txt
# Usage: bench/classic/run.sh [OUT_DIR]   (default /tmp/concur-classic)
# Installs ruby with apt-get if missing; python3 (/usr/bin/python3) must exist.
# math1 is sized at 750,000 iterations (≈ 56 ms a call on the project's machine, as long as
# concur's spin:60000000 task); extra flags go through GIL_ARGS / MAILER_ARGS and win, e.g.
#   GIL_ARGS="--repeat 3 --iterations 500000" MAILER_ARGS="--many-threads 10000" bench/classic/run.sh
# Safe to re-run: outputs are overwritten, installed packages are skipped.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
programs="$here/../../src/classic"
out="${1:-/tmp/concur-classic}"
python="${PYTHON:-/usr/bin/python3}"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else echo "need root (or sudo) to run: $*" >&2; exit 1
    fi
}

if ! command -v ruby >/dev/null 2>&1; then
    echo "== installing ruby (apt-get)"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y ruby
fi
if ! [ -x "$python" ]; then
    echo "python not found at $python (set PYTHON=...)" >&2
    exit 1
fi

read -r -a gil_args <<<"${GIL_ARGS:-}"
read -r -a mailer_args <<<"${MAILER_ARGS:-}"

mkdir -p "$out"

echo "== gil.py --table ($("$python" --version 2>&1))"
"$python" "$programs/gil.py" --table --iterations 750000 --json "$out/gil.json" \
    ${gil_args[@]+"${gil_args[@]}"} | tee "$out/gil.txt"

echo "== mailer.rb bm ($(ruby --version))"
ruby "$programs/mailer.rb" bm ${mailer_args[@]+"${mailer_args[@]}"} | tee "$out/mailer.txt"

echo "== results written to $out:"
ls -l "$out"
