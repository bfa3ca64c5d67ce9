#!/usr/bin/env bash
# C++20 coroutines on asio and C# on Mono beside the floor of concur's own runtime, as recorded
# in docs/benchmarks.md §39: the tasks study's programs and wait (10 s), built and run as
# --classic runs them (tasks.cpp by g++ -std=c++20 -O2 -pthread against Debian's asio;
# tasks.cs by Mono's mcs -optimize+, run by mono), at N = 1, 10,000 and 100,000, in a
# free-form study (the tasks study's cells are fixed, and its 1,000,000-task and thread cells
# take minutes and every process id), beside rust:tokio-bare (`concur classic tokio-tasks`)
# and concur's async:100000. With MILLION=1, then one run of each of the two rows and the
# floor at 1,000,000 (the published figures' size).
# Prints per row and N the median peak RSS, tree PSS, PSS per task above the row's 1-task
# cell, lateness, and each row's ratio to the floor. Needs g++ with asio's headers and Mono's
# mcs (apt-get install g++ libasio-dev mono-mcs, or concur classic install). About 10 minutes
# with REPEAT = 3. Run it on a quiet machine.
# Usage: bench/tasks-cpp-mono.sh [OUT_DIR] [REPEAT]   (CONCUR=path/to/concur to skip the
#        build; MILLION=1 for the 1,000,000-task runs)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-cpp-mono}"
repeat="${2:-3}"
mkdir -p "$out/programs"
source bench/lib.sh
if [ -z "${CONCUR:-}" ]; then
  build
  CONCUR=$bin
fi
CONCUR=$(readlink -f "$CONCUR")
command -v g++ >/dev/null || { echo "g++ is not on PATH (apt-get install g++ libasio-dev)" >&2; exit 2; }
command -v mcs >/dev/null || { echo "mcs is not on PATH (apt-get install mono-mcs)" >&2; exit 2; }
prog="$out/programs"
"$CONCUR" classic show tasks-cpp >"$prog/tasks.cpp"
g++ -std=c++20 -O2 -pthread -o "$prog/tasks-cpp" "$prog/tasks.cpp"
"$CONCUR" classic show tasks-csharp >"$prog/tasks.cs"
mcs -optimize+ -out:"$prog/tasks-cs.exe" "$prog/tasks.cs" >/dev/null
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); $(g++ --version | head -1); $(mono --version | head -1)"
waits="--tasks {tasks} --wait-ms 10000"
peers=(
  --peer "cpp:asio=$prog/tasks-cpp $waits"
  --peer "csharp:mono=mono $prog/tasks-cs.exe $waits"
  --peer "rust:tokio-bare=$CONCUR classic tokio-tasks $waits"
)
"$CONCUR" run -w sleep:10s -m async:100000 -n 1,10000,100000 -r "$repeat" -i "${peers[@]}" \
  --json "$out/rows.jsonl" | tee "$out/rows.txt"
files=("$out/rows.jsonl")
if [ "${MILLION:-0}" = 1 ]; then
  "$CONCUR" run -w sleep:10s -m async:1000000 -n 1000000 -r 1 --warmup 0 "${peers[@]}" \
    --json "$out/million.jsonl" | tee "$out/million.txt"
  files+=("$out/million.jsonl")
fi
python3 - "${files[@]}" <<'PY'
import sys
sys.path.insert(0, "bench")
from task_rows import load, print_rows, pss as pss_of
cells, by = load(sys.argv[1:])
print_rows(cells)
def pss(m, n): return pss_of(by, m, n)
for n in (10_000, 100_000, 1_000_000):
    f = pss("rust:tokio-bare", n)
    for row in ("cpp:asio", "csharp:mono"):
        v = pss(row, n)
        if v and f:
            print(f"N = {n}: {row} {v / f:.2f}x rust:tokio-bare's tree PSS")
PY
echo "results in $out"
