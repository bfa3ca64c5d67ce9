#!/usr/bin/env bash
# The tasks study beside every runtime, as recorded in docs/benchmarks.md §19: one run of
# `concur run tasks --classic` (N = 1, 10,000, 100,000 and 1,000,000 tasks that each wait
# 10 s, under concur's models and the programs of Go, Node.js, Java, Elixir, CPython, MRI
# and a bare tokio program), results, the Markdown table and the terminal output into OUT_DIR;
# then the 1,000,000-task rows, memory against the floor of concur's own runtime
# (rust:tokio-bare) and concur's async wake-ups at 100,000 tasks, as the document quotes them.
# Needs the toolchains `concur classic install` installs (missing ones are left out with a
# note). About 12 minutes with -r 1 (the default here), 35 with -r 3. Run nothing else
# meanwhile: the thread cells take every process id this machine has for a few seconds.
# Usage: bench/tasks.sh [OUT_DIR] [REPEAT]   (CONCUR=path/to/concur to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-tasks}"
repeat="${2:-1}"
mkdir -p "$out"
source bench/lib.sh
if [ -z "${CONCUR:-}" ]; then
  build
  CONCUR=$bin
fi
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$CONCUR" run tasks --classic -r "$repeat" --json "$out/tasks.jsonl" \
  --markdown "$out/tasks.md" -i | tee "$out/tasks.txt"
python3 - "$out/tasks.jsonl" <<'PY'
import json, sys
cells = [json.loads(l) for l in open(sys.argv[1])]
cells = [c for c in cells if c["type"] == "cell"]
def mib(kib): return f"{kib / 1024:.1f}" if kib else "-"
print("\nN = 1,000,000: row, tree PSS MiB, peak RSS MiB, PSS/task B, start all s, late p50/p99/max ms, CPU s, failed")
for c in cells:
    if c["tasks"] != 1_000_000:
        continue
    w = c.get("wakeups") or {}
    late = w.get("late_us") or {}
    cpu = (c.get("user_median_s") or 0) + (c.get("sys_median_s") or 0)
    lat = "/".join(f"{late[k] / 1000:.1f}" for k in ("p50", "p99", "max")) if late else "-"
    per = c.get("pss_per_task_b")
    print(f"{c['model']:20} {mib(c.get('tree_pss_kib')):>8} {mib(c.get('max_rss_kib')):>8} "
          f"{per if per is None else round(per):>6} {w.get('start_all_s', '-')!s:>8.6} {lat:>18} "
          f"{cpu:6.2f} {c['runs_failed']}/{c['runs']}")
by = {(c["model"], c["tasks"]): c for c in cells}
floor = by.get(("rust:tokio-bare", 1_000_000), {}).get("tree_pss_kib")
others = [c["tree_pss_kib"] for c in cells if c["tasks"] == 1_000_000 and c.get("tree_pss_kib")
          and c["runs_failed"] == 0 and c.get("external") and c["model"] != "rust:tokio-bare"]
for m in ("async:1000000", "async-local:1000000", "actor:1000000"):
    c = by.get((m, 1_000_000))
    if c and c.get("tree_pss_kib") and floor:
        print(f"{m}: {c['tree_pss_kib'] / floor:.2f}x the floor (rust:tokio-bare); "
              f"{'less' if others and c['tree_pss_kib'] < min(others) else 'not less'} than every other runtime")
c = by.get(("async:100000", 100_000))
if c and c.get("wakeups"):
    print(f"async:100000 wake-ups: max {c['wakeups']['late_us']['max'] / 1000:.2f} ms late (target: within 1 ms)")
PY
echo "results in $out"
