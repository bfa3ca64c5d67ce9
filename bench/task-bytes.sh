#!/usr/bin/env bash
# What a waiting `async` task holds, from outside (docs/benchmarks.md §26, §31): tree PSS of
# `async:N`, `async-local:N` and the bare tokio floor (`rust:tokio-bare`) for N tasks of
# `sleep:WAIT`, each ROUNDS times (3 runs each, the three rows alternated within one study),
# then the medians and their ratios to the floor. The guard on the same cost from inside is
# tests/task_allocations.rs.
#
# Usage: bench/task-bytes.sh [N] [ROUNDS] [LABEL=BIN...]. Defaults: N=100000, ROUNDS=2, the
# release binary built here. With LABEL=BIN pairs (e.g. before=/tmp/concur-old
# after=/tmp/concur-new), every round runs each binary's study in turn, so that the binaries
# alternate, and each binary's rows are set against the floor of its own studies.
# TASK_WAIT sets the wait (default 2s; the tasks study's is 10s); TASK_FLOOR=BIN runs every
# study's floor with that binary (one that counts its tasks into the study's page, so that
# its tree is sampled at its end as the models' are: §31), whichever binary runs the models.
# Each row prints its median CPU (user + system) and wake-up lateness (p50, p99) beside its PSS.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
n=${1:-100000}
rounds=${2:-2}
shift $(($# < 2 ? $# : 2))
wait=${TASK_WAIT:-2s}
wait_ms=$(python3 -c "import re,sys; v,u=re.fullmatch(r'([0-9.]+)(ms|s)', sys.argv[1]).groups(); print(int(float(v)*(1 if u=='ms' else 1000)))" "$wait")
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  build
  bins=("this=$bin")
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  for spec in "${bins[@]}"; do
    label=${spec%%=*}
    b=${spec#*=}
    "$b" run -q -w "sleep:$wait" -m "async:$n" -m "async-local:$n" -n "$n" -r 3 \
      --peer "rust:tokio-bare=${TASK_FLOOR:-$b} classic tokio-tasks --tasks {tasks} --wait-ms $wait_ms" \
      --json "$out/$label.$r.jsonl" > /dev/null
  done
done
python3 - "$out"/*.jsonl <<'PY'
import json, os, statistics, sys
pss, started, cpu, late = {}, {}, {}, {}
for path in sys.argv[1:]:
    label = os.path.basename(path).split(".")[0]
    for line in open(path):
        d = json.loads(line)
        if d.get("type") == "run" and d.get("tree_pss_kib"):
            pss.setdefault((label, d["model"]), []).append(d["tree_pss_kib"])
            cpu.setdefault((label, d["model"]), []).append(d.get("user_s", 0) + d.get("sys_s", 0))
            w = (d.get("wakeups") or {}).get("late_us") or {}
            if "p50" in w:
                late.setdefault((label, d["model"]), []).append((w["p50"], w["p99"]))
            # The sample when every task had started (the tree holding every waiting task),
            # where the run took one.
            if d.get("tree_pss_all_started_kib"):
                started.setdefault((label, d["model"]), []).append(d["tree_pss_all_started_kib"])
med = {k: statistics.median(v) for k, v in pss.items()}
for (label, m), v in sorted(med.items()):
    runs = pss[(label, m)]
    print(f"{label} {m}: tree PSS median {v / 1024:.1f} MiB over {len(runs)} runs "
          f"({min(runs) / 1024:.1f}-{max(runs) / 1024:.1f}), "
          f"CPU median {statistics.median(cpu[(label, m)]):.2f} s")
    if (label, m) in late:
        ws = late[(label, m)]
        print(f"{label} {m}: late p50 median {statistics.median(w[0] for w in ws) / 1000:.1f} ms, "
              f"p99 median {statistics.median(w[1] for w in ws) / 1000:.1f} ms")
for (label, m), v in sorted(started.items()):
    print(f"{label} {m}: all started, median {statistics.median(v) / 1024:.1f} MiB over {len(v)} runs")
for (label, m), v in sorted(med.items()):
    floor = med.get((label, "rust:tokio-bare"))
    if floor and m != "rust:tokio-bare":
        line = f"{label} {m}: {v / floor:.3f}x the floor"
        a, f = started.get((label, m)), started.get((label, "rust:tokio-bare"))
        if a and f:
            line += f" (all started: {statistics.median(a) / statistics.median(f):.3f}x)"
        print(line)
PY
