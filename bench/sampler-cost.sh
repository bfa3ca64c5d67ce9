#!/usr/bin/env bash
# What the harness's memory sampler (the `pss-sampler` thread of the supervising process,
# src/measure/memory.rs) spends beside a run: its thread's user + sys CPU, read from /proc just
# before a 10 s open-model run ends, for each model given. Not in the run's own CPU figures,
# but taken from the cores client and server share.
# Usage: bench/sampler-cost.sh [MODEL...] (default: async curl). BIN=path measures another build.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
if [ -n "${BIN:-}" ]; then bin=$BIN; else build; fi
start_server srv
tck=$(getconf CLK_TCK)
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(async curl)
for model in "${models[@]}"; do
  "$bin" crawl "$srv_url/add?delay=0&name={rand}" --rate 1000 --duration 10s -c 100 \
    --model "$model" -q > /dev/null & run=$!
  sleep 9.5
  for t in /proc/$run/task/*; do
    if [ "$(cat "$t/comm" 2> /dev/null)" = pss-sampler ]; then
      awk -v m="$model" -v t="$tck" '{ s = ($14 + $15) / t
        printf "%-12s pss-sampler %.2f s of CPU in 9.5 s: %.3f of a core\n", m, s, s / 9.5 }' "$t/stat"
    fi
  done
  wait "$run"
done
