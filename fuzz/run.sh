#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (libFuzzer's -max_total_time), starting
# from its corpus in fuzz/corpus/TARGET/. Fails when a target finds a crash (a panic, an
# abort, a timeout of one input), printing the crashing input's path and how to replay it.
#
# Stable Rust is enough: `--sanitizer none` passes no -Z flag (cargo-fuzz's other sanitizers
# need nightly). Nothing found is written into the committed corpus: new inputs go to a
# scratch copy, crashes to fuzz/artifacts/TARGET/ (ignored by git).
#
# Every target runs under -rss_limit_mb=512: an input that makes a parser allocate what a forged
# header declares (a histogram claiming 4 GiB) fails as a crash.
#
# usage: fuzz/run.sh SECONDS [TARGET...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
case $seconds in '' | *[!0-9]*) echo "SECONDS '$seconds' must be a whole number" >&2; exit 2 ;; esac

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

# Fuzz builds are instrumented: their own target folder (fuzz/target), never the main one.
unset CARGO_TARGET_DIR
cargo fuzz build --sanitizer none

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t" "artifacts/$t"
    touch "$scratch/$t.start"
    start=$(date +%s)
    # -max_len: inputs as long as the longest seed and more; the corpus is read first.
    if cargo fuzz run --sanitizer none "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=512 \
        -print_final_stats=1 >"$scratch/$t.log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$' || echo '?')
        echo "$t: ok, $runs inputs in $(($(date +%s) - start)) s"
    else
        echo "$t: FAILED after $(($(date +%s) - start)) s" >&2
        grep -m 1 -A 3 'panicked at' "$scratch/$t.log" >&2 || true
        tail -n 25 "$scratch/$t.log" >&2
        find "artifacts/$t" -type f -newer "$scratch/$t.start" | while read -r crash; do
            echo "crashing input: fuzz/$crash (replay: cd fuzz && cargo fuzz run --sanitizer none $t $crash)" >&2
        done
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz targets that found a crash: ${failed[*]}" >&2
    exit 1
fi
