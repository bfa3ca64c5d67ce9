#!/usr/bin/env bash
# The library's closure tasks against the built-in fib:0, per task, in the same study (cells
# interleaved, 5 counted runs each, every run a fresh process of the example's binary).
# Usage: bench/closure_overhead.sh [N] [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --example closure_overhead
target/release/examples/closure_overhead "${1:-100000}" "${2:-5}"
