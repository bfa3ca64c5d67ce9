#!/usr/bin/env bash
# The binary's global allocator chosen by measurement (issue 32; docs/benchmarks.md §20):
# concur built three times, with glibc's malloc (--no-default-features), with mimalloc
# (--no-default-features --features alloc-mimalloc) and with jemalloc (the default), then ROUNDS
# rounds, the three alternated within each round (ALLOCS="glibc jemalloc" for fewer), of:
#   server at C = 100 and C = 10,000: `wrk -t 2 -c C -d 5s` against `concur serve` built with
#     that allocator, delay 0; the server's user + sys CPU per request (from /proc) and its
#     peak RSS (VmHWM);
#   client at 10,000: `concur crawl` of N = 100,000 GETs of a 100 ms delay with 10,000 in
#     flight (async:10000), built with that allocator, against one glibc-built server; the
#     client's user + sys CPU per request and its peak RSS;
#   tasks: `concur run -w sleep:2s -m async:100000 -n 100000` (the wake-ups' worst lateness
#     and CPU) and `-m async:1000000 -n 1000000` (peak RSS, tree PSS).
# Prints every measurement and the medians. Needs wrk. About 5 minutes with 3 rounds, after the builds; run
# nothing else meanwhile.
# Usage: bench/allocators.sh [ROUNDS] [OUT_DIR]   (default 3, /tmp/concur-allocators)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-3}
out=${2:-/tmp/concur-allocators}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
command -v wrk > /dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 2; }
mkdir -p "$out"
raise_open_files
allocs=${ALLOCS:-glibc mimalloc jemalloc}
for a in $allocs; do
  case $a in
    glibc) cargo build --release -q --no-default-features ;;
    mimalloc) cargo build --release -q --no-default-features --features alloc-mimalloc ;;
    jemalloc) cargo build --release -q ;;
    *) echo "ALLOCS names glibc, mimalloc and jemalloc, not '$a'" >&2; exit 2 ;;
  esac
  cp "${CARGO_TARGET_DIR:-$PWD/target}/release/concur" "$out/concur-$a"
done
# The default build is left in target/.
cargo build --release -q
peak_rss_kib() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
bin=$out/concur-glibc
start_server fixed
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
results=$out/results.txt
: > "$results"
for r in $(seq "$rounds"); do
  for a in $allocs; do
    bin=$out/concur-$a
    start_server srv
    for c in 100 10000; do
      before=$(proc_cpu "$srv_pid")
      wrk_out=$(wrk -t 2 -c "$c" -d 5s "$srv_url/add?name=wrk&delay=0" 2>&1)
      after=$(proc_cpu "$srv_pid")
      reqs=$(awk '/requests in/{print $1}' <<< "$wrk_out")
      us=$(python3 -c "b = sum(map(float, '$before'.split())); a = sum(map(float, '$after'.split())); print(f'{(a - b) / $reqs * 1e6:.2f}')")
      echo "round $r $a server c=$c cpu_us_per_req $us peak_rss_kib $(peak_rss_kib "$srv_pid")" | tee -a "$results"
    done
    kill "$srv_pid"
    wait "$srv_pid" 2>/dev/null || true
    "$bin" crawl "$fixed_url/add?delay=100&i={rand}" -n 100000 -c 10000 --model async:10000 -q -i \
      --json "$out/client-$a-$r.jsonl" > /dev/null
    "$bin" run -w sleep:2s -m async:100000 -n 100000 -r 1 -q --json "$out/wake-$a-$r.jsonl" > /dev/null
    "$bin" run -w sleep:2s -m async:1000000 -n 1000000 -r 1 -q --json "$out/mem-$a-$r.jsonl" > /dev/null
    python3 - "$out" "$a" "$r" <<'PY' | tee -a "$results"
import json, sys
out, a, r = sys.argv[1:4]
def run(kind):
    return [json.loads(l) for l in open(f"{out}/{kind}-{a}-{r}.jsonl") if '"type":"run"' in l][0]
c = run("client")
print(f"round {r} {a} client c=10000 cpu_us_per_req {(c['user_s'] + c['sys_s']) / max(c['tasks_ok'], 1) * 1e6:.2f}"
      f" peak_rss_kib {c['max_rss_kib']} ok {c['tasks_ok']} failed {c['tasks_failed']}")
w = run("wake")
print(f"round {r} {a} wake n=100000 late_max_us {w['wakeups']['late_us']['max']} late_p50_us {w['wakeups']['late_us']['p50']}"
      f" start_all_s {w['wakeups']['start_all_s']:.3f} cpu_s {w['user_s'] + w['sys_s']:.2f}")
m = run("mem")
print(f"round {r} {a} tasks n=1000000 peak_rss_kib {m['max_rss_kib']} tree_pss_kib {m.get('tree_pss_kib')}"
      f" cpu_s {m['user_s'] + m['sys_s']:.2f}")
PY
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    a, what, scale = f[2], f[3], f[4]
    for k, v in zip(f[5::2], f[6::2]):
        try:
            rows.setdefault((what, scale, k), {}).setdefault(a, []).append(float(v))
        except ValueError:
            pass
print("\nmedians (ratio to glibc):")
for (what, scale, k), by in rows.items():
    if k in ("ok", "failed"):
        continue
    base = statistics.median(by.get("glibc", [0])) or 1
    cells = "  ".join(f"{a} {statistics.median(v):.2f} ({statistics.median(v) / base:.2f}x)" for a, v in by.items())
    print(f"{what:7} {scale:10} {k:18} {cells}")
PY
echo "results in $out"
