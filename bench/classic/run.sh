#!/usr/bin/env bash
# Run the classic-language versions of concur's experiments:
#   gil.py     (CPython GIL experiment)   -> $OUT/gil.txt, $OUT/gil.json
#   mailer.rb  (Ruby mailer experiment)   -> $OUT/mailer.txt
# Usage: bench/classic/run.sh [OUT_DIR]   (default /tmp/concur-classic)
# Installs ruby with apt-get if missing; python3 (/usr/bin/python3) must exist.
# Extra flags can be passed through GIL_ARGS / MAILER_ARGS, e.g.
#   GIL_ARGS="--repeat 3" MAILER_ARGS="--threads-10k" bench/classic/run.sh
# Safe to re-run: outputs are overwritten, installed packages are skipped.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
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

echo "== gil.py ($("$python" --version 2>&1))"
"$python" "$here/gil.py" --json "$out/gil.json" ${gil_args[@]+"${gil_args[@]}"} | tee "$out/gil.txt"

echo "== mailer.rb ($(ruby --version))"
ruby "$here/mailer.rb" ${mailer_args[@]+"${mailer_args[@]}"} | tee "$out/mailer.txt"

echo "== results written to $out:"
ls -l "$out"
