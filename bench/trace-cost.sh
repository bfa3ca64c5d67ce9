#!/usr/bin/env bash
# What seeing the schedule costs a task (benches/trace_cost.rs): the live counter page, a task
# outside any trace, a traced task's place in the phase book and its phase events, on one
# thread and two at once; ns a task, medians of ROUNDS rounds. Timed, so run it on a quiet
# machine (nothing else building or benchmarking).
# Usage: bench/trace-cost.sh [ROUNDS]   (default 9)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
cargo bench --bench trace_cost -- "${1:-9}"
