#!/usr/bin/env bash
# Where the async client's memory goes at W connections: one `async:W` cell of N requests
# (100 ms each, against one `concur serve`) run in-process by examples/http_heap.rs under
# heaptrack, then the largest allocation sites at the peak, each with its number of calls
# (one call per connection is per-connection state). Usage: bench/heap.sh [N] [W] [OUT_DIR]
# Defaults: N=20000, W=10000. Needs heaptrack (apt-get install heaptrack).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
connections_args 20000 10000 /tmp/concur-heap "$@"
build_profiling
cargo build --profile profiling -q --example http_heap
start_server srv
rm -f "$out"/heap.*
heaptrack -o "$out/heap" target/profiling/examples/http_heap \
  "$srv_url/add?name={rand}&delay=100" "$n" "$w" > /dev/null
heaptrack_print -f "$out"/heap.* --print-peaks 1 --print-allocators 0 --print-leaks 0 \
  --print-temporary 0 --peak-limit 12 --sub-peak-limit 12 > "$out/peaks.txt" 2>/dev/null
# Each site: its bytes at the peak, its calls, and its first frames below the allocator.
python3 - "$out/peaks.txt" <<'PY'
import re, sys
sites, cur = [], None
for line in open(sys.argv[1]):
    if "consumed over" in line:
        cur = [line.strip(), []]
        sites.append(cur)
    elif cur is not None and re.match(r"^ {4}\S", line) and len(cur[1]) < 3:
        name = line.strip()
        if not re.search(r"alloc::|raw_vec|RawVec|__rust|^_RNv|^<?alloc", name):
            cur[1].append(re.sub(r"::h[0-9a-f]{16}$", "", name))
for head, frames in sites[:10]:
    print(head)
    for f in frames:
        print("    " + f)
PY
echo "full report: $out/peaks.txt"
