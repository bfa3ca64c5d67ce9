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
wrk2="${WRK2:-$(command -v wrk2 || true)}"
[ -x "$wrk2" ] || { echo "wrk2 not found: set WRK2=/path/to/wrk (built from giltene/wrk2)" >&2; exit 2; }
source bench/lib.sh
build
start_server srv
base="$srv_url/add?delay=0&name="
secs=10
: > "$out/rows.txt"
for r in $(seq "$rounds"); do
  for rate in "${rates[@]}"; do
    for m in async curl; do
      f="$out/concur-$m-$rate-$r.jsonl"
      $bin crawl "${base}{rand}" --rate "$rate" --duration ${secs}s -c 100 --model $m -q --json "$f" >/dev/null
      python3 - "$f" "concur-$m:100" "$rate" >> "$out/rows.txt" <<'PY'
import json, sys
run = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
cpu = (run["user_s"] + run["sys_s"]) / max(run["tasks_ok"], 1) * 1e6
print(sys.argv[2], sys.argv[3], "%.1f" % run["rate_achieved"], run["latency_us"]["p50"],
      run["latency_us"]["p99"], "%.1f" % cpu, run["tasks_failed"])
PY
    done
    # wrk2 calibrates for its first 10 s and reports latency after it; its -R is per
    # connection group, spread over the threads. CPU from /usr/bin/time.
    /usr/bin/time -f "%U %S" -o "$out/wrk2-$rate-$r.time" \
      "$wrk2" -t 2 -c 100 -d $((secs + 10))s -R "$rate" --latency "${base}wrk2" > "$out/wrk2-$rate-$r.txt"
    python3 - "$out/wrk2-$rate-$r.txt" "$out/wrk2-$rate-$r.time" "$rate" >> "$out/rows.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(q):
    m = re.search(r"^\s*%s%%\s+([\d.]+)(us|ms|s)\s*$" % re.escape(q), t, re.M)
    v, u = float(m.group(1)), m.group(2)
    return int(v * {"us": 1, "ms": 1e3, "s": 1e6}[u])
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
n = int(re.search(r"(\d+) requests in", t).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
print("wrk2", sys.argv[3], "%.1f" % rps, ms("50.000"), ms("99.000"), "%.1f" % ((u + s) / n * 1e6),
      errs.group(1) if errs else 0)
PY
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
