#!/usr/bin/env bash
# Thousands of connections at once (issue 11, point 5): N requests with W in flight against one
# `concur serve` at delay 100 ms, for concur's async, async-local, curl, green and pool, and
# aiohttp at the same N and W, all in this one run against the same server. Prints per client:
# wall, ideal (ceil(N/W) x 100 ms), failed requests, peak RSS and KiB per in-flight request
# (peak RSS / W, the whole process included). Usage: bench/scale.sh [N] [W] [OUT_DIR]
# Defaults: N=100000, W=10000. Installs aiohttp in a venv.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-100000}"
w="${2:-10000}"
out="${3:-/tmp/concur-scale}"
mkdir -p "$out"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
venv="${VENV:-/tmp/concur-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q aiohttp
cargo build --release -q
bin=$PWD/target/release/concur
port=18951
$bin serve -q --addr 127.0.0.1:$port & server=$!
trap 'kill $server 2>/dev/null || true' EXIT
until curl -s "http://127.0.0.1:$port/stats" >/dev/null; do sleep 0.1; done
url="http://127.0.0.1:$port"
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); somaxconn $(sysctl -n net.core.somaxconn)"
echo "N=$n W=$w delay=100ms ideal=$(python3 -c "import math; print(math.ceil($n/$w)*0.1)") s"
: > "$out/scale.txt"
for m in async async-local curl green pool; do
  $bin crawl "$url/add?name={rand}&delay=100" -n "$n" -c "$w" --model "$m" -q -i \
    --json "$out/$m.jsonl" > /dev/null
  python3 - "$out/$m.jsonl" "$m:$w" "$w" <<'PY' | tee -a "$out/scale.txt"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
w = int(sys.argv[3])
print(f"{sys.argv[2]:14} wall {r['wall_s']:7.2f} s  ok {r['tasks_ok']:6}  failed {r['tasks_failed']:6} {r['failures'] or ''}"
      f"  peak RSS {r['max_rss_kib']/1024:6.1f} MiB  {r['max_rss_kib']/w:5.1f} KiB/in-flight"
      f"  connections {r.get('connections_opened')}")
PY
done
"$venv/bin/python" bench/classic/crawl.py aiohttp --url "$url" -n "$n" -c "$w" > "$out/aiohttp.json" || true
python3 - "$out/aiohttp.json" "$w" <<'PY' | tee -a "$out/scale.txt"
import json, sys
r = json.load(open(sys.argv[1]))
w = int(sys.argv[2])
print(f"{'aiohttp:'+str(w):14} wall {r['wall_s']:7.2f} s  ok {r['ok']:6}  failed {r['errors']:6}"
      f"  peak RSS {r['peak_rss_kib']/1024:6.1f} MiB  {r['peak_rss_kib']/w:5.1f} KiB/in-flight")
PY
echo "results in $out"
