#!/usr/bin/env bash
# Issue 42, row 2 (docs/security.md): a SIZE-byte `Concur::Task` payload (286 MB by default)
# pushed to a fresh redis-server beside three `fib:5` jobs, then `concur jobs work -c 4
# --until-empty` under /usr/bin/time: prints the worker's exit code, wall time and peak RSS
# (the largest of its process tree), and what `jobs stats` counts after. The review saw the
# worker at 3.1 GB before the payload cap.
# usage: bench/jobs/big-payload.sh [SIZE] [BIN]   (BIN: default this tree's release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-286000000}
[[ $size =~ ^[1-9][0-9]*$ ]] || { echo "SIZE must be a positive number, not '$size'" >&2; exit 2; }
bin=${2:-$PWD/target/release/concur}
[ -n "${2:-}" ] || cargo build --release -q
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
  --logfile "$tmp/redis.log" --daemonize yes --pidfile "$tmp/redis.pid"
trap 'redis-cli -p "$port" shutdown nosave > /dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
url=redis://127.0.0.1:$port/0
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
"$bin" jobs enqueue -w fib:5 -n 3 --jobs-backend "$url" > /dev/null
python3 - "$port" "$size" <<'PY'
import json, socket, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
job = json.dumps({"class": "Concur::Task", "args": ["fib:5" + " " * size, 0], "jid": "big",
                  "queue": "default", "retry": True, "created_at": 1.0, "enqueued_at": 1.0}).encode()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"*3\r\n$5\r\nLPUSH\r\n$13\r\nqueue:default\r\n$%d\r\n%s\r\n" % (len(job), job))
assert s.recv(64).startswith(b":"), "LPUSH failed"
PY
set +e
/usr/bin/time -f "%x %e %M" -o "$tmp/time" "$bin" jobs work -c 4 --until-empty --jobs-backend "$url" 2> "$tmp/err" > /dev/null
set -e
read -r code wall kib < "$tmp/time"
sed 's/^/  /' "$tmp/err" | cut -c1-200
echo "payload of $size bytes: jobs work exit $code, ${wall} s, peak RSS $((kib / 1024)) MiB"
"$bin" jobs stats --jobs-backend "$url" | sed 's/^/  /'
