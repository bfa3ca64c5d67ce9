#!/usr/bin/env bash
# What the live view costs: the CPU of concur's own process (its threads, not the runs'
# children: /proc/PID/stat's utime + stime, read every 50 ms until it exits) over a study's
# wall, with the live screen and with --no-live, both on a tmux terminal, ROUNDS rounds
# alternating. Needs tmux.
# Usage: bench/live-cost.sh [ROUNDS] [BIN]   (defaults: 3, target/release/concur)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=$(realpath "${2:-target/release/concur}")
command -v tmux >/dev/null || { echo "tmux is missing (apt-get install tmux)" >&2; exit 2; }
out=$(mktemp -d)
trap 'tmux kill-server 2>/dev/null || true; rm -rf "$out"' EXIT
tick=$(getconf CLK_TCK)
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
one() { # MODE FLAG...: one study on a tmux terminal; prints "cpu_s wall_s"
  local mode=$1; shift
  local marker="$out/study-$mode.jsonl"
  rm -f "$marker"
  tmux new-session -d -s live-cost -x 160 -y 48 \
    "$bin run -w sleep:20ms -m seq -m pool:4 -n 100 -r 5 $* --json $marker"
  local pid="" deadline=$((SECONDS + 10))
  until pid=$(pgrep -o -f -- "--json $marker"); do
    [ $SECONDS -lt $deadline ] || { echo "the study did not start" >&2; exit 1; }
    sleep 0.01
  done
  local t0 cpu=0 stat
  t0=$(date +%s.%N)
  while stat=$(cat "/proc/$pid/stat" 2>/dev/null); do
    # Fields 14 and 15 (utime, stime) after the command's closing parenthesis.
    cpu=$(echo "${stat##*) }" | awk '{print $12 + $13}')
    sleep 0.05
  done
  local t1; t1=$(date +%s.%N)
  tmux kill-session -t live-cost 2>/dev/null || true
  echo "$cpu $tick $t0 $t1" | awk '{printf "%.3f %.3f\n", $1 / $2, $4 - $3}'
}
for r in $(seq "$rounds"); do
  echo "$r live $(one live)" >> "$out/cost.txt"
  echo "$r plain $(one plain --no-live)" >> "$out/cost.txt"
done
python3 - "$out/cost.txt" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r, mode, cpu, wall = l.split()
    d[mode].append((float(cpu), float(wall)))
for mode in ("live", "plain"):
    cpu = statistics.median(c for c, _ in d[mode])
    wall = statistics.median(w for _, w in d[mode])
    print(f"{mode:6} concur's own CPU {cpu:.3f} s over {wall:.1f} s: {100 * cpu / wall:.2f}% of one core")
live = statistics.median(c / w for c, w in d["live"])
plain = statistics.median(c / w for c, w in d["plain"])
print(f"the live view: {100 * (live - plain):+.2f}% of one core")
PY
