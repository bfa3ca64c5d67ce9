#!/usr/bin/env bash
# The tasks study's event-loop rows of issue 44 beside the rows they sit next to: N tasks
# waiting 10 s in CPython's asyncio, on uvloop's loop and under trio, with concur's async:N as
# the reference; each program is the one `concur run tasks --classic` ships, run as an
# external cell (`--peer`), at 1 task (the baseline of PSS/task) and at N; then MRI's threads
# against its fibers on the async gem at 10,000 (threads stop there, and fibers at about
# 30,000: vm.max_map_count). Prints the tables (tree PSS, lateness) and keeps the results in OUT_DIR.
# Needs python3 with trio and uvloop (pip install trio uvloop) and ruby with the async gem
# (apt-get install ruby-async); PYTHON=path picks the interpreter. About 4 minutes at
# N = 100,000. Run it on a quiet machine.
# Usage: bench/tasks-loops.sh [OUT_DIR] [N]   (CONCUR=path/to/concur to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-tasks-loops}"
n="${2:-100000}"
py="${PYTHON:-python3}"
mkdir -p "$out"
source bench/lib.sh
if [ -z "${CONCUR:-}" ]; then
  build
  CONCUR=$bin
fi
"$CONCUR" classic show tasks-python >"$out/tasks.py"
"$CONCUR" classic show tasks-ruby >"$out/tasks.rb"
"$py" -c "import trio, uvloop"
ruby -e "require 'async'"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); $("$py" --version); $(ruby --version)"
args="--tasks {tasks} --wait-ms 10000"
"$CONCUR" run -w sleep:10s -m "async:$n" -n "1,$n" -r 1 --warmup 0 \
  --peer "py:asyncio=$py $out/tasks.py asyncio $args" \
  --peer "py:uvloop=$py $out/tasks.py uvloop $args" \
  --peer "py:trio=$py $out/tasks.py trio $args" \
  --json "$out/loops.jsonl" | tee "$out/loops.txt"
"$CONCUR" run -w sleep:10s -m async:10000 -n 1,10000 -r 1 --warmup 0 \
  --peer "rb:threads=ruby $out/tasks.rb $args" \
  --peer "rb:fibers=ruby $out/tasks.rb --mode fibers $args" \
  --json "$out/ruby.jsonl" | tee "$out/ruby.txt"
echo "results in $out"
