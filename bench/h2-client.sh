#!/usr/bin/env bash
# concur's own HTTP/2 client (src/workload/http/h2/) against the h2 crate's (a binary from
# before it) and h2load, at delay 0 against one `concur serve`: 100 streams over 1 and over 10
# h2c connections, `async:100` and `async-local:100`, N GETs a sample, every client in every
# round in turn. Prints each round's samples, then the medians: req/s and client CPU µs a
# request, and each against h2load's of the same connections (docs/benchmarks.md §32).
#
# Usage: bench/h2-client.sh OLD_BIN NEW_BIN [N] [ROUNDS]
#   CONNECTIONS="1 10"  which connection counts to run (default both)
#   NEW_ENV="NAME=VALUE ..."  also run NEW_BIN with these variables set, as "newenv" (e.g.
#             NEW_ENV=_RJEM_MALLOC_CONF=dirty_decay_ms:10000, jemalloc's own decay; §41)
#   OLD_BIN   a concur built before the change (the h2 crate's client), e.g. /tmp/concur-h2crate
#   NEW_BIN   a concur with concur's own client (default: target/release/concur, built here)
# Run it on a quiet machine: client and server share the cores, as h2load and the server do.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench/h2-client.sh OLD_BIN [NEW_BIN] [N] [ROUNDS]}
new=${2:-}
n=${3:-100000}
rounds=${4:-5}
source bench/lib.sh
if [ -z "$new" ]; then
  build
  new=$bin
fi
command -v h2load > /dev/null || { echo "h2load is missing: apt-get install nghttp2-client" >&2; exit 1; }
bin=$new
start_server srv
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $old ($("$old" --version)), new: $new; $n GETs a sample, $rounds rounds"
base="$srv_url/add?delay=0"
samples=$(mktemp)
for r in $(seq "$rounds"); do
  for c in ${CONNECTIONS:-1 10}; do
    http2_h2load "$c" $((100 / c)) "$n" "$base" | tee -a "$samples"
    for model in async async-local; do
      for which in old new; do
        bin=${!which}
        http2_concur "$srv_pid" /tmp/h2-client.jsonl "$model" "$c" "$n" "$base" \
          | sed "s/^/$which-/" | tee -a "$samples"
      done
      if [ -n "${NEW_ENV:-}" ]; then
        bin=$new
        # shellcheck disable=SC2086 # NEW_ENV is NAME=VALUE words
        (export $NEW_ENV; http2_concur "$srv_pid" /tmp/h2-client.jsonl "$model" "$c" "$n" "$base") \
          | sed "s/^/newenv-/" | tee -a "$samples"
      fi
    done
  done
done
medians "$samples" | ratio_table h2load
rm -f "$samples"
