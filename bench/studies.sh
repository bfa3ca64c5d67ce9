#!/usr/bin/env bash
# The full built-in studies, as recorded in docs/benchmarks.md: concur run gil and
# concur run mailer (defaults), results and Markdown tables into OUT_DIR.
# Usage: bench/studies.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-bench}"
mkdir -p "$out"
cargo build --release -q
for study in gil mailer; do
  echo "== concur run $study"
  target/release/concur run "$study" --json "$out/$study.jsonl" --markdown "$out/$study.md" \
    --format ruby | tee "$out/$study.ruby.txt"
done
echo "results in $out"
