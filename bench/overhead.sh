#!/usr/bin/env bash
# The models' own cost per task: every model runs N empty tasks (fib:0) and we divide the
# median wall time (5 runs, each in a fresh process) by N. Usage: bench/overhead.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-bench}"
mkdir -p "$out"
source bench/lib.sh
build

printf '%-16s %8s %12s %14s\n' model tasks wall_median per_task
for c in "${overhead_cases[@]}"; do
  set -- $c
  overhead_case "$1" "$2" "$out/overhead-${1//:/-}.jsonl"
done
