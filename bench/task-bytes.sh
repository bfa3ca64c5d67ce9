#!/usr/bin/env bash
# What a waiting `async` task holds, from outside (docs/benchmarks.md §26): tree PSS of
# `async:N` and of the bare tokio floor (`rust:tokio-bare`) for N tasks of `sleep:2s`, each
# ROUNDS times (3 runs each, the two models alternated within one study), then the medians and
# their ratio. The guard on the same cost from inside is tests/task_allocations.rs.
# Usage: bench/task-bytes.sh [N] [ROUNDS]. Defaults: N=100000, ROUNDS=2.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
n=${1:-100000}
rounds=${2:-2}
build
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  "$bin" run -q -w sleep:2s -m "async:$n" -n "$n" -r 3 \
    --peer "rust:tokio-bare=$bin classic tokio-tasks --tasks {tasks} --wait-ms 2000" \
    --json "$out/$r.jsonl" > /dev/null
done
python3 - "$out"/*.jsonl <<'PY'
import json, statistics, sys
pss = {}
for path in sys.argv[1:]:
    for line in open(path):
        d = json.loads(line)
        if d.get("type") == "run" and d.get("tree_pss_kib"):
            pss.setdefault(d["model"], []).append(d["tree_pss_kib"])
med = {m: statistics.median(v) for m, v in pss.items()}
for m, v in med.items():
    print(f"{m}: tree PSS median {v / 1024:.1f} MiB over {len(pss[m])} runs")
floor = med.get("rust:tokio-bare")
for m, v in med.items():
    if floor and m != "rust:tokio-bare":
        print(f"{m}: {v / floor:.2f}x the floor")
PY
