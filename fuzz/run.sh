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

# Fuzz builds are instrumented: a target folder of their own (target/fuzz), never the main
# one's artefacts, but inside it, so a machine that keeps target/ keeps the fuzz build too.
# 16 codegen units (cargo-fuzz's default is 1): the build of the crate and its dependencies
# with coverage instrumentation took 14 minutes of CI's 35 with one; the targets run a little
# slower. `cargo fuzz run` gets the same flags, or it would build everything again.
unset CARGO_TARGET_DIR
build=(--sanitizer none --codegen-units 16 --target-dir "$PWD/../target/fuzz")
cargo fuzz build "${build[@]}"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t" "artifacts/$t"
    touch "$scratch/$t.start"
    start=$(date +%s)
    # -max_len: inputs as long as the longest seed and more; the corpus is read first.
    if cargo fuzz run "${build[@]}" "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=512 \
        -print_final_stats=1 >"$scratch/$t.log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$' || echo '?')
        echo "$t: ok, $runs inputs in $(($(date +%s) - start)) s"
    else
        echo "$t: FAILED after $(($(date +%s) - start)) s" >&2
        grep -m 1 -A 3 'panicked at' "$scratch/$t.log" >&2 || true
        tail -n 25 "$scratch/$t.log" >&2
        find "artifacts/$t" -type f -newer "$scratch/$t.start" | while read -r crash; do
            echo "crashing input: fuzz/$crash (replay: cd fuzz && cargo fuzz run ${build[*]} $t $crash)" >&2
        done
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz targets that found a crash: ${failed[*]}" >&2
    exit 1
fi
