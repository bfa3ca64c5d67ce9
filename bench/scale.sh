#!/usr/bin/env bash
# Thousands of connections at once (issue 11, point 5): N requests with W in flight against one
# `concur serve` at delay 100 ms, for concur's async, async-local, curl, green and pool, and
# aiohttp at the same N and W, all in this one run against the same server. Prints per client:
# wall, ideal (ceil(N/W) x 100 ms), failed requests, peak RSS and KiB per in-flight request
# (peak RSS / W, the whole process included), the client's CPU (user, sys) and the server's
# CPU (user, sys) over the same run. Then wrk at W connections for 4 s against the same server
# (its CPU and the server's too), the fastest client here, as the machine's ceiling: N / its rate
# is the least time any client could take. Then aiohttp. Usage: bench/scale.sh [N] [W] [OUT_DIR]
# Defaults: N=100000, W=10000. Installs aiohttp in a venv; needs wrk (apt-get install wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
connections_args 100000 10000 /tmp/concur-scale "$@"
venv="${VENV:-/tmp/concur-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q aiohttp
build
start_server srv
server=$srv_pid
url=$srv_url
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); somaxconn $(sysctl -n net.core.somaxconn)"
echo "N=$n W=$w delay=100ms ideal=$(python3 -c "import math; print(math.ceil($n/$w)*0.1)") s"
: > "$out/scale.txt"
for m in async async-local curl green pool; do
  scale_client "$m" "$n" "$w" "$url/add?name={rand}&delay=100" "$out/$m.jsonl" "$server" | tee -a "$out/scale.txt"
done
scale_wrk "$n" "$w" "$url/add?name=wrk&delay=100" "$out/wrk" "$server" | tee -a "$out/scale.txt"
"$venv/bin/python" src/classic/crawl.py aiohttp --url "$url" -n "$n" -c "$w" > "$out/aiohttp.txt" 2>&1 || true
# Its CONCUR line; the wall shown includes the imports (wall_s + import_s), as recorded before.
python3 - "$out/aiohttp.txt" "$w" <<'PY' | tee -a "$out/scale.txt"
import json, sys
text = open(sys.argv[1]).read()
w = int(sys.argv[2])
line = next((l for l in text.splitlines() if l.startswith("CONCUR ")), None)
if line is None:
    print(f"{'aiohttp:'+str(w):14} no result: {text.strip()[-200:]}")
    sys.exit()
r = json.loads(line[len("CONCUR "):])
print(f"{'aiohttp:'+str(w):14} wall {r['wall_s'] + r['import_s']:7.2f} s  ok {r['tasks_ok']:6}  failed {r['tasks_failed']:6}"
      f"  peak RSS {r['peak_rss_kib']/1024:6.1f} MiB  {r['peak_rss_kib']/w:5.1f} KiB/in-flight"
      f"  (imports {r['import_s']:.2f} s of the wall)")
PY
echo "results in $out"
