#!/usr/bin/env bash
# Instructions a task costs in a model, for two binaries: counts, not times, so the answer does
# not move with the machine's load (bench/overhead-ab.sh's per-task times read 0.86-0.90x for
# a binary against itself in one hour on this VM). For each binary and model, callgrind counts
# the `__run` child's instructions for `fib:0` (an empty task) at 20,000 and at 120,000 tasks;
# the difference over 100,000 is one task's cost, start-up cancelled out:
#   - "run": only inside the model's `run` (what the wall time covers). Callgrind's toggle
#     follows the thread that enters `run`, so this is exact for `seq` and partial for models
#     whose tasks run on other threads;
#   - "child": the whole child, the run's bookkeeping after the wall time (sorting the
#     records, the lanes, the results line) included, every thread counted.
# Multi-threaded models vary by a few % between runs (valgrind runs one thread at a time and
# the workers' waits differ); seq's counts repeat to the instruction.
# Usage: bench/task-icount.sh OLD_BIN NEW_BIN [MODEL...]   (default: seq pool:2 actor:2 async:2)
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench/task-icount.sh OLD_BIN NEW_BIN [MODEL...]" >&2; exit 2; }
old=$1 new=$2
shift 2
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(seq pool:2 actor:2 async:2)
command -v valgrind > /dev/null || { echo "valgrind is missing (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Instructions of the __run child for N tasks: child_instructions BIN MODEL N [CALLGRIND_OPTION...]
child_instructions() {
  local bin=$1 model=$2 n=$3 sum=0 f
  shift 3
  rm -f "$work"/cg.*
  valgrind --tool=callgrind --trace-children=yes "$@" --callgrind-out-file="$work/cg.%p" \
    "$bin" run -w fib:0 -m "$model" -n "$n" -r 1 --warmup 0 -q --json "$work/r.jsonl" \
    > /dev/null 2> "$work/log" || { echo "$bin -m $model failed under valgrind:" >&2; cat "$work/log" >&2; exit 2; }
  for f in "$work"/cg.*; do
    if grep -q '^cmd:.*__run' "$f"; then
      sum=$((sum + $(awk '/^(summary|totals):/ { print $2; exit }' "$f")))
    fi
  done
  [ "$sum" -gt 0 ] || { echo "no __run child counted for $bin -m $model" >&2; exit 2; }
  echo "$sum"
}

# One task's instructions: per_task BIN MODEL [CALLGRIND_OPTION...]
per_task() {
  local bin=$1 model=$2 a b
  shift 2
  a=$(child_instructions "$bin" "$model" 20000 "$@")
  b=$(child_instructions "$bin" "$model" 120000 "$@")
  # A window that counted nothing: the model's `run` has another name or hands everything to
  # other threads before the toggle sees it.
  if [ $((b - a)) -le 0 ]; then echo -; else echo $(((b - a) / 100000)); fi
}

window='--toggle-collect=*as concur::model::Model>::run*'
echo "instructions a task (fib:0; 120,000 tasks less 20,000, over 100,000)"
printf '%-10s %10s %10s %10s %10s\n' model "old run" "new run" "old child" "new child"
for m in "${models[@]}"; do
  printf '%-10s %10s %10s %10s %10s\n' "$m" "$(per_task "$old" "$m" "$window")" \
    "$(per_task "$new" "$m" "$window")" "$(per_task "$old" "$m")" "$(per_task "$new" "$m")"
done
