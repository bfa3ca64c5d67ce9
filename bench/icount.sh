#!/usr/bin/env bash
# Instructions per call of the single-threaded hot paths (benches/icount.rs: building a
# request, parsing a response, recording a latency, the server's route, a job's encode and
# decode), counted by callgrind, against bench/icount.baseline. Counts, not times: the same
# binary on the same machine gives the same count whatever the load, so a small growth is
# seen where a timing would drown it in noise. Exits 1 when a path grew by more than 10%.
# Usage: bench/icount.sh [--update]   (--update rewrites the baseline with today's counts)
# Needs valgrind (apt-get install valgrind) and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
update=false
case "${1:-}" in
  --update) update=true ;;
  "") ;;
  *) echo "usage: bench/icount.sh [--update]" >&2; exit 2 ;;
esac
command -v valgrind > /dev/null || { echo "valgrind is missing (apt-get install valgrind)" >&2; exit 2; }
baseline=bench/icount.baseline
iterations=1000
limit=10

bin=$(cargo bench --bench icount --no-run --message-format=json-render-diagnostics \
  | grep '"name":"icount"' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -1)
[ -x "$bin" ] || { echo "the icount bench was not built" >&2; exit 2; }
work=${CARGO_TARGET_DIR:-$PWD/target}/icount
mkdir -p "$work"

# Fixed seeds for std's HashMap (and tokio's scheduler): axum's router allocates its routes in
# hash order, and with random seeds glibc's heap comes out in one of two layouts, which moves
# server_route's count by 1.5% between runs. getrandom(2) from this preload gives the same
# bytes every time; only the bench's runs under valgrind see it.
cat > "$work/seed.c" <<'C'
#include <string.h>
#include <sys/types.h>
ssize_t getrandom(void *buf, size_t n, unsigned flags) { (void)flags; memset(buf, 7, n); return (ssize_t)n; }
C
[ "$work/seed.so" -nt "$work/seed.c" ] || ${CC:-cc} -shared -fPIC -O2 -o "$work/seed.so" "$work/seed.c"

# What is left out of every count: the current-thread runtime's park, where server_route waits
# for its zero sleep's timer to fire. It is the runtime's idle turn, not the route's work, and
# it loops once more whenever the wall clock says so (0.6% of the route's count under load).
idle='tokio::runtime::scheduler::current_thread::Context::park'

# Instructions of one call of path $1: callgrind counts only inside icount_measured, which runs
# the path $iterations times after a warm-up call outside it; less the calls to $idle in there
# (the cost that follows each `calls=` line to it in the output, inclusive).
count() {
  local out="$work/$1.callgrind" total left_out
  LD_PRELOAD="$work/seed.so" valgrind --tool=callgrind --toggle-collect='*icount_measured*' \
    --callgrind-out-file="$out" "$bin" "$1" "$iterations" > /dev/null 2> "$work/$1.log" \
    || { echo "$1: the bench failed under valgrind:" >&2; cat "$work/$1.log" >&2; exit 2; }
  total=$(awk '/^(summary|totals):/ { print $2; exit }' "$out")
  [ "${total:-0}" -gt 0 ] \
    || { echo "$1: nothing counted (is icount_measured in $bin's symbols?)" >&2; exit 2; }
  left_out=$(awk -v f="$idle" '
    /^c?fn=\(/ {
      rest = substr($0, index($0, "=") + 1); id = rest; sub(/\).*/, ")", id)
      if (index(rest, ") ")) names[id] = substr(rest, index(rest, ") ") + 2)
      if ($0 ~ /^cfn=/) cfn = names[id]
      next
    }
    /^calls=/ { take = (cfn == f); next }
    take { sum += $2; take = 0 }
    END { printf "%d", sum }' "$out")
  awk -v t="$total" -v l="$left_out" -v n="$iterations" 'BEGIN { printf "%.1f", (t - l) / n }'
}

mapfile -t paths < <("$bin" --list)
declare -A now
for p in "${paths[@]}"; do now[$p]=$(count "$p"); done

if $update; then
  {
    echo "# Instructions per call of each hot path (bench/icount.sh --update; docs/benchmarks.md)."
    echo "# $(rustc --version), $(ldd --version | head -1), $(valgrind --version), $(uname -m)"
    for p in "${paths[@]}"; do echo "$p ${now[$p]}"; done
  } > "$baseline"
  echo "$baseline rewritten:"
  for p in "${paths[@]}"; do printf '%-20s %12s\n' "$p" "${now[$p]}"; done
  exit 0
fi

declare -A base
while read -r name value; do
  case "$name" in ''|'#'*) continue ;; esac
  base[$name]=$value
done < "$baseline"

failed=()
printf '%-20s %12s %12s %9s\n' path baseline now change
for p in "${paths[@]}"; do
  b=${base[$p]:-}
  if [ -z "$b" ]; then
    printf '%-20s %12s %12s %9s\n' "$p" - "${now[$p]}" -
    failed+=("$p has no baseline (bench/icount.sh --update after adding a path)")
    continue
  fi
  change=$(awk -v b="$b" -v n="${now[$p]}" 'BEGIN { printf "%+.2f%%", (n - b) / b * 100 }')
  printf '%-20s %12s %12s %9s\n' "$p" "$b" "${now[$p]}" "$change"
  if awk -v b="$b" -v n="${now[$p]}" -v l="$limit" 'BEGIN { exit !(n > b * (1 + l / 100)) }'; then
    failed+=("$p grew by more than $limit%: ${now[$p]} instructions a call, against $b in $baseline")
  fi
  if awk -v b="$b" -v n="${now[$p]}" -v l="$limit" 'BEGIN { exit !(n < b * (1 - l / 100)) }'; then
    echo "($p is more than $limit% below its baseline: if that is meant, bench/icount.sh --update)"
  fi
  unset "base[$p]"
done
for p in "${!base[@]}"; do
  failed+=("$p is in $baseline but no longer a path of benches/icount.rs (bench/icount.sh --update)")
done
if [ ${#failed[@]} -gt 0 ]; then
  printf '%s\n' "${failed[@]}" >&2
  exit 1
fi
