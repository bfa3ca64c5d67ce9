#!/usr/bin/env bash
# Throughput against one `concur serve` with delay=0 and 100 connections: concur's clients
# beside wrk, hey and oha, in rounds that alternate the tools so drift spreads evenly; prints
# each tool's median requests/s. Usage: bench/throughput.sh [ROUNDS] [OUT_DIR]
# Needs wrk and hey (apt) and, if present, oha (cargo install oha --root /tmp/oha: ~25 min).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
out="${2:-/tmp/concur-throughput}"
mkdir -p "$out"
source bench/lib.sh
build
oha="$(command -v oha || echo /tmp/oha/bin/oha)"
start_server srv
base="$srv_url/add?delay=0&name="
n=150000
: > "$out/rps.txt"
for r in $(seq "$rounds"); do
  for m in async async-local curl; do
    throughput_concur $m $n "$base" "$out/concur-$m-$r.jsonl" >> "$out/rps.txt"
  done
  throughput_wrk 5 "$base" >> "$out/rps.txt"
  throughput_hey $n "$base" >> "$out/rps.txt"
  if [ -x "$oha" ]; then
    throughput_oha "$oha" $n "$base" "$out/oha-$r.json" >> "$out/rps.txt"
  fi
done
echo "median requests/s over $rounds rounds (delay=0, 100 connections, one concur serve):"
python3 - "$out/rps.txt" <<'PY'
import statistics, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, v = line.split()
    d[k].append(float(v))
for k, v in sorted(d.items(), key=lambda kv: -statistics.median(kv[1])):
    print(f"{k:22} {statistics.median(v):8.0f}   runs: {', '.join(f'{x:.0f}' for x in v)}")
PY
