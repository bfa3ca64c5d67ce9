#!/usr/bin/env bash
# HTTP/2 against HTTP/1.1 (issue 19), all against one `concur serve` (which speaks both):
#  1. 1,000 GETs of a 100 ms delay at W = 100: HTTP/2 over one connection (100 streams)
#     against HTTP/1.1 over 100 connections, for `async` and `curl`: wall, client CPU, server
#     CPU, client peak RSS, connections opened.
#  2. Throughput at delay=0: concur's HTTP/2 clients (async, async-local, curl) beside h2load (nghttp2-client) at
#     `-c 1 -m 100` and `-c 10 -m 10` (concur: W = 100 over --connections 1 and 10).
# ROUNDS rounds alternate the clients so that drift spreads evenly; medians are printed.
# --pinned runs the server on CPU 0 and every client on CPU 1 (taskset): each client drives a
# server that has one core to itself, as it would from another machine, instead of taking
# from the server's second core what it spends per request.
# Usage: bench/http2.sh [--pinned] [ROUNDS] [OUT_DIR]. Needs h2load (apt-get install nghttp2-client).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --pinned ]; then
  server_cpus=0 client_cpus=1
  shift
fi
rounds="${1:-3}"
out="${2:-/tmp/concur-http2}"
mkdir -p "$out"
source bench/lib.sh
command -v h2load > /dev/null || { echo "h2load is missing: apt-get install nghttp2-client" >&2; exit 1; }
build
start_server srv
echo "concur serve on $srv_url; machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)${server_cpus:+; server on CPU $server_cpus, clients on CPU $client_cpus}"

# One concur crawl; prints "label wall_s user+sys_s server_cpu_s max_rss_kib opened version tasks_ok".
crawl() { crawl_row "$srv_pid" "$out/run.jsonl" "$@"; }

median() { # file: "label value..." lines -> per label, the median of each column
  python3 - "$1" "$2" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split()
    rows[parts[0]].append(parts[1:])
print(sys.argv[2])
for label, rs in rows.items():
    cols = []
    for col in zip(*rs):
        try:
            cols.append(f"{statistics.median(float(x) for x in col):g}")
        except ValueError:
            cols.append(col[0])
    print(f"  {label:24} " + "  ".join(cols) + f"   ({len(rs)} runs)")
PY
}

echo "== 1. 1,000 x 100 ms at W = 100 ($rounds rounds)"
: > "$out/crawl.txt"
url="$srv_url/add?name={rand}&delay=100"
for r in $(seq "$rounds"); do
  crawl async:100-h1 "$url" 1000 100 async >> "$out/crawl.txt"
  crawl async:100-h2 "$url" 1000 100 async --http2 >> "$out/crawl.txt"
  crawl curl:100-h1 "$url" 1000 100 curl >> "$out/crawl.txt"
  crawl curl:100-h2 "$url" 1000 100 curl --http2 >> "$out/crawl.txt"
done
median "$out/crawl.txt" "label  wall_s  client_cpu_s  server_cpu_s  client_max_rss_kib  connections  http_version  tasks_ok"

echo "== 2. Throughput at delay=0, 100 streams in flight ($rounds rounds)"
: > "$out/rps.txt"
base="$srv_url/add?delay=0"
n=150000
for r in $(seq "$rounds"); do
  for c in 1 10; do
    m=$((100 / c))
    http2_h2load $c $m $n "$base" >> "$out/rps.txt"
    for model in async async-local curl; do
      http2_concur "$srv_pid" "$out/run.jsonl" $model $c $n "$base" >> "$out/rps.txt"
    done
  done
done
median "$out/rps.txt" "label  requests_per_s  client_cpu_us_per_request"
