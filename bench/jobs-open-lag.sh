#!/usr/bin/env bash
# The release lag of an open `jobs:W` run (SQLite queue, W worker threads) on a loaded machine,
# for A/B-ing two builds: ROUNDS rounds alternating the binaries given, each round RUNS runs of
# `concur run -w sleep:10ms -m jobs:W --rate 50 -n 20 -r 1` (tests/open_models.rs's cell)
# beside two `yes` loops; per run the largest release lag (`lag_us.max` of the run line) and,
# from a probe process sleeping 1 ms at a time towards absolute deadlines, the machine's worst
# wake-up meanwhile. The lag also counts time the releasing thread spent runnable but off the
# cores inside an enqueue, which a sleeping probe never sees: compare builds, not lag to probe.
# Usage: bench/jobs-open-lag.sh BIN_A [BIN_B...] (env: ROUNDS=2 RUNS=10 W=4, OUT=DIR for the
# results, /tmp/concur-jobs-open-lag by default). Needs cc for the probe.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-2}
runs=${RUNS:-10}
w=${W:-4}
out=${OUT:-/tmp/concur-jobs-open-lag}
mkdir -p "$out"
cat > "$out/probe.c" <<'C'
#include <signal.h>
#include <stdio.h>
#include <time.h>
static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }
static long long ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
int main(void) {
    signal(SIGTERM, on_term);
    long long due = ns(), worst = 0;
    while (!stop) {
        due += 1000000;
        struct timespec t = {due / 1000000000LL, due % 1000000000LL};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, 0);
        long long woke = ns();
        if (woke - due > worst) worst = woke - due;
        if (woke > due) due = woke;
    }
    printf("%.1f\n", worst / 1e6);
    return 0;
}
C
cc -O2 -o "$out/probe" "$out/probe.c"
yes > /dev/null & y1=$!
yes > /dev/null & y2=$!
trap 'kill $y1 $y2 2>/dev/null || true' EXIT
for round in $(seq "$rounds"); do
    for bin in "$@"; do
        line="round $round $(basename "$bin") lag/probe ms:"
        for i in $(seq "$runs"); do
            json="$out/$(basename "$bin")-$round-$i.jsonl"
            "$out/probe" > "$out/probe.out" & probe=$!
            "$bin" run -w sleep:10ms -m "jobs:$w" --rate 50 -n 20 -r 1 --warmup 0 -q --json "$json" > /dev/null
            kill -TERM "$probe"
            wait "$probe" || true
            lag=$(python3 -c 'import json,sys; print(max(round(r["lag_us"]["max"]/1000,1) for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "run"))' "$json")
            line="$line $lag/$(cat "$out/probe.out")"
        done
        echo "$line"
    done
done
