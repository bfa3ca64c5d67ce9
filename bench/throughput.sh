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
    $bin crawl "${base}{rand}" -n $n -c 100 --model $m -q --json "$out/concur-$m-$r.jsonl" --csv - \
      | awk -F, -v m="concur-$m:100" -v n=$n 'NR==2 { printf "%s %.0f\n", m, n/$9 }' >> "$out/rps.txt"
  done
  wrk -t 2 -c 100 -d 5s "${base}wrk" | awk '/Requests\/sec/ { printf "wrk %.0f\n", $2 }' >> "$out/rps.txt"
  hey -n $n -c 100 "${base}hey" | awk '/Requests\/sec/ { printf "hey %.0f\n", $2 }' >> "$out/rps.txt"
  if [ -x "$oha" ]; then
    "$oha" -n $n -c 100 --no-tui --output-format json "${base}oha" > "$out/oha-$r.json"
    python3 -c "import json,sys; print('oha %.0f' % json.load(open(sys.argv[1]))['summary']['requestsPerSec'])" "$out/oha-$r.json" >> "$out/rps.txt"
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
