#!/usr/bin/env bash
# A/B of concur clients built from different commits, against one server, alternating in every
# round (wrk beside them): how docs/benchmarks.md §2 found and measured the curl:100 fall
# (9de600b) and §13 the HTTP/2 client change. Build each commit's release binary first (e.g.
# `git worktree add /tmp/wt COMMIT && CARGO_TARGET_DIR=/tmp/t cargo build --release`) and copy
# it aside. Prints, per client, the requests/s and client CPU µs per request of each round.
#
# usage: bench/client-ab.sh ROUNDS SERVER_BIN 'CRAWL ARGS' LABEL=BIN[=URL_SUFFIX]...
#   e.g. bench/client-ab.sh 5 /tmp/concur-main '-n 150000 -c 100 --model curl' \
#          before=/tmp/concur-9de600b^ after=/tmp/concur-9de600b
# URL_SUFFIX is appended to /add?delay=0 (default '&name={rand}'; a binary older than 9d037b5
# appends its own 10 letters: give it '&name='). AB_DELAY=MS asks for that delay instead of 0
# (e.g. AB_DELAY=100 with '-n 100000 -c 10000 --model async' for ten thousand connections).
# A BIN may be a script that runs concur its own way (e.g. `exec env LD_PRELOAD=… concur "$@"`).
set -euo pipefail
rounds=${1:?rounds}; server=${2:?server binary}; args=${3:?crawl args}; shift 3
[ $# -gt 0 ] || { echo "give at least one LABEL=BIN" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$server" serve --addr "127.0.0.1:$port" 2>/dev/null & srv=$!
tmp=$(mktemp -d)
trap 'kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT
base="http://127.0.0.1:$port/add?delay=${AB_DELAY:-0}"
for _ in $(seq 50); do curl -sf "$base" > /dev/null && break; sleep 0.1; done
for r in $(seq "$rounds"); do
  if [ "${AB_DELAY:-0}" = 0 ] && command -v wrk > /dev/null; then
    wrk -t2 -c100 -d4s "$base" | awk '/Requests\/sec/ { print "wrk", int($2), "-" }'
  fi
  for spec in "$@"; do
    IFS== read -r label bin suffix <<< "$spec"
    [ -n "$suffix" ] || suffix='&name={rand}'
    # shellcheck disable=SC2086
    "$bin" crawl "$base$suffix" $args -q --json "$tmp/r.jsonl" > /dev/null || true
    python3 - "$tmp/r.jsonl" "$label" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
ok = r["tasks_ok"]
print(sys.argv[2], round(ok / r["wall_s"]) if ok else 0,
      round(1e6 * (r["user_s"] + r["sys_s"]) / ok, 1) if ok else "-",
      "%.2f/%.2f" % (r["user_s"], r["sys_s"]), r["max_rss_kib"] // 1024)
PY
  done
done | awk '{ rps[$1] = rps[$1] " " $2; cpu[$1] = cpu[$1] " " $3; us[$1] = us[$1] " " $4
    rss[$1] = rss[$1] " " $5 }
  END { for (k in rps) printf "%-24s req/s:%s   cpu µs/req:%s   user/sys s:%s   peak RSS MiB:%s\n",
    k, rps[k], cpu[k], us[k], rss[k] }' | sort
