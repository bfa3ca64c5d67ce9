#!/usr/bin/env bash
# Open-model benchmarks recorded in docs/benchmarks.md ("Arrivals at a fixed rate"):
#  1. against one `concur serve` at delay=0: `concur crawl --rate R` (async:100 and curl:100)
#     beside wrk2 -R R (100 connections, 2 threads) at the same rate, in rounds that alternate
#     the tools: achieved rate, p50/p99 latency (both corrected for coordinated omission) and
#     client CPU per request;
#  2. `--rate auto --slo 'p99<150ms'` on the crawl workload (/add with a 100 ms delay) for
#     async, curl, pool and green at W = 100: the highest rate each sustains.
# Usage: bench/rate.sh [OUT_DIR] [ROUNDS] [RATES...]. Needs wrk2 (WRK2=path, or wrk2 on PATH):
# build it from a checkout of giltene/wrk2 with `make` (about 30 s; needs libssl-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-rate}"
rounds="${2:-3}"
shift $(( $# > 2 ? 2 : $# )) || true
rates=("${@:-1000 4000}")
# shellcheck disable=SC2206
rates=(${rates[*]})
mkdir -p "$out"
source bench/lib.sh
need_wrk2
build
start_server srv
base="$srv_url/add?delay=0&name="
secs=10
: > "$out/rows.txt"
for r in $(seq "$rounds"); do
  for rate in "${rates[@]}"; do
    for m in async curl; do
      rate_concur $m "$rate" $secs "$base" "$out/concur-$m-$rate-$r.jsonl" >> "$out/rows.txt"
    done
    rate_wrk2 "$wrk2" "$rate" $secs "$base" "$out/wrk2-$rate-$r" >> "$out/rows.txt"
  done
done
echo "== 1. fixed rate, delay=0, 100 connections, medians over $rounds rounds"
python3 - "$out/rows.txt" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tool, rate, ach, p50, p99, cpu, errs = line.split()
    d[(int(rate), tool)].append((float(ach), int(p50), int(p99), float(cpu), int(errs)))
print("| asked/s | client | achieved/s | p50 | p99 | client CPU/request | errors |")
print("|---:|---|---:|---:|---:|---:|---:|")
for (rate, tool), v in sorted(d.items()):
    med = lambda i: statistics.median(x[i] for x in v)
    print(f"| {rate} | {tool} | {med(0):.0f} | {med(1)/1000:.2f} ms | {med(2)/1000:.2f} ms | {med(3):.0f} µs | {sum(x[4] for x in v)} |")
PY
echo "== 2. --rate auto --slo 'p99<150ms' on the crawl workload, W = 100"
$bin run -w "http:/add?name=crawl{rand}&delay=100" -m async:100 -m curl:100 -m pool:100 -m green:100 \
  --rate auto --slo 'p99<150ms' --json "$out/auto.jsonl" 2> "$out/auto.err" | tee "$out/auto.txt"
