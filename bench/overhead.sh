#!/usr/bin/env bash
# The models' own cost per task: every model runs N empty tasks (fib:0) and we divide the
# median wall time (5 runs, each in a fresh process) by N. Usage: bench/overhead.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-bench}"
mkdir -p "$out"
source bench/lib.sh
build

# model and task count: enough tasks that the run takes well over the timer's resolution.
cases=(
  "seq 100000" "pool:2 100000" "rayon:2 100000" "async:2 100000" "async-local:2 100000"
  "thread 10000" "fork 2000" "spawn 1000"
)
# Actors and job queues (issue 4): the SQLite queue writes two transactions a job.
cases+=("actor:2 100000" "jobs-memory:2 100000" "jobs:2 10000")
printf '%-16s %8s %12s %14s\n' model tasks wall_median per_task
for c in "${cases[@]}"; do
  set -- $c
  $bin run -w fib:0 -m "$1" -n "$2" -r 5 --warmup 1 -q --json "$out/overhead-${1//:/-}.jsonl" --csv - \
    | awk -F, -v m="$1" -v n="$2" 'NR==2 {
        per = $9 / n;
        unit = "us"; v = per * 1e6;
        printf "%-16s %8d %10.4f s %11.3f %s\n", m, n, $9, v, unit }'
done
