#!/usr/bin/env bash
# The classic programs beside concur's own models, as recorded in docs/benchmarks.md §6:
# one run each of `concur run gil --classic`, `concur run mailer --classic` (with a Redis of
# its own on a free port, for jobs-redis:10 and rb:sidekiq:10) and `concur run crawl
# --classic`, results and Markdown tables into OUT_DIR. Needs python3 (and, for every row,
# what `concur classic install` installs; missing ones are left out with a note).
# Usage: bench/classic-studies.sh [OUT_DIR] [STUDY...]   (CONCUR=path/to/concur to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-bench}"
shift || true
studies=("${@:-gil mailer crawl}")
mkdir -p "$out"
source bench/lib.sh
if [ -z "${CONCUR:-}" ]; then
  build
  CONCUR=$bin
fi
for study in ${studies[@]}; do
  extra=()
  if [ "$study" = mailer ] && command -v redis-server >/dev/null; then
    port=$(free_port)
    redis-server --port "$port" --save '' --appendonly no --daemonize yes --pidfile "$out/redis.pid" >/dev/null
    for _ in $(seq 100); do [ -s "$out/redis.pid" ] && break; sleep 0.05; done
    stop_on_exit "$(cat "$out/redis.pid")"
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    extra=(--jobs-backend "redis://127.0.0.1:$port/0")
  fi
  echo "== concur run $study --classic"
  "$CONCUR" run "$study" --classic "${extra[@]}" --json "$out/$study-classic.jsonl" \
    --markdown "$out/$study-classic.md" -i | tee "$out/$study-classic.txt"
done
echo "results in $out"
