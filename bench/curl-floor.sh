#!/usr/bin/env bash
# libcurl's own floor against `curl:100` and wrk (docs/benchmarks.md §21, issue 32): N GETs at
# delay 0 with 100 at once against one `concur serve`, ROUNDS rounds alternating
#   floor     examples/curl_floor.rs: the same libcurl build and request as curl:W driven by
#             libcurl's multi interface with nothing around it (no records, no sampler)
#   curl:100  concur crawl --model curl:100
#   wrk       wrk -t 2 -c 100 for as long as the floor took
# Each line: requests/s and the client's CPU µs a request (its rusage; wrk's from GNU time).
# Usage: bench/curl-floor.sh [N] [ROUNDS] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
rounds=${2:-5}
out=${3:-/tmp/concur-curl-floor}
mkdir -p "$out"
command -v wrk > /dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
source bench/lib.sh
build
cargo build --release -q --example curl_floor
floor=${CARGO_TARGET_DIR:-$PWD/target}/release/examples/curl_floor
start_server srv
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$out/samples.txt"
for r in $(seq "$rounds"); do
  /usr/bin/time -f '%U %S' -o "$out/time" "$floor" "$srv_url/add?delay=0&name=" "$n" 100 > "$out/floor.txt"
  read -r rps _ wall _ < "$out/floor.txt"
  read -r u s < "$out/time"
  echo "floor $rps $(awk -v u="$u" -v s="$s" -v n="$n" 'BEGIN { printf "%.2f", (u + s) / n * 1e6 }')" | tee -a "$out/samples.txt"
  $bin crawl "$srv_url/add?delay=0&name={i}" -n "$n" -c 100 --model curl -q -i --json "$out/curl.jsonl" > /dev/null
  python3 - "$out/curl.jsonl" <<'PY' | tee -a "$out/samples.txt"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
n = r["tasks_ok"] + r["tasks_failed"]
print(f"curl:100 {r['tasks_ok'] / r['wall_s']:.0f} {(r['user_s'] + r['sys_s']) / n * 1e6:.2f}")
PY
  secs=$(awk -v w="$wall" 'BEGIN { s = int(w + 0.5); print (s < 2 ? 2 : s) }')
  /usr/bin/time -f '%U %S' -o "$out/time" wrk -t 2 -c 100 -d "${secs}s" "$srv_url/add?delay=0&name=x" > "$out/wrk.txt"
  read -r u s < "$out/time"
  python3 - "$out/wrk.txt" "$u" "$s" <<'PY' | tee -a "$out/samples.txt"
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
total = int(re.search(r"(\d+) requests in", text).group(1))
print(f"wrk {rps:.0f} {(float(sys.argv[2]) + float(sys.argv[3])) / total * 1e6:.2f}")
PY
done
medians "$out/samples.txt" | awk '
  BEGIN { print "| client | requests/s (median) | client CPU µs a request | req/s vs floor | CPU vs floor |"; print "|---|---:|---:|---:|---:|" }
  $1 == "floor" { fr = $2; fc = $3 }
  { printf "| %s | %.0f | %.2f | %.2f× | %.2f× |\n", $1, $2, $3, $2 / fr, $3 / fc }'
