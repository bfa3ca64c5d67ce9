#!/usr/bin/env bash
# Slow clients against the delay server (issue 20): N slow clients at once (a third ask
# /bytes/10M and never read, a third send headers and then 3 bytes of a 100,000-byte body, a
# third send half their headers and stop), held for HOLD seconds, against `concur serve` with
# its default limits and then against uvicorn (a trivial ASGI app with the same endpoints),
# one after the other in the same run. Recorded per server: its peak RSS (VmHWM), /stats
# probed every 100 ms over a new connection (median, p99, max, failures) while the slow
# clients are held, and how many of them the server had closed by the end of the hold.
# Usage: bench/soak.sh [N] [HOLD_S] [OUT_DIR]   (defaults 10000, 40, /tmp/concur-soak)
# Installs uvicorn in the bench venv ($VENV, /tmp/concur-venv, as bench/crawl.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10000}"
hold="${2:-40}"
out="${3:-/tmp/concur-soak}"
mkdir -p "$out"
source bench/lib.sh
raise_open_files
build
venv="${VENV:-/tmp/concur-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q uvicorn
py="$venv/bin/python"

echo "machine: $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/summary.txt"

cat > "$out/app.py" <<'PY'
# The endpoints the soak uses, as plain ASGI: /stats (a small JSON), /bytes/N (N bytes of x,
# streamed in 64 KiB chunks), /echo (reads the body, answers it).
import json

CHUNK = b"x" * 65536

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/stats":
        body = json.dumps({"requests": 0}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
    elif path.startswith("/bytes/"):
        n = int(path[len("/bytes/"):].rstrip("M")) * (1 << 20)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(n).encode())]})
        while n > 0:
            k = min(n, len(CHUNK))
            n -= k
            await send({"type": "http.response.body", "body": CHUNK[:k], "more_body": n > 0})
    else:
        body = b""
        more = True
        while more:
            m = await receive()
            body += m.get("body", b"")
            more = m.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
PY

cat > "$out/soak.py" <<'PY'
# soak.py HOST PORT PID N HOLD OUT_JSON: the slow clients, the /stats probes, the RSS samples.
import http.client, json, socket, statistics, sys, threading, time

host, port, pid, n, hold, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
kinds = [
    b"GET /bytes/10M HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc",
    b"GET /stats HTTP/1.1\r\nHost: x\r\n",
]

def status_kib(field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field):
            return int(line.split()[1])
    return 0

probes, failures, rss = [], [], []
phase = {"on": True, "slow": False}

def probe():
    while phase["on"]:
        t = time.perf_counter()
        try:
            c = http.client.HTTPConnection(host, port, timeout=10)
            c.request("GET", "/stats")
            r = c.getresponse()
            r.read()
            c.close()
            if phase["slow"]:
                (probes if r.status == 200 else failures).append(time.perf_counter() - t)
        except Exception as e:
            if phase["slow"]:
                failures.append(repr(e))
        rss.append(status_kib("VmRSS:"))
        time.sleep(0.1)

th = threading.Thread(target=probe)
th.start()
time.sleep(2)
before = status_kib("VmRSS:")
phase["slow"] = True
t0 = time.time()
slow, refused = [], 0
for i in range(n):
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(kinds[i % 3])
        slow.append(s)
    except OSError:
        refused += 1
opened = time.time() - t0
time.sleep(max(0.0, hold - opened))
phase["slow"] = False
# Which of them the server closed: readable with EOF (or reset) once what it sent is drained.
closed = 0
for s in slow:
    s.setblocking(False)
    try:
        while True:
            b = s.recv(1 << 20)
            if not b:
                closed += 1
                break
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
    s.close()
time.sleep(1)
phase["on"] = False
th.join()
lat = sorted(probes)
def q(p):
    return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")
res = {
    "clients": n, "connected": len(slow), "connect_failures": refused, "open_s": round(opened, 2),
    "closed_by_server_within_hold": closed, "rss_before_kib": before,
    "peak_rss_kib": status_kib("VmHWM:"), "max_sampled_rss_kib": max(rss) if rss else 0,
    "probes": len(lat), "probe_failures": len(failures), "probe_p50_ms": round(q(0.5), 2),
    "probe_p99_ms": round(q(0.99), 2), "probe_max_ms": round(lat[-1] * 1e3, 2) if lat else None,
    "failure_sample": failures[:3],
}
json.dump(res, open(out, "w"))
print(json.dumps(res))
PY

report() {
  python3 - "$1" "$2" <<'PY' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[2]))
print(f"{sys.argv[1]:14} peak RSS {r['peak_rss_kib']/1024:7.1f} MiB (before {r['rss_before_kib']/1024:.1f})"
      f"  /stats p50 {r['probe_p50_ms']} ms p99 {r['probe_p99_ms']} ms max {r['probe_max_ms']} ms"
      f"  probes {r['probes']} failed {r['probe_failures']}"
      f"  connected {r['connected']}/{r['clients']} closed by server {r['closed_by_server_within_hold']}")
PY
}

echo "== concur serve (default limits), $n slow clients held ${hold}s"
start_server srv
$py "$out/soak.py" 127.0.0.1 "$srv_port" "$srv_pid" "$n" "$hold" "$out/concur.json" > /dev/null
curl -s "$srv_url/stats" > "$out/concur-stats.json"
report "concur serve" "$out/concur.json"
kill "$srv_pid"

echo "== uvicorn (defaults, one worker), $n slow clients held ${hold}s"
uv_port=$(free_port)
(cd "$out" && exec "$py" -m uvicorn app:app --port "$uv_port" --log-level warning 2> "$out/uvicorn.log") & uv=$!
stop_on_exit "$uv"
until curl -s "http://127.0.0.1:$uv_port/stats" > /dev/null; do
  kill -0 "$uv" 2> /dev/null || { echo "uvicorn did not start" >&2; exit 1; }
  sleep 0.2
done
$py "$out/soak.py" 127.0.0.1 "$uv_port" "$uv" "$n" "$hold" "$out/uvicorn.json" > /dev/null
report "uvicorn" "$out/uvicorn.json"
echo "results in $out"
