#!/usr/bin/env bash
# What the regression gate can detect, measured (docs/benchmarks.md §18, docs/output.md): for
# each repeat count R and each extra amount of work X%, one study runs the CPU workload
# spin:N (the baseline) and spin:N·(1 + X/100) (the change), R counted runs each after one
# warm-up, their runs interleaved (concur alternates the cells' order every round, so drift of
# the machine falls on both alike); the change's runs are then relabelled spin:N, so that the
# two files hold the same cell, and
#   concur report change.jsonl --baseline base.jsonl --fail-on-regression
# judges them: exit 1 is "regressed". Every (R, X) is tried TRIALS times; the table gives, per
# R and X, how many trials the gate called regressed, the median change it measured, the
# median p and the noise (the baseline's slowest run over its fastest, median of the trials),
# and per R the smallest X from which on every trial was called regressed. The runs, each
# report's verdict and every number are kept in OUT_DIR (verdicts.tsv).
# Usage: bench/gate-power.sh [OUT_DIR]
#   env: CONCUR=path/to/concur (skips the build), N (spin iterations of the baseline,
#        default 100000000, about 0.1 s here), REPEATS (default "4 5 10"),
#        STEPS (extra work in %, default "0 4 6 8 10 15 20 30"), TRIALS (default 3)
# About 4 minutes with the defaults on the project's 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-bench/gate-power}"
mkdir -p "$out"
if [ -z "${CONCUR:-}" ]; then
  cargo build --release -q
  CONCUR=${CARGO_TARGET_DIR:-$PWD/target}/release/concur
fi
n=${N:-100000000}
repeats=${REPEATS:-4 5 10}
steps=${STEPS:-0 4 6 8 10 15 20 30}
trials=${TRIALS:-3}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "spin:$n baseline; repeats: $repeats; extra work %: $steps; trials: $trials"
: > "$out/verdicts.tsv"
for trial in $(seq 1 "$trials"); do
  for r in $repeats; do
    for x in $steps; do
      # Two cells need two specs: "+0%" is one iteration more.
      m=$(( n + n * x / 100 )); [ "$m" -gt "$n" ] || m=$(( n + 1 ))
      both="$out/both-$r-$x-$trial.jsonl"
      "$CONCUR" run -w "spin:$n" -w "spin:$m" -m seq -n 1 -r "$r" --warmup 1 -q \
        --json "$both" > /dev/null
      # Split by workload; the change's runs take the baseline's spec.
      python3 - "$both" "$n" "$m" "$out/base.jsonl" "$out/change.jsonl" <<'PY'
import json, sys
both, n, m, base, change = sys.argv[1:]
with open(both) as f, open(base, "w") as b, open(change, "w") as c:
    for line in f:
        d = json.loads(line)
        if d["type"] == "meta":
            b.write(line); c.write(line)
        elif d["type"] == "run" and d["workload"] == f"spin:{n}":
            b.write(line)
        elif d["type"] == "run" and d["workload"] == f"spin:{m}":
            d["workload"] = f"spin:{n}"
            c.write(json.dumps(d) + "\n")
PY
      set +e
      "$CONCUR" report "$out/change.jsonl" --baseline "$out/base.jsonl" \
        --fail-on-regression --format json -q > "$out/report.json" 2> "$out/report.err"
      code=$?
      set -e
      if [ "$code" -gt 1 ]; then
        echo "gate refused (exit $code): $(cat "$out/report.err")" >&2
        exit 1
      fi
      python3 - "$out/report.json" "$out/base.jsonl" "$r" "$x" "$trial" "$code" \
        >> "$out/verdicts.tsv" <<'PY'
import json, sys
path, base, r, x, trial, code = sys.argv[1:]
c = json.load(open(path))["comparison"]["changes"][0]
# The noise: the baseline's slowest run over its fastest.
walls = [d["wall_s"] for d in map(json.loads, open(base)) if d["type"] == "run"]
spread = max(walls) / min(walls) - 1
print(f"{r}\t{x}\t{trial}\t{code}\t{c['ratio']:.4f}\t{c['p']:.4f}\t{c['verdict']}\t{spread:.4f}")
PY
    done
  done
  echo "trial $trial done; load: $(cut -d' ' -f1-3 /proc/loadavg)"
done

python3 - "$out/verdicts.tsv" "$trials" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
trials = int(sys.argv[2])
by = {}
for r, x, t, code, ratio, p, verdict, spread in rows:
    by.setdefault((int(r), int(x)), []).append((int(code), float(ratio), float(p), float(spread)))
print()
print("| runs a side | extra work | regressed | median change | median p | baseline's spread |")
print("|---:|---:|---:|---:|---:|---:|")
for (r, x), v in sorted(by.items()):
    hits = sum(1 for c, *_ in v if c == 1)
    ratio = statistics.median(q[1] for q in v)
    p = statistics.median(q[2] for q in v)
    spread = statistics.median(q[3] for q in v)
    print(f"| {r} | +{x}% | {hits} of {len(v)} | {(ratio - 1) * 100:+.1f}% | {p:.3f} | {spread * 100:.0f}% |")
print()
for r in sorted({r for r, _ in by}):
    always = [x for (rr, x), v in sorted(by.items()) if rr == r and all(q[0] == 1 for q in v)]
    # The smallest X from which on every trial of every larger X was called regressed.
    xs = sorted(x for rr, x in by if rr == r)
    least = None
    for x in reversed(xs):
        if x in always:
            least = x
        else:
            break
    print(f"{r} runs a side: every trial regressed from +{least}% on" if least is not None
          else f"{r} runs a side: no step was called regressed in every trial")
PY
