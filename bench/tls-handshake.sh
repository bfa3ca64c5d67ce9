#!/usr/bin/env bash
# What one TLS handshake costs against `concur serve --tls-self-signed` (ECDSA P-256, TLS 1.3),
# client and server CPU apart, for docs/benchmarks.md §21 (issue 32's "TLS at no extra wall"):
#   openssl s_time -new  OpenSSL 3.0's client, X25519 (it has no ML-KEM), one handshake at a time
#   concur seq           concur's rustls client with --no-keepalive: X25519MLKEM768 first, as
#                        libcurl's rustls-ffi offers, the certificate verified against --cacert
#   concur curl:1        the same through libcurl + rustls-ffi (a new connection per request)
# Each: N handshakes (a GET of delay=0 each), the server's CPU from /proc before and after, the
# client's from its own rusage (GNU time); ROUNDS rounds alternated, medians.
# Then 100 handshakes at once, as the TLS crawl starts (`async:100`, 100 GETs of delay=0): the
# run's wall, connect_us p50 and tls_us max, medians of ROUNDS runs; with BEFORE=PATH, another
# concur binary's alternated with it (a build before a change).
# Usage: BEFORE=/path/to/old/concur bench/tls-handshake.sh [N] [ROUNDS] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
rounds=${2:-3}
out=${3:-/tmp/concur-tls-handshake}
mkdir -p "$out"
source bench/lib.sh
build
start_server tls --tls-self-signed
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $(openssl version)"
: > "$out/samples.txt"
one() { # LABEL HANDSHAKES COMMAND...: "LABEL client_us server_us" per handshake
  local label=$1 count=$2 before after
  shift 2
  before=$(proc_cpu "$tls_pid")
  /usr/bin/time -f '%U %S' -o "$out/time" "$@" > "$out/last.txt" 2>&1
  after=$(proc_cpu "$tls_pid")
  read -r cu cs < "$out/time"
  awk -v l="$label" -v n="$count" -v cu="$cu" -v cs="$cs" -v b="$before" -v a="$after" 'BEGIN {
    split(b, x, " "); split(a, y, " ");
    printf "%s %.1f %.1f\n", l, (cu + cs) / n * 1e6, (y[1] + y[2] - x[1] - x[2]) / n * 1e6 }'
}
host=${tls_url#https://}
for r in $(seq "$rounds"); do
  # s_time counts its own connections in the time given; read the count from its report.
  before=$(proc_cpu "$tls_pid")
  /usr/bin/time -f '%U %S' -o "$out/time" openssl s_time -connect "$host" -new -time 5 -CAfile "$tls_ca" > "$out/stime.txt" 2>&1 || true
  after=$(proc_cpu "$tls_pid")
  count=$(sed -n 's/^\([0-9]*\) connections in [0-9.]*s.*/\1/p' "$out/stime.txt" | head -1)
  read -r cu cs < "$out/time"
  awk -v l=openssl-s_time -v n="$count" -v cu="$cu" -v cs="$cs" -v b="$before" -v a="$after" 'BEGIN {
    split(b, x, " "); split(a, y, " ");
    printf "%s %.1f %.1f\n", l, (cu + cs) / n * 1e6, (y[1] + y[2] - x[1] - x[2]) / n * 1e6 }' | tee -a "$out/samples.txt"
  one concur-seq "$n" $bin crawl "$tls_url/add?delay=0&name={rand}" -n "$n" --model seq --no-keepalive --cacert "$tls_ca" -q -i | tee -a "$out/samples.txt"
  one concur-curl:1 "$n" $bin crawl "$tls_url/add?delay=0&name={rand}" -n "$n" --model curl:1 --no-keepalive --cacert "$tls_ca" -q -i | tee -a "$out/samples.txt"
done
medians "$out/samples.txt" | awk '
  BEGIN { print "| client | client CPU µs a handshake | server CPU µs a handshake |"; print "|---|---:|---:|" }
  { printf "| %s | %.0f | %.0f |\n", $1, $2, $3 }'
: > "$out/burst.txt"
for r in $(seq "$rounds"); do
  for label in ${BEFORE:+before} this; do
    b=$bin
    [ "$label" = before ] && b=$BEFORE
    $b crawl "$tls_url/add?delay=0&name={rand}" -n 100 -c 100 --model async --cacert "$tls_ca" -q -i --json "$out/burst.jsonl" > /dev/null
    python3 - "$out/burst.jsonl" "$label" <<'PY' >> "$out/burst.txt"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
print(sys.argv[2], r["wall_s"] * 1e3, r["connect_us"]["p50"] / 1e3, r["tls_us"]["max"] / 1e3)
PY
  done
done
medians "$out/burst.txt" | awk '{ printf "100 handshakes at once (%s): wall %.1f ms, connect p50 %.1f ms, TLS handshake max %.1f ms\n", $1, $2, $3, $4 }'
