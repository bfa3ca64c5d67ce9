#!/usr/bin/env bash
# The crate's build times as a developer meets them (docs/benchmarks.md §23): the release build
# after touching one model (src/model/pool.rs), and concur alone rebuilt after
# `cargo clean -p concur` (its dependencies kept). Run in a checkout whose dependencies are
# built; prints seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
touch src/model/pool.rs
s=$(date +%s.%N); cargo build --release -q; e=$(date +%s.%N)
echo "touch one model: $(echo "$e - $s" | bc) s"
cargo clean -p concur --release -q
s=$(date +%s.%N); cargo build --release -q; e=$(date +%s.%N)
echo "concur alone:    $(echo "$e - $s" | bc) s"
