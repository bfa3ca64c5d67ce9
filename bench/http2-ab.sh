#!/usr/bin/env bash
# Two concur binaries alternated over HTTP/2 at delay 0 (100 streams over 1 and over 10 h2c
# connections, N GETs each), beside h2load in the same rounds, against one `concur serve`:
# req/s and client CPU µs a request, medians (docs/benchmarks.md §21).
# Usage: bench/http2-ab.sh OLD_BIN NEW_BIN [MODEL] [N] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 model=${3:-async} n=${4:-100000} rounds=${5:-3}
source bench/lib.sh
bin=$new
command -v h2load > /dev/null || { echo "h2load is missing: apt-get install nghttp2-client" >&2; exit 1; }
start_server srv
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
base="$srv_url/add?delay=0"
samples=$(mktemp)
for r in $(seq "$rounds"); do
  for c in 1 10; do
    http2_h2load "$c" $((100 / c)) "$n" "$base" | tee -a "$samples"
    for which in old new; do
      bin=${!which}
      http2_concur "$srv_pid" /tmp/http2-ab.jsonl "$model" "$c" "$n" "$base" | sed "s/^/$which-/" | tee -a "$samples"
    done
  done
done
sort "$samples" > "$samples.sorted"
medians "$samples.sorted" | awk '
  BEGIN { print "| client | req/s (median) | client CPU µs a request (median) |"; print "|---|---:|---:|" }
  { printf "| %s | %.0f | %.2f |\n", $1, $2, $3 }'
