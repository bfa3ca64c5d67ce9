#!/usr/bin/env bash
# Page faults of a run of 100,000 empty tasks (`fib:0`, 5 runs and a warm-up, every process
# of the study counted by `perf stat -e page-faults`), for each binary given and each model:
# memory a task first touches, counted rather than timed, so that a record or a reply cell
# that grew shows here whatever the machine's load (docs/benchmarks.md §28).
# Usage: bench/task-faults.sh ROUNDS BIN... -- MODEL...   (e.g. 3 old/concur new/concur -- actor:2 seq)
# Needs perf (apt-get install linux-perf).
set -euo pipefail
rounds=$1
shift
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
models=("$@")
[ ${#bins[@]} -gt 0 ] && [ ${#models[@]} -gt 0 ] || { echo "usage: bench/task-faults.sh ROUNDS BIN... -- MODEL..." >&2; exit 2; }
command -v perf > /dev/null || { echo "perf is missing (apt-get install linux-perf)" >&2; exit 2; }
out=$(mktemp)
for r in $(seq "$rounds"); do
  for m in "${models[@]}"; do
    for b in "${bins[@]}"; do
      f=$(perf stat -x, -e page-faults -- "$b" run -w fib:0 -m "$m" -n 100000 -r 5 --warmup 1 -q 2>&1 >/dev/null | awk -F, '/page-faults/{print $1}')
      echo "$m $b $f" >> "$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m, b, f = l.split()
    d[(m, b)].append(int(f))
for (m, b), v in d.items():
    print(f"{m:10} {b:50} page faults, median of {len(v)}: {statistics.median(v):,.0f}")
PY
