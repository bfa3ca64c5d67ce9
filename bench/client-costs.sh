#!/usr/bin/env bash
# What one `concur crawl` of /add?delay=0 against one `concur serve` costs the client, a request
# (docs/benchmarks.md §22):
#   syscalls 'CRAWL ARGS' LABEL=BIN...
#       perf stat of the crawl with each binary in turn: the system calls and context
#       switches a request (the counts over the requests that ended well)
#   crates 'CRAWL ARGS'
#       perf record -g of the crawl with the profiling build: its samples summed by where the
#       function comes from (the kernel, each crate, jemalloc, libc's memmove), and the share
#       times the client's CPU a request
# CRAWL ARGS go after the URL, e.g. '--rate 4000 --duration 6s -c 100 --model async' or
# '-n 200000 -c 100 --http2 --connections 1 --model async'. Needs perf (apt-get install
# linux-perf). Usage: bench/client-costs.sh syscalls|crates 'CRAWL ARGS' [LABEL=BIN...]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-}
args=${2:-}
[ -n "$args" ] && { [ "$what" = syscalls ] || [ "$what" = crates ]; } || {
  echo "usage: bench/client-costs.sh syscalls|crates 'CRAWL ARGS' [LABEL=BIN...]" >&2
  exit 2
}
shift 2
command -v perf > /dev/null || { echo "perf is missing (apt-get install linux-perf)" >&2; exit 2; }
source bench/lib.sh
out=$(mktemp -d)
trap 'kill "${bench_pids[@]}" 2>/dev/null || true; rm -rf "$out"' EXIT
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"

# The requests of a run that ended well, from its run record.
tasks_ok() { python3 -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"run\"" in l][0]["tasks_ok"])' "$1"; }

if [ "$what" = syscalls ]; then
  [ $# -gt 0 ] || { echo "give at least one LABEL=BIN" >&2; exit 2; }
  build
  start_server srv
  events=context-switches
  for s in epoll_wait write read recvfrom sendto timerfd_settime futex; do
    events+=,syscalls:sys_enter_$s
  done
  for lb in "$@"; do
    label=${lb%%=*}
    # shellcheck disable=SC2086
    perf stat -x, -o "$out/stat" -e "$events" -- "${lb#*=}" crawl "$srv_url/add?delay=0&name={rand}" $args \
      -q -i --json "$out/run.jsonl" > /dev/null
    n=$(tasks_ok "$out/run.jsonl")
    awk -F, -v l="$label" -v n="$n" '$3 ~ /sys_enter|context/ {
        sub("syscalls:sys_enter_", "", $3); row = row " " $3 " " sprintf("%.2f", $1 / n) }
      END { print l ": " n " requests;" row }' "$out/stat"
  done
  exit 0
fi

build_profiling
start_server srv
# shellcheck disable=SC2086
perf record -q -o "$out/perf.data" -F 5000 -g -- "$bin" crawl "$srv_url/add?delay=0&name={rand}" $args \
  -q -i --json "$out/run.jsonl" > /dev/null 2>&1
perf report -i "$out/perf.data" --stdio --no-children --sort dso,sym -g none 2> /dev/null \
  | grep -E '^ +[0-9]' > "$out/symbols"
python3 - "$out/symbols" "$out/run.jsonl" <<'PY'
import collections, json, re, sys
run = [json.loads(l) for l in open(sys.argv[2]) if '"type":"run"' in l][0]
cpu_us = (run["user_s"] + run["sys_s"]) / max(run["tasks_ok"], 1) * 1e6
parts = collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
    if not m:
        continue
    share, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).lstrip("<")
    if kind == "k":
        part = "kernel"
    elif "_rjem" in sym or "allocx" in sym:
        part = "jemalloc"
    elif "memmove" in sym or "memcpy" in sym or "memset" in sym:
        part = "libc memmove/memcpy/memset"
    elif dso.startswith("libc"):
        part = "libc, other"
    elif "vdso" in dso or "clock_gettime" in sym:
        part = "clock reads"
    else:
        crate = re.match(r"([a-z_0-9]+)::", sym)
        part = crate.group(1) if crate else "other"
    parts[part] += share
print(f"{run['tasks_ok']} requests, {run['tasks_ok'] / run['wall_s']:.0f} req/s, "
      f"client CPU {cpu_us:.2f} µs a request")
print("| part | share | µs a request |\n|---|---:|---:|")
for part, share in parts.most_common():
    if share >= 0.2:
        print(f"| {part} | {share:.1f}% | {share / 100 * cpu_us:.2f} |")
PY
