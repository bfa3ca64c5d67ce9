#!/usr/bin/env bash
# A/B of the delay server built from different commits: `wrk -t 2 -c C -d 5s` at delay 0
# against each binary's `concur serve` in turn, ROUNDS rounds alternating the binaries, the
# server's user + sys CPU (from /proc) over each run divided by the requests wrk completed.
# How docs/benchmarks.md §17 measured the cost of the server's in-flight cap and echo budget.
# Build each commit's release binary first (e.g. `git worktree add /tmp/wt COMMIT &&
# CARGO_TARGET_DIR=/tmp/wt/target cargo build --release --bin concur`).
#
# usage: bench/server-ab.sh ROUNDS CONNECTIONS LABEL=BIN...
#   e.g. bench/server-ab.sh 5 100 before=/tmp/wt/target/release/concur after=target/release/concur
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:?usage: bench/server-ab.sh ROUNDS CONNECTIONS LABEL=BIN...}
conns=${2:?connections}
shift 2
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
[[ $conns =~ ^[1-9][0-9]*$ ]] || { echo "CONNECTIONS must be a positive number, not '$conns'" >&2; exit 2; }
[ $# -gt 0 ] || { echo "give at least one LABEL=BIN" >&2; exit 2; }
command -v wrk > /dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 2; }
raise_open_files
echo "load average at the start: $(cut -d' ' -f1 /proc/loadavg)"
results=$(mktemp)
for r in $(seq "$rounds"); do
  for lb in "$@"; do
    label=${lb%%=*} bin=${lb#*=}
    start_server srv
    before=$(proc_cpu "$srv_pid")
    out=$(wrk -t 2 -c "$conns" -d 5s "$srv_url/add?name=wrk&delay=0" 2>&1)
    after=$(proc_cpu "$srv_pid")
    kill "$srv_pid"; wait "$srv_pid" 2> /dev/null || true
    reqs=$(awk '/requests in/{print $1}' <<< "$out")
    rps=$(awk '/Requests\/sec/{print $2}' <<< "$out")
    us=$(python3 -c "b = sum(map(float, '$before'.split())); a = sum(map(float, '$after'.split())); print(f'{(a - b) / $reqs * 1e6:.2f}')")
    echo "round $r: $label: $rps req/s, server CPU $us µs per request"
    echo "$label $us $rps" >> "$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for label, us, rps in rows:
    med.setdefault(label, []).append((float(us), float(rps)))
print("\n| server | CPU per request (median) | requests/s (median) |")
print("|---|---:|---:|")
for label, v in med.items():
    print(f"| {label} | {statistics.median(u for u, _ in v):.2f} µs | {statistics.median(r for _, r in v):,.0f} |")
PY
rm -f "$results"
