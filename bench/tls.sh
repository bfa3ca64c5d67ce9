#!/usr/bin/env bash
# The TLS benchmarks of docs/benchmarks.md, each with its peer in the same run, against one
# `concur serve --tls-self-signed` (and one plain `concur serve` for the plain-HTTP figures):
#  1. the TLS crawl: 1,000 x 100 ms at C=100, async:100 over https and over http (R runs each,
#     alternating), beside aiohttp over https; wall and peak RSS;
#  2. throughput at delay=0 over TLS with keep-alive, 100 connections: concur's async,
#     async-local and curl beside wrk (HTTPS) and hey;
#  3. the handshake per new connection with --no-keepalive: every client model over https and
#     over http, 2,000 requests, 20 at once, delay=0; req/s and concur's tls_us / connect_us.
# Usage: bench/tls.sh [R] [OUT_DIR]. Installs wrk and hey (apt) and aiohttp (a venv).
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-5}"
out="${2:-/tmp/concur-tls}"
mkdir -p "$out"
command -v wrk >/dev/null && command -v hey >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk hey
}
venv="${VENV:-/tmp/concur-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q aiohttp
source bench/lib.sh
build
start_server tls --tls-self-signed
start_server plain
ca=$tls_ca
https=$tls_url
http=$plain_url
echo "concur serve --tls-self-signed on $https, its certificate in $ca; plain concur serve on $http"
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"

# One concur crawl: prints "label wall_s max_rss_kib tls_us_p50 connect_us_p50 tasks_ok".
crawl() { # label url n c model [flags...]
  local label=$1 url=$2 n=$3 c=$4 model=$5; shift 5
  $bin crawl "$url" -n "$n" -c "$c" --model "$model" -q -i --json "$out/run.jsonl" "$@" > /dev/null
  python3 - "$out/run.jsonl" "$label" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
p50 = lambda k: (r.get(k) or {}).get("p50", "-")
print(sys.argv[2], r["wall_s"], r["max_rss_kib"], p50("tls_us"), p50("connect_us"), r["tasks_ok"], r["tasks_failed"])
PY
}

echo "== 1. TLS crawl: 1000 x 100 ms, C=100 ($reps runs each, alternating)"
: > "$out/crawl.txt"
for r in $(seq "$reps"); do
  crawl "async:100-https" "$https/add?name={rand}&delay=100" 1000 100 async --cacert "$ca" >> "$out/crawl.txt"
  crawl "async:100-http" "$http/add?name={rand}&delay=100" 1000 100 async >> "$out/crawl.txt"
  # Its CONCUR line; the wall includes the imports (wall_s + import_s), as recorded before.
  "$venv/bin/python" src/classic/crawl.py aiohttp --url "$https" -n 1000 -c 100 --cafile "$ca" \
    | python3 -c "import json,sys; r=json.loads(next(l[7:] for l in sys.stdin if l.startswith('CONCUR '))); print('aiohttp-https', r['wall_s'] + r['import_s'], r['peak_rss_kib'], '-', '-', r['tasks_ok'], r['tasks_failed'])" >> "$out/crawl.txt"
done
for m in curl green async-local pool; do
  crawl "$m:100-https" "$https/add?name={rand}&delay=100" 1000 100 $m --cacert "$ca" >> "$out/crawl.txt"
done
python3 - "$out/crawl.txt" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, wall, rss, tls, conn, ok, failed = line.split()
    d[label].append((float(wall), int(rss), tls, ok, failed))
print(f"{'client':22} {'median wall':>11} {'peak RSS':>10}  runs  ok/failed  tls p50 µs")
for k, v in d.items():
    print(f"{k:22} {statistics.median(x[0] for x in v):10.3f}s {statistics.median(x[1] for x in v)/1024:8.1f}MiB"
          f"  {len(v):4}  {v[0][3]}/{v[0][4]}  {v[0][2]}")
PY

echo "== 2. throughput over TLS, keep-alive, delay=0, 100 connections"
n=50000
: > "$out/rps.txt"
for r in 1 2 3; do
  for m in async async-local curl; do
    crawl "concur-$m:100" "$https/add?delay=0&name={rand}" $n 100 $m --cacert "$ca" \
      | awk -v n=$n '{ printf "%s %.0f\n", $1, n/$2 }' >> "$out/rps.txt"
  done
  wrk -t 2 -c 100 -d 5s "$https/add?delay=0&name=wrk" | awk '/Requests\/sec/ { printf "wrk %.0f\n", $2 }' >> "$out/rps.txt"
  hey -n $n -c 100 "$https/add?delay=0&name=hey" | awk '/Requests\/sec/ { printf "hey %.0f\n", $2 }' >> "$out/rps.txt"
done
python3 - "$out/rps.txt" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, v = line.split()
    d[k].append(float(v))
for k, v in sorted(d.items(), key=lambda kv: -statistics.median(kv[1])):
    print(f"{k:22} {statistics.median(v):8.0f} req/s   runs: {', '.join(f'{x:.0f}' for x in v)}")
PY

echo "== 3. a new connection per request (--no-keepalive): 2000 requests, 20 at once, delay=0"
: > "$out/handshake.txt"
for m in seq pool async async-local curl green; do
  crawl "$m-https" "$https/add?delay=0&name={rand}" 2000 20 $m --cacert "$ca" --no-keepalive >> "$out/handshake.txt"
  crawl "$m-http" "$http/add?delay=0&name={rand}" 2000 20 $m --no-keepalive >> "$out/handshake.txt"
done
hey -n 2000 -c 20 -disable-keepalive "$https/add?delay=0&name=hey" | awk '/Requests\/sec/ { printf "hey-https 2000/%s - - - 2000 0\n", $2 }' \
  | awk '{ split($2, a, "/"); print $1, a[1]/a[2], "-", "-", "-", $6, $7 }' >> "$out/handshake.txt"
hey -n 2000 -c 20 -disable-keepalive "$http/add?delay=0&name=hey" | awk '/Requests\/sec/ { printf "hey-http 2000/%s - - - 2000 0\n", $2 }' \
  | awk '{ split($2, a, "/"); print $1, a[1]/a[2], "-", "-", "-", $6, $7 }' >> "$out/handshake.txt"
python3 - "$out/handshake.txt" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    label, wall, rss, tls, conn, ok, failed = line.split()
    rows[label] = (float(wall), tls, conn, ok, failed)
print(f"{'client':14} {'https req/s':>11} {'http req/s':>10} {'extra per request':>18} {'tls p50':>8} {'connect p50':>11}")
for m in ["seq", "pool", "async", "async-local", "curl", "green", "hey"]:
    s, p = rows.get(m + "-https"), rows.get(m + "-http")
    if not s or not p:
        continue
    extra = (s[0] - p[0]) / 2000 * 20 * 1e6  # µs of wall per request per connection slot
    print(f"{m:14} {2000/s[0]:11.0f} {2000/p[0]:10.0f} {extra:15.0f} µs {s[1]:>8} {s[2]:>11}")
PY
echo "results in $out"
