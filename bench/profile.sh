#!/usr/bin/env bash
# Where the CPU goes at W connections, by perf's sampling profiler: (1) the `curl:W` client
# running N requests of 100 ms against one `concur serve`, (2) that server under `wrk -c W`
# for 4 s. Prints the top symbols of each (self time, with the call chain perf attributes
# them to). Usage: bench/profile.sh [N] [W] [OUT_DIR]. Defaults: N=30000, W=10000.
# Needs perf (apt-get install linux-perf) and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
connections_args 30000 10000 /tmp/concur-profile "$@"
build_profiling
top() { perf report -i "$1" --no-children --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' | head -"$2" || true; }

start_server srv
echo "== 1. curl:$w, $n requests of 100 ms: the client's top symbols"
perf record -q -o "$out/client.data" -F 499 -g -- \
  "$bin" crawl "$srv_url/add?name={rand}&delay=100" -n "$n" -c "$w" --model curl -q -i > /dev/null 2>&1
top "$out/client.data" 12

echo "== 2. concur serve under wrk -c $w for 4 s: the server's top symbols"
port=$(free_port)
perf record -q -o "$out/server.data" -F 999 -g -- "$bin" serve -q --addr "127.0.0.1:$port" & recorder=$!
stop_on_exit "$recorder"
until curl -s "http://127.0.0.1:$port/stats" > /dev/null; do sleep 0.1; done
wrk -t 2 -c "$w" -d 4s "http://127.0.0.1:$port/add?name=wrk&delay=100" | grep 'Requests/sec'
kill -INT "$recorder"
wait "$recorder" || true
top "$out/server.data" 15
