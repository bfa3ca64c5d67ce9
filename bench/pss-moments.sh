#!/usr/bin/env bash
# The tree PSS that the moments of a run read (docs/benchmarks.md §25): each run's peak
# (`tree_pss_kib`), its sample when every task had started (`tree_pss_all_started_kib`) and
# at its end (`tree_pss_end_kib`), medians over ROUNDS runs of each case:
#   - one `seq` task waiting 1 ms, and one waiting 300 ms;
#   - 100,000 `async` tasks waiting 1 ms, and waiting 1 s;
#   - one `seq` task waiting 300 ms alone, and beside three other concur studies (each a
#     parent and its run's child waiting 10 min, mapping the same binary: PSS splits the
#     binary's shared pages among every process that maps them).
# Usage: bench/pss-moments.sh [ROUNDS] (default 3). BIN=path measures another build.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-3}
if [ -n "${BIN:-}" ]; then bin=$BIN; else build; fi
out=$(mktemp -d)
others=()
cleanup() {
  kill "${others[@]}" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); $("$bin" --version)"

case_() { # LABEL WORKLOAD MODEL N: ROUNDS runs, one line of medians
  local label=$1 workload=$2 model=$3 n=$4 json="$out/$1.jsonl"
  "$bin" run -w "$workload" -m "$model" -n "$n" -r "$rounds" --warmup 0 -q --json "$json" > /dev/null
  python3 - "$label" "$json" <<'PY'
import json, statistics, sys
label, path = sys.argv[1], sys.argv[2]
runs = [l for l in map(json.loads, open(path)) if l["type"] == "run"]
def med(field):
    v = [r[field] for r in runs if r.get(field) is not None]
    if not v:
        return "-"
    return f"{statistics.median(v) / 1024:.2f} MiB ({len(v)}/{len(runs)})"
print(f"{label:34} peak {med('tree_pss_kib'):20} all started {med('tree_pss_all_started_kib'):20} "
      f"end {med('tree_pss_end_kib')}")
PY
}

case_ "seq, 1 task of 1 ms" sleep:1ms seq 1
case_ "seq, 1 task of 300 ms" sleep:300ms seq 1
case_ "async, 100,000 tasks of 1 ms" sleep:1ms async:100000 100000
case_ "async, 100,000 tasks of 1 s" sleep:1s async:100000 100000
case_ "seq, 1 task of 300 ms, alone" sleep:300ms seq 1
for i in 1 2 3; do
  "$bin" run -w sleep:600s -m seq -n 1 -r 1 --warmup 0 -q --json "$out/other-$i.jsonl" \
    > /dev/null 2>&1 & others+=($!)
done
# Each other study is running once its run's child is.
deadline=$((SECONDS + 30))
for pid in "${others[@]}"; do
  until pgrep -P "$pid" > /dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "the other studies did not start" >&2; exit 1; }
    sleep 0.05
  done
done
case_ "seq, 1 task of 300 ms, beside 3" sleep:300ms seq 1
