#!/usr/bin/env bash
# What packet loss does to HTTP/1.1, HTTP/2 and HTTP/3 (issue 45). Two network namespaces
# joined by a veth pair: `concur serve --tls-self-signed --http3` in one, the clients in the
# other; in the client's namespace nftables drops LOSS% of the packets each way
# (`numgen random mod 100 < LOSS drop` on input and output: this kernel has no netem). The
# same N GETs of a 100 ms delay as
#   h1  async:100 over HTTP/1.1 and TLS, 100 connections,
#   h2  async:100 --http2 (h2 by ALPN), 1 connection carrying 100 streams,
#   h3  async:100 --http3 (QUIC), 1 connection carrying 100 streams,
# ROUNDS rounds, each running the three without loss and then with it, so that drift spreads
# evenly. Printed per row: medians of wall, p50 and p99 latency (ms), client CPU, connections
# opened, version spoken, failed requests; the ideal is ceil(N / 100) × 100 ms.
# Usage (as root): bench/h3-loss.sh [ROUNDS] [N] [LOSS] [OUT_DIR]; defaults 5 1000 1.
# Needs ip (iproute2) and nft (apt-get install nftables). The namespaces, their veth pair and
# the server go when the script exits, however it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
n="${2:-1000}"
loss="${3:-1}"
out="${4:-/tmp/concur-h3-loss}"
[ "$(id -u)" = 0 ] || { echo "run as root: it makes network namespaces" >&2; exit 2; }
command -v nft > /dev/null || { echo "nft is missing: apt-get install nftables" >&2; exit 2; }
command -v ip > /dev/null || { echo "ip is missing: apt-get install iproute2" >&2; exit 2; }
mkdir -p "$out"
source bench/lib.sh
build

# Names unique to this run (interface names: at most 15 characters).
tag=$$
ns_s="concur-h3s-$tag" ns_c="concur-h3c-$tag"
veth_s="h3s$tag" veth_c="h3c$tag"
server_ip=10.213.0.1 client_ip=10.213.0.2 port=8443
cleanup() {
  [ -n "${server_pid:-}" ] && kill "$server_pid" 2> /dev/null || true
  ip netns del "$ns_s" 2> /dev/null || true
  ip netns del "$ns_c" 2> /dev/null || true
}
trap cleanup EXIT
ip netns add "$ns_s"
ip netns add "$ns_c"
ip link add "$veth_s" type veth peer name "$veth_c"
ip link set "$veth_s" netns "$ns_s"
ip link set "$veth_c" netns "$ns_c"
ip -n "$ns_s" addr add "$server_ip/24" dev "$veth_s"
ip -n "$ns_c" addr add "$client_ip/24" dev "$veth_c"
for ns in "$ns_s" "$ns_c"; do ip -n "$ns" link set lo up; done
ip -n "$ns_s" link set "$veth_s" up
ip -n "$ns_c" link set "$veth_c" up

log="$out/serve.log"
ip netns exec "$ns_s" "$bin" serve --addr "$server_ip:$port" --tls-self-signed --http3 2> "$log" &
server_pid=$!
base="https://$server_ip:$port"
for _ in $(seq 100); do
  ip netns exec "$ns_c" curl -sk "$base/stats" > /dev/null && break
  kill -0 "$server_pid" 2> /dev/null || { echo "concur serve did not start: $(cat "$log")" >&2; exit 1; }
  sleep 0.1
done
ca=$(sed -n 's/.*written to \([^ ]*\) .*/\1/p' "$log")
[ -f "$ca" ] || { echo "no certificate path in $log: $(cat "$log")" >&2; exit 1; }

loss_on() {
  ip netns exec "$ns_c" nft -f - <<NFT
table inet concur_loss {
  chain input { type filter hook input priority 0; numgen random mod 100 < $loss drop; }
  chain output { type filter hook output priority 0; numgen random mod 100 < $loss drop; }
}
NFT
}
loss_off() { ip netns exec "$ns_c" nft delete table inet concur_loss 2> /dev/null || true; }

# One run in the client's namespace; prints
# "LABEL wall_s p50_ms p99_ms cpu_s connections version failed".
row() { # LABEL [FLAG...]
  local label=$1 json="$out/run.jsonl"; shift
  rm -f "$json"
  ip netns exec "$ns_c" "$bin" run -w "http:$base/add?name={rand}&delay=100" -m async:100 \
    -n "$n" -r 1 --warmup 0 --cacert "$ca" -i -q --json "$json" "$@" > /dev/null || true
  python3 - "$json" "$label" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l]
if not runs:
    print(sys.argv[2], "nan nan nan nan nan nan nan")
    sys.exit()
r = runs[0]
lat = r.get("latency_us") or {}
ms = lambda q: round(lat[q] / 1000, 1) if q in lat else "nan"
print(sys.argv[2], r["wall_s"], ms("p50"), ms("p99"), round(r["user_s"] + r["sys_s"], 3),
      r.get("connections_opened", "nan"), r.get("http_version", "1.1"), r["tasks_failed"])
PY
}

echo "concur serve $base (namespace $ns_s), clients in $ns_c; $n GETs of 100 ms at W = 100, loss $loss% each way; $rounds rounds"
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
samples="$out/samples.txt"
: > "$samples"
for r in $(seq "$rounds"); do
  for state in 0 "$loss"; do
    if [ "$state" = 0 ]; then loss_off; else loss_on; fi
    row "h1-loss$state" >> "$samples"
    row "h2-loss$state" --http2 >> "$samples"
    row "h3-loss$state" --http3 >> "$samples"
  done
  loss_off
done
echo "row  wall_s  p50_ms  p99_ms  client_cpu_s  connections  version  failed   (medians of $rounds)"
medians "$samples"
