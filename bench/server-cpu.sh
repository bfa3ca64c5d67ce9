#!/usr/bin/env bash
# The delay server's CPU per request against the number of connections, with the delay held
# fixed: `wrk -t 2 -c C -d 5s` against one `concur serve` at each of 100 and 10,000 connections,
# for delay 0 and delay 100 ms, ROUNDS rounds alternating the four cases; the server's user +
# sys CPU (from /proc) over each run divided by the requests wrk completed. Prints each round
# and the medians, with the ratio 10,000 / 100 for each delay.
# Usage: bench/server-cpu.sh [ROUNDS]   (default 3). Needs wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
command -v wrk > /dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 2; }
build
raise_open_files
start_server srv
echo "load average at the start: $(cut -d' ' -f1 /proc/loadavg)"
cases="100/0 10000/0 100/100 10000/100"
results=$(mktemp)
for r in $(seq "$rounds"); do
  for c in $cases; do
    conns=${c%/*} delay=${c#*/}
    before=$(proc_cpu "$srv_pid")
    wrk_out=$(wrk -t 2 -c "$conns" -d 5s "$srv_url/add?name=wrk&delay=$delay" 2>&1)
    after=$(proc_cpu "$srv_pid")
    reqs=$(awk '/requests in/{print $1}' <<< "$wrk_out")
    rps=$(awk '/Requests\/sec/{print $2}' <<< "$wrk_out")
    us=$(python3 -c "b = sum(map(float, '$before'.split())); a = sum(map(float, '$after'.split())); print(f'{(a - b) / $reqs * 1e6:.1f}')")
    echo "round $r: $conns connections, delay $delay ms: $rps req/s, server CPU $us µs per request"
    echo "$conns $delay $us $rps" >> "$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for c, d, us, rps in rows:
    med.setdefault((int(c), int(d)), []).append((float(us), float(rps)))
print("\n| connections | delay | server CPU per request (median) | requests/s (median) |")
print("|---:|---:|---:|---:|")
for (c, d), v in sorted(med.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"| {c:,} | {d} ms | {statistics.median(u for u, _ in v):.1f} µs | {statistics.median(r for _, r in v):,.0f} |")
for d in (0, 100):
    lo = statistics.median(u for u, _ in med[(100, d)])
    hi = statistics.median(u for u, _ in med[(10000, d)])
    print(f"delay {d} ms: 10,000 connections cost {hi / lo:.2f}x the CPU per request of 100")
PY
rm -f "$results"
