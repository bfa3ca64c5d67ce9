#!/usr/bin/env bash
# concur's HTTP/3 client (src/workload/http/h3.rs: quinn and h3) against oha's (also quinn and
# h3; Debian's h2load has no HTTP/3), at delay 0 against one `concur serve --tls-self-signed
# --http3` on loopback: 100 streams over 1 and over 10 QUIC connections, `async:100` and
# `async-local:100` (`--http3 --connections C`) and oha (`--http-version 3 -c C -p 100/C`),
# N GETs a sample, every client in every round in turn. Prints each round's samples, then the
# medians: req/s and client CPU µs a request (concur's from its run record, oha's from
# time(1)), each against oha's of the same connections (docs/benchmarks.md §41).
#
# Usage: bench/h3-client.sh [N] [ROUNDS]   (OHA=path/to/oha; CONCUR=path/to/concur to skip
#        the build). oha needs its http3 feature:
#        cargo install oha --locked --features http3 --root /tmp/oha
# Run it on a quiet machine: client and server share the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50000}
rounds=${2:-5}
oha=${OHA:-oha}
source bench/lib.sh
if [ -z "${CONCUR:-}" ]; then
  build
else
  bin=$(readlink -f "$CONCUR")
fi
"$oha" --help 2> /dev/null | grep -q 'Available values 0.9, 1.0, 1.1, 2, 3' \
  || { echo "$oha is missing or has no HTTP/3: cargo install oha --locked --features http3" >&2; exit 2; }
start_server srv --tls-self-signed --http3
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "concur: $bin ($("$bin" --version)); $("$oha" --version); $n GETs a sample, $rounds rounds"
base="$srv_url/add?delay=0"
samples=$(mktemp)
for r in $(seq "$rounds"); do
  for c in 1 10; do
    http3_oha "$oha" "$c" $((100 / c)) "$n" "$base" | tee -a "$samples"
    for model in async async-local; do
      http3_concur "$srv_pid" /tmp/h3-client.jsonl "$model" "$c" "$n" "$base" "$srv_ca" | tee -a "$samples"
    done
  done
done
medians "$samples" | ratio_table oha
rm -f "$samples"
