#!/usr/bin/env bash
# The harness's own cost per command, as recorded in docs/benchmarks.md §7: `cmd:true` × 2,000
# under pool:2, and `xargs -P 2 -n 1 true` over the same 2,000 as an external cell of the same
# study (interleaved runs, 5 each): the per-task cost of each is its wall / 2,000.
# Usage: bench/cmd-overhead.sh [OUT_DIR]   (CONCUR=path/to/concur to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-bench}"
mkdir -p "$out"
if [ -z "${CONCUR:-}" ]; then
  cargo build --release -q
  CONCUR=target/release/concur
fi
"$CONCUR" run -w cmd:true -m pool:2 -n 2000 -r 5 --warmup 1 \
  --peer 'xargs-P2:2=seq {tasks} | xargs -P {workers} -n 1 true' \
  --json "$out/cmd-overhead.jsonl" --markdown "$out/cmd-overhead.md" | tee "$out/cmd-overhead.txt"
