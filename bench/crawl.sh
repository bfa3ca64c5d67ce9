#!/usr/bin/env bash
# The crawl benchmarks recorded in docs/benchmarks.md, all against one `concur serve`:
#  1. concur run crawl (every model, 1000 × 100 ms, 5 runs) and the classic Python clients
#     (serial requests on 50 requests, gevent, tornado+curl, aiohttp at 100 in flight);
#  2. throughput with delay=0 and 100 connections: concur's clients beside wrk, hey and oha
#     (bench/throughput.sh);
#  3. concur serve beside FastAPI on uvicorn, driven by the same client: req/s and server
#     CPU per request.
# Usage: bench/crawl.sh [OUT_DIR]. Installs wrk and hey (apt) and the Python clients (a venv).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-crawl}"
mkdir -p "$out"
command -v wrk >/dev/null && command -v hey >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk hey
}
venv="${VENV:-/tmp/concur-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q aiohttp gevent tornado pycurl requests fastapi uvicorn
py="$venv/bin/python"
source bench/lib.sh
build

start_server srv
server=$srv_pid
url=$srv_url

echo "== 1. concur run crawl --url $url"
$bin run crawl --url "$url" --json "$out/crawl.jsonl" --markdown "$out/crawl.md" -q | tee "$out/crawl.txt"

echo "== 1b. Python clients (same server): src/classic/crawl.py's CONCUR lines, labelled"
# wall_s leaves the imports out; wall_s + import_s is the wall with them, as docs/benchmarks.md
# reports it for these clients.
: > "$out/python.jsonl"
classic() { # CLIENT N C
  $py src/classic/crawl.py "$1" --url "$url" -n "$2" -c "$3" \
    | sed -n "s/^CONCUR {/{\"client\": \"$1\", \"requests\": $2, \"concurrency\": $3, /p" \
    | tee -a "$out/python.jsonl"
}
classic serial 50 1
for c in gevent tornado aiohttp; do
  classic $c 1000 100
done

echo "== 2. throughput, delay=0, 100 connections: bench/throughput.sh (its own server)"
bench/throughput.sh 3 "$out/throughput"

echo "== 3. concur serve vs FastAPI/uvicorn, same client (concur crawl, async:100, 50000 × delay 0)"
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
tick=$(getconf CLK_TCK)
measure() { # name pid base
  local before after
  before=$(cpu $2)
  $bin crawl "$3/add?name={rand}&delay=0" -n 50000 -c 100 --model async -q --json "$out/server-$1.jsonl" --csv - > "$out/server-$1.csv"
  after=$(cpu $2)
  awk -F, -v n="$1" -v t="$(( after - before ))" -v hz="$tick" 'NR==2 {
    printf "%-8s %8.0f req/s  server CPU %.1f us/request\n", n, 50000/$9, t/hz/50000*1e6 }' "$out/server-$1.csv" | tee -a "$out/servers.txt"
}
: > "$out/servers.txt"
measure concur $server "$url"
fastapi_port=$(free_port)
(cd bench/classic && exec $py -m uvicorn fastapi_app:app --port "$fastapi_port" --log-level warning) & fastapi=$!
stop_on_exit "$fastapi"
until curl -s "http://127.0.0.1:$fastapi_port/add" >/dev/null; do sleep 0.2; done
measure fastapi $fastapi "http://127.0.0.1:$fastapi_port"
echo "results in $out"
