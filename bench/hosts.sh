#!/usr/bin/env bash
# Studies across machines (issue 17) with hosts made of network namespaces on this machine:
# Redis (the hub) in one namespace, an agent in each of three others, the study and its delay
# server in the root namespace. The hosts share this machine's cores, so the point is
# correctness and the coordination's overhead, not speed:
#  1. `concur run crawl --quick --hosts 1,2,3`: the table and the hosts section
#     (docs/examples.md's real output).
#  2. ROUNDS rounds, alternating 1 and 3 hosts, of one open schedule (1,000 GETs of a 20 ms
#     delay at 500/s, async:100): the start spread, the clock offsets' uncertainty, the
#     coordination's cost (from sending the work to the last host's first task), and the merged
#     p99 over 3 hosts beside the single host's p99 of the same schedule. Medians printed.
# Needs root (ip netns) and redis-server. Usage: bench/hosts.sh [ROUNDS] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
out="${2:-/tmp/concur-hosts}"
mkdir -p "$out"
source bench/lib.sh
build
[ "$(id -u)" = 0 ] || { echo "bench/hosts.sh makes network namespaces: run it as root" >&2; exit 1; }

tag="cbh$$"
br="${tag}br"
net="10.231.$(($$ % 200)).0"
prefix="${net%.0}"
cleanup() {
  for i in 0 1 2 3; do ip netns del "${tag}n$i" 2>/dev/null || true; done
  ip link del "$br" 2>/dev/null || true
}
trap 'kill $(jobs -p) 2>/dev/null || true; cleanup' EXIT
cleanup
ip link add "$br" type bridge
ip addr add "$prefix.1/24" dev "$br"
ip link set "$br" up
for i in 0 1 2 3; do
  ns="${tag}n$i"
  ip netns add "$ns"
  ip link add "${tag}v$i" type veth peer name eth0 netns "$ns"
  ip link set "${tag}v$i" master "$br" up
  ip -n "$ns" addr add "$prefix.$((i + 2))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$prefix.1"
done
ip netns exec "${tag}n0" redis-server --bind "$prefix.2" --port 6379 --save '' --appendonly no \
  --protected-mode no > "$out/redis.log" 2>&1 &
hub="redis://$prefix.2:6379/0"
for _ in $(seq 100); do $bin agents --hub "$hub" > /dev/null 2>&1 && break; sleep 0.1; done
for i in 1 2 3; do
  # The study's server is on the lab's private range: the agents list it in --allow-targets.
  ip netns exec "${tag}n$i" "$bin" agent --hub "$hub" --name "host$i" --quiet --allow-targets "$prefix.0/24" > "$out/agent$i.log" 2>&1 &
done
for _ in $(seq 100); do
  [ "$($bin agents --hub "$hub" --format json | wc -l)" = 3 ] && break
  sleep 0.1
done
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); hub $hub"
$bin agents --hub "$hub"

echo
echo "== 1. concur run crawl --quick --hub $hub --hosts 1,2,3"
$bin run crawl --quick --hub "$hub" --hosts 1,2,3 -r 1 --json "$out/crawl.jsonl" 2>&1 | tee "$out/crawl.txt"

echo
echo "== 2. one open schedule over 1 and 3 hosts, $rounds alternated rounds"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for k in 1 3; do
    $bin run -w 'http:/delay/20ms' -m async:100 -n 1000 --rate 500 -r 1 --warmup 0 \
      --hub "$hub" --hosts "$k" -q --json "$out/open-$k-$r.jsonl" > /dev/null
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])
def run(k, r):
    return [json.loads(l) for l in open(f"{out}/open-{k}-{r}.jsonl") if '"type":"run"' in l][0]
rows = {k: [run(k, r) for r in range(1, rounds + 1)] for k in (1, 3)}
med = lambda xs: st.median(xs) if xs else float("nan")
for k, rs in rows.items():
    p99 = med([r["latency_us"]["p99"] / 1e3 for r in rs])
    p50 = med([r["latency_us"]["p50"] / 1e3 for r in rs])
    ach = med([r["rate_achieved"] for r in rs])
    coord = med([r["hub"]["coordination_s"] for r in rs])
    spread = med([r["hub"].get("start_spread_ms") or 0.0 for r in rs])
    unc = med([p["clock_uncertainty_ns"] / 1e3 for r in rs for p in r["hub"]["parts"]])
    off = max(abs(p["clock_offset_ns"]) / 1e3 for r in rs for p in r["hub"]["parts"])
    cpu = med([(r["user_s"] + r["sys_s"]) * 1e6 / r["tasks_ok"] for r in rs])
    scpu = med([r["hub"]["server_cpu_s"] * 1e6 / r["tasks_ok"] for r in rs])
    print(f"{k} host(s): p50 {p50:.2f} ms, p99 {p99:.2f} ms, achieved {ach:.1f}/s, "
          f"start spread {spread:.3f} ms, clock uncertainty {unc:.1f} µs (largest offset {off:.1f} µs), "
          f"coordination {coord*1e3:.1f} ms, client CPU {cpu:.1f} µs/req, server CPU {scpu:.1f} µs/req")
p1 = med([r["latency_us"]["p99"] for r in rows[1]])
p3 = med([r["latency_us"]["p99"] for r in rows[3]])
print(f"merged p99 over 3 hosts / single host's p99, same schedule: {p3 / p1:.3f}")
PY
