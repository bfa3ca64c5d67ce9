#!/usr/bin/env bash
# bench/overhead.sh's measure (N empty tasks `fib:0`, 5 runs + 1 warm-up, median wall / N)
# for two binaries in one session, ROUNDS rounds alternating them, medians per model: to tell
# a change's cost per task from a machine's drift.
# Usage: bench/overhead-ab.sh ROUNDS OLD_BIN NEW_BIN [MODEL...] (default: seq pool:2 async:2 actor:2)
# An old binary: git worktree add /tmp/old COMMIT && (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release)
set -euo pipefail
rounds=$1 old=$2 new=$3
shift 3
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(seq pool:2 async:2 actor:2)
out=$(mktemp -d)
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for v in old new; do
    bin=$old; [ "$v" = new ] && bin=$new
    for m in "${models[@]}"; do
      w=$("$bin" run -w fib:0 -m "$m" -n 100000 -r 5 --warmup 1 -q --json "$out/r.jsonl" --csv - | awk -F, 'NR==2{print $9}')
      echo "$r $v $m $w" >> "$out/ab.txt"
    done
  done
done
python3 - "$out/ab.txt" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
order = []
for l in open(sys.argv[1]):
    r, v, m, w = l.split()
    d[(m, v)].append(float(w) / 100000 * 1e6)
    if m not in order:
        order.append(m)
for m in order:
    o, n = statistics.median(d[(m, "old")]), statistics.median(d[(m, "new")])
    print(f"{m:14} old {o:.3f} µs  new {n:.3f} µs per task  new/old {n / o:.3f}")
PY
