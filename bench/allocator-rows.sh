#!/usr/bin/env bash
# Each row's own memory under each allocator: `concur run STUDY --quick -r ROUNDS` (default the
# mailer) with concur built with glibc's malloc (--no-default-features, into its own target
# directory) and with jemalloc (the default build) under several settings, given to jemalloc
# through _RJEM_MALLOC_CONF, which the run's child inherits. "jemalloc" is the binary as it
# ships: its measured processes (the run's child) return freed pages after 1 s (src/main.rs);
# "jemalloc 10s" is jemalloc's own default, kept by the study and the server. Prints, per row, the median peak
# RSS of the largest process and the median tree PSS, MiB. Runs one after another (never two
# at once on 2 cores).
# Usage: bench/allocator-rows.sh [ROUNDS] [STUDY]   (default: 3 mailer)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} study=${2:-mailer}
jem=$PWD/target/release/concur
glibc_target=${GLIBC_TARGET:-$PWD/target/glibc}
cargo build --release -q
CARGO_TARGET_DIR=$glibc_target cargo build --release -q --no-default-features
glibc=$glibc_target/release/concur
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); $(git rev-parse --short HEAD)"
run() { # NAME BINARY MALLOC_CONF
  _RJEM_MALLOC_CONF=$3 "$2" run "$study" --quick -r "$rounds" --json "$out/$1.jsonl" -q > /dev/null
}
run glibc "$glibc" ""
run jemalloc "$jem" ""
run jemalloc-10s "$jem" "dirty_decay_ms:10000"
run jemalloc-decay0 "$jem" "dirty_decay_ms:0,muzzy_decay_ms:0"
python3 - "$out" glibc jemalloc jemalloc-10s jemalloc-decay0 <<'PY'
import collections, json, statistics, sys
out, names = sys.argv[1], sys.argv[2:]
rows, order = collections.defaultdict(dict), []
for n in names:
    per = collections.defaultdict(lambda: ([], []))
    for line in open(f"{out}/{n}.jsonl"):
        r = json.loads(line)
        if r.get("type") != "run" or r.get("warmup") or r.get("status") != "ok":
            continue
        k = f"{r['model']} ×{r['tasks']}"
        if k not in order:
            order.append(k)
        per[k][0].append(r.get("max_rss_kib", 0) / 1024)
        per[k][1].append((r.get("tree_pss_kib") or 0) / 1024)
    for k, (rss, pss) in per.items():
        rows[k][n] = (statistics.median(rss), statistics.median(pss))
print("peak RSS / tree PSS, MiB, medians")
print(f"{'row':20}" + "".join(f"{n:>22}" for n in names))
for k in order:
    cells = "".join(f"{'%.1f / %.1f' % rows[k][n] if n in rows[k] else '-':>22}" for n in names)
    print(f"{k:20}{cells}")
PY
