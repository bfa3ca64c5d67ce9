#!/usr/bin/env bash
# What the open model's client CPU a request is made of (docs/benchmarks.md §22, issue 32): at
# each RATE, against one `concur serve` at delay 0 with 100 connections, ROUNDS rounds
# alternating
#   async         concur crawl --rate RATE --model async:100 (each task at its own due time)
#   async+grain   the same with --grain 1ms (wrk2's own timer grain)
#   async-local   --model async-local:100 (one thread)
#   wrk2          wrk2 -t 2 -c 100 -R RATE (its 10 s of calibration included, CPU and requests)
# Each sample: client CPU µs a request (rusage: concur's cell process from the run record, wrk2's
# from GNU time), voluntary context switches a request (the times the client slept and was
# woken), and p50 latency from the scheduled time. The medians, then a least-squares line
# through every concur sample, CPU = a + b × switches: b is what one wake-up costs here.
# Usage: [OUT=DIR] bench/open-wakes.sh [ROUNDS] [SECONDS] [RATES...] (the samples go to DIR,
# /tmp/concur-open-wakes by default). Needs wrk2 (WRK2=path or wrk2 on PATH, built from
# giltene/wrk2 with make, as bench/rate.sh says). The line needs rates far apart (the defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
secs=${2:-6}
shift $(( $# > 2 ? 2 : $# )) || true
rates=("${@:-1000 4000 16000}")
# shellcheck disable=SC2206
rates=(${rates[*]})
source bench/lib.sh
need_wrk2
out=${OUT:-/tmp/concur-open-wakes}
mkdir -p "$out"
build
start_server srv
base="$srv_url/add?delay=0&name="
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$out/samples.txt"
concur_sample() { # LABEL RATE ARGS...
  local label=$1 rate=$2
  shift 2
  $bin crawl "${base}{rand}" --rate "$rate" --duration "${secs}s" -c 100 "$@" -q --json "$out/run.jsonl" > /dev/null
  python3 - "$out/run.jsonl" "$label@$rate" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
n = max(r["tasks_ok"], 1)
print(sys.argv[2], "%.1f" % ((r["user_s"] + r["sys_s"]) / n * 1e6), "%.2f" % (r["ctx_voluntary"] / n),
      r["latency_us"]["p50"])
PY
}
for r in $(seq "$rounds"); do
  for rate in "${rates[@]}"; do
    concur_sample async "$rate" --model async | tee -a "$out/samples.txt"
    concur_sample async+grain "$rate" --model async --grain 1ms | tee -a "$out/samples.txt"
    concur_sample async-local "$rate" --model async-local | tee -a "$out/samples.txt"
    /usr/bin/time -f '%U %S %w' -o "$out/time" \
      "$wrk2" -t 2 -c 100 -d $((secs + 10))s -R "$rate" --latency "${base}wrk2" > "$out/wrk2.txt"
    python3 - "$out/wrk2.txt" "$out/time" "wrk2@$rate" <<'PY' | tee -a "$out/samples.txt"
import re, sys
t = open(sys.argv[1]).read()
n = int(re.search(r"(\d+) requests in", t).group(1))
u, s, w = open(sys.argv[2]).read().split()[-3:]
m = re.search(r"^\s*50\.000%\s+([\d.]+)(us|ms|s)\s*$", t, re.M)
p50 = int(float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)])
print(sys.argv[3], "%.1f" % ((float(u) + float(s)) / n * 1e6), "%.2f" % (int(w) / n), p50)
PY
  done
done
echo "== medians over $rounds rounds: label@rate, CPU µs a request, switches a request, p50 µs"
medians "$out/samples.txt"
echo "== CPU = a + b × switches, least squares over every concur sample"
python3 - "$out/samples.txt" <<'PY'
import sys
pts = [(float(s), float(c)) for lab, c, s, _ in (l.split() for l in open(sys.argv[1]))
       if not lab.startswith("wrk2")]
n = len(pts)
mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
sxx = sum((x - mx) ** 2 for x, _ in pts)
if n < 3 or sxx == 0:
    sys.exit("too few samples, or all with the same switches, for a line: give rates far apart")
b = sum((x - mx) * (y - my) for x, y in pts) / sxx
a = my - b * mx
ss = sum((y - my) ** 2 for _, y in pts)
r2 = 1 - sum((y - a - b * x) ** 2 for x, y in pts) / ss
print(f"a = {a:.1f} µs, b = {b:.1f} µs a switch, r² = {r2:.2f}, {n} samples")
PY
