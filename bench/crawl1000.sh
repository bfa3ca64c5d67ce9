#!/usr/bin/env bash
# The plain-HTTP goal left open by the crawl study: async:1000 on 1,000 x 100 ms (ideal 0.1 s),
# with where the time goes: per-request latency, the connect times concur now records, and
# the spread of task starts (the run's timeline). R runs against one `concur serve`.
# Usage: bench/crawl1000.sh [R] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-5}"
out="${2:-/tmp/concur-crawl1000}"
mkdir -p "$out"
source bench/lib.sh
build
start_server srv
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
$bin crawl "$srv_url/add?name={rand}&delay=100" -n 1000 -c 1000 --model async \
  -r "$reps" -q --json "$out/crawl1000.jsonl" > /dev/null
python3 - "$out/crawl1000.jsonl" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
runs = [l for l in lines if l["type"] == "run"]
walls = [r["wall_s"] for r in runs]
print(f"async:1000, 1000 x 100 ms: median wall {statistics.median(walls):.3f} s over {len(runs)} runs "
      f"({', '.join(f'{w:.3f}' for w in walls)}); ideal 0.100 s")
r0 = runs[0]
print(f"run 0: latency p50 {r0['latency_us']['p50']/1e3:.1f} ms p99 {r0['latency_us']['p99']/1e3:.1f} ms; "
      f"connect p50 {r0['connect_us']['p50']/1e3:.1f} ms p90 {r0['connect_us']['p90']/1e3:.1f} ms max {r0['connect_us']['max']/1e3:.1f} ms; "
      f"connections {r0['connections_opened']}")
starts = sorted(s for s, _ in r0["timeline_us"])
q = lambda p: starts[int(p * (len(starts) - 1))] / 1e3
print(f"task starts (ms from the run's start): 50% by {q(0.5):.1f}, 90% by {q(0.9):.1f}, last {q(1.0):.1f}")
PY
