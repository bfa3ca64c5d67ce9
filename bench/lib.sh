# Sourced by the bench scripts after `cd` to the repository (never run on its own): what every
# one of them needs, in one place.
#   build                      builds the release binary; $bin is its path
#   build_profiling            builds with symbols and line tables (the `profiling` profile,
#                              for perf and heaptrack); $bin is target/profiling/concur
#   start_server NAME [OPT...] starts one `concur serve OPT...` on a free loopback port, in the
#                              background; sets NAME_port, NAME_pid and NAME_url (http:// or,
#                              with --tls-self-signed, https://, whose certificate's path is
#                              then NAME_ca); returns once it answers; stopped on exit.
#                              With $server_cpus set (a taskset list, e.g. 0), it runs on
#                              those CPUs only; crawl_row and http2_h2load run their client
#                              on $client_cpus the same way (client and server on cores of
#                              their own, as on two machines)
#   stop_on_exit PID           stops another background process when the script exits
#   raise_open_files           lifts the open-files limit as far as allowed (10,000 connections)
#   connections_args N W OUT [ARG...]
#                              the [N] [W] [OUT_DIR] arguments of the scripts that open W
#                              connections (N, W, OUT when absent): sets n, w and out, makes
#                              out, raises the open-files limit
#   proc_cpu PID               a process's CPU seconds so far, "user sys", from /proc
#   need_wrk2                  sets wrk2 to $WRK2 or wrk2 on PATH; exits 2 saying how to build it
#   medians FILE               per label (first column) of a samples file, the median of each
#                              further column: "LABEL MEDIAN..."
#
# The measurements that more than one script makes (bench/headlines.sh runs them all), each
# printing one line; $bin is the concur binary:
#   overhead_cases             bench/overhead.sh's models and task counts ("MODEL N" each)
#   overhead_case MODEL N JSON       N empty tasks, 5 runs + 1 warm-up: median wall and per task
#   throughput_concur MODEL N BASE JSON   N GETs of BASE{rand} at 100 connections: req/s
#   throughput_wrk SECONDS BASE      wrk -t 2 -c 100: req/s
#   throughput_hey N BASE            hey -c 100: req/s
#   throughput_oha OHA N BASE JSON   oha -c 100: req/s
#   rate_concur MODEL RATE SECONDS BASE JSON [GRAIN]
#                              open model, RATE/s for SECONDS at W = 100 (with --grain GRAIN if
#                              given): achieved, p50, p99, client CPU per request, failed
#   rate_wrk2 WRK2 RATE SECONDS BASE OUT_PREFIX
#                              wrk2 -R RATE (100 connections, its 10 s of calibration added)
#   scale_client MODEL N W URL JSON SERVER_PID
#                              N GETs of URL with W in flight: wall, failures, peak RSS, client
#                              and server CPU
#   scale_wrk N W URL OUT_PREFIX SERVER_PID [SECONDS]
#                              wrk at W connections (4 s): req/s, so the least time N take
#   crawl_row SERVER_PID JSON LABEL URL N C MODEL [FLAG...]
#                              one concur crawl: "LABEL wall_s cpu_s server_cpu_s max_rss_kib
#                              connections http_version tasks_ok"
#   http2_concur SERVER_PID JSON MODEL CONNECTIONS N BASE
#                              N GETs at 100 streams over CONNECTIONS h2c connections: req/s,
#                              client CPU µs per request
#   http2_h2load C M N BASE    h2load -c C -m M: req/s, client CPU µs per request

bench_pids=()
trap 'kill "${bench_pids[@]}" 2>/dev/null || true' EXIT

stop_on_exit() { bench_pids+=("$1"); }

build() {
  cargo build --release -q
  bin=${CARGO_TARGET_DIR:-$PWD/target}/release/concur
}

# The release binary ships without debug info; profilers need the symbols and lines.
build_profiling() {
  cargo build --profile profiling -q
  bin=${CARGO_TARGET_DIR:-$PWD/target}/profiling/concur
}

raise_open_files() { ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; }

connections_args() {
  n=${4:-$1}
  w=${5:-$2}
  out=${6:-$3}
  mkdir -p "$out"
  raise_open_files
}

# A port nothing listens on now: a fixed port would meet a server left from an earlier run, and
# the benchmark would measure that one.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_server() {
  local name=$1 port log scheme=http pid
  shift
  port=$(free_port)
  log=$(mktemp)
  case " $* " in *" --tls-self-signed "*) scheme=https ;; esac
  ${server_cpus:+taskset -c "$server_cpus"} "$bin" serve --addr "127.0.0.1:$port" "$@" 2> "$log" & pid=$!
  stop_on_exit "$pid"
  until curl -sk "$scheme://127.0.0.1:$port/stats" > /dev/null; do
    kill -0 "$pid" 2> /dev/null || { echo "concur serve did not start: $(cat "$log")" >&2; exit 1; }
    sleep 0.1
  done
  printf -v "${name}_port" '%s' "$port"
  printf -v "${name}_pid" '%s' "$pid"
  printf -v "${name}_url" '%s' "$scheme://127.0.0.1:$port"
  if [ "$scheme" = https ]; then
    printf -v "${name}_ca" '%s' "$(sed -n 's/.*written to \([^ ]*\) .*/\1/p' "$log")"
  fi
  rm -f "$log"
}

# The medians of a samples file: for each label (the first column, in first-seen order) a line
# "LABEL MEDIAN..." with the median of each further column.
medians() { # FILE
  python3 - "$1" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, *values = line.split()
    d[label].append([float(v) for v in values])
for label, rows in d.items():
    print(label, *(statistics.median(col) for col in zip(*rows)))
PY
}

need_wrk2() {
  wrk2="${WRK2:-$(command -v wrk2 || true)}"
  [ -x "$wrk2" ] || {
    echo "wrk2 not found: set WRK2=/path/to/wrk (built from a checkout of giltene/wrk2 with make)" >&2
    exit 2
  }
}

proc_cpu() { awk -v t="$(getconf CLK_TCK)" '{printf "%.2f %.2f", $14 / t, $15 / t}' "/proc/$1/stat"; }

# Enough tasks per model that the run takes well over the timer's resolution. Actors and job
# queues (issue 4): the SQLite queue writes two transactions a job.
overhead_cases=(
  "seq 100000" "pool:2 100000" "rayon:2 100000" "async:2 100000" "async-local:2 100000"
  "thread 10000" "fork 2000" "spawn 1000"
  "actor:2 100000" "jobs-memory:2 100000" "jobs:2 10000"
)

overhead_case() { # MODEL N JSON
  $bin run -w fib:0 -m "$1" -n "$2" -r 5 --warmup 1 -q --json "$3" --csv - \
    | awk -F, -v m="$1" -v n="$2" 'NR==2 {
        per = $9 / n;
        unit = "us"; v = per * 1e6;
        printf "%-16s %8d %10.4f s %11.3f %s\n", m, n, $9, v, unit }'
}

throughput_concur() { # MODEL N BASE JSON
  $bin crawl "${3}{rand}" -n "$2" -c 100 --model "$1" -q --json "$4" --csv - \
    | awk -F, -v m="concur-$1:100" -v n="$2" 'NR==2 { printf "%s %.0f\n", m, n/$9 }'
}

throughput_wrk() { # SECONDS BASE
  wrk -t 2 -c 100 -d "$1"s "${2}wrk" | awk '/Requests\/sec/ { printf "wrk %.0f\n", $2 }'
}

throughput_hey() { # N BASE
  hey -n "$1" -c 100 "${2}hey" | awk '/Requests\/sec/ { printf "hey %.0f\n", $2 }'
}

throughput_oha() { # OHA N BASE JSON
  "$1" -n "$2" -c 100 --no-tui --output-format json "${3}oha" > "$4"
  python3 -c "import json,sys; print('oha %.0f' % json.load(open(sys.argv[1]))['summary']['requestsPerSec'])" "$4"
}

# "concur-MODEL:100[+grainGRAIN] RATE achieved p50_us p99_us cpu_us_per_request failed"
rate_concur() { # MODEL RATE SECONDS BASE JSON [GRAIN]
  # shellcheck disable=SC2046
  $bin crawl "${4}{rand}" --rate "$2" --duration "$3"s -c 100 --model "$1" $([ -n "${6:-}" ] && echo --grain "$6") \
    -q --json "$5" >/dev/null
  python3 - "$5" "concur-$1:100${6:++grain$6}" "$2" <<'PY'
import json, sys
run = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
cpu = (run["user_s"] + run["sys_s"]) / max(run["tasks_ok"], 1) * 1e6
print(sys.argv[2], sys.argv[3], "%.1f" % run["rate_achieved"], run["latency_us"]["p50"],
      run["latency_us"]["p99"], "%.1f" % cpu, run["tasks_failed"])
PY
}

# "wrk2 RATE achieved p50_us p99_us cpu_us_per_request errors". wrk2 calibrates for its first
# 10 s and reports latency after it; its -R is per connection group, spread over the threads.
# CPU from /usr/bin/time.
rate_wrk2() { # WRK2 RATE SECONDS BASE OUT_PREFIX
  /usr/bin/time -f "%U %S" -o "$5.time" \
    "$1" -t 2 -c 100 -d $(($3 + 10))s -R "$2" --latency "${4}wrk2" > "$5.txt"
  python3 - "$5.txt" "$5.time" "$2" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(q):
    m = re.search(r"^\s*%s%%\s+([\d.]+)(us|ms|s)\s*$" % re.escape(q), t, re.M)
    v, u = float(m.group(1)), m.group(2)
    return int(v * {"us": 1, "ms": 1e3, "s": 1e6}[u])
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
n = int(re.search(r"(\d+) requests in", t).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
print("wrk2", sys.argv[3], "%.1f" % rps, ms("50.000"), ms("99.000"), "%.1f" % ((u + s) / n * 1e6),
      errs.group(1) if errs else 0)
PY
}

scale_client() { # MODEL N W URL JSON SERVER_PID
  local before after
  before=$(proc_cpu "$6")
  $bin crawl "$4" -n "$2" -c "$3" --model "$1" -q -i --json "$5" > /dev/null
  after=$(proc_cpu "$6")
  python3 - "$5" "$1:$3" "$3" "$before" "$after" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
w = int(sys.argv[3])
(bu, bs), (au, as_) = (map(float, a.split()) for a in sys.argv[4:6])
server = f"{au - bu:.2f} user {as_ - bs:.2f} sys"
print(f"{sys.argv[2]:14} wall {r['wall_s']:7.2f} s  ok {r['tasks_ok']:6}  failed {r['tasks_failed']:6} {r['failures'] or ''}"
      f"  peak RSS {r['max_rss_kib']/1024:6.1f} MiB  {r['max_rss_kib']/w:5.1f} KiB/in-flight"
      f"  connections {r.get('connections_opened')}"
      f"  client CPU {r['user_s']:.2f} user {r['sys_s']:.2f} sys  server CPU {server}")
PY
}

# wrk's own CPU from GNU time (user, sys).
scale_wrk() { # N W URL OUT_PREFIX SERVER_PID [SECONDS]
  local before after
  before=$(proc_cpu "$5")
  /usr/bin/time -f '%U %S' -o "$4.time" wrk -t 2 -c "$2" -d "${6:-4}s" "$3" > "$4.txt" 2>&1 || true
  after=$(proc_cpu "$5")
  python3 - "$4.txt" "$1" "$2" "$before" "$after" "$4.time" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"Requests/sec:\s+([0-9.]+)", text)
reqs = re.search(r"([0-9]+) requests in ([0-9.]+)s", text)
n, w = int(sys.argv[2]), int(sys.argv[3])
(bu, bs), (au, as_) = (map(float, a.split()) for a in sys.argv[4:6])
wu, ws = open(sys.argv[6]).read().split()[-2:]
if m and reqs:
    rate = float(m.group(1))
    count = int(reqs.group(1))
    server = (au - bu) + (as_ - bs)
    print(f"{'wrk:'+str(w):14} {rate:9.0f} req/s over {reqs.group(2)} s ({count} requests), so {n} take at least {n/rate:.2f} s"
          f"  wrk CPU {wu} user {ws} sys  server CPU {au - bu:.2f} user {as_ - bs:.2f} sys ({server/count*1e6:.1f} us a request)")
else:
    print("wrk: no result:", text.strip()[-200:])
PY
}

crawl_row() { # SERVER_PID JSON LABEL URL N C MODEL [FLAG...]
  local pid=$1 json=$2 label=$3 url=$4 n=$5 c=$6 model=$7 before after; shift 7
  before=$(proc_cpu "$pid")
  ${client_cpus:+taskset -c "$client_cpus"} \
    $bin crawl "$url" -n "$n" -c "$c" --model "$model" -q --json "$json" "$@" > /dev/null
  after=$(proc_cpu "$pid")
  python3 - "$json" "$label" "$before" "$after" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l][0]
(bu, bs), (au, as_) = (map(float, a.split()) for a in sys.argv[3:5])
print(sys.argv[2], r["wall_s"], round(r["user_s"] + r["sys_s"], 3),
      round((au + as_) - (bu + bs), 3), r["max_rss_kib"],
      r.get("connections_opened", "-"), r.get("http_version", "-"), r["tasks_ok"])
PY
}

http2_concur() { # SERVER_PID JSON MODEL CONNECTIONS N BASE
  crawl_row "$1" "$2" "$3:100-h2-conn$4" "$6&name={rand}" "$5" 100 "$3" --http2 --connections "$4" \
    | awk -v n="$5" '{ print $1, n / $2, 1e6 * $3 / n }'
}

# The medians of a multiplexing benchmark (lines "LABEL REQ/S CPU_US", labels ending in
# "-connC" for concur's clients, "REF-cC-mM" for the reference) as a table: each client's rate
# and client CPU a request against the reference's on the same number of connections.
ratio_table() { # REF (the reference's label prefix: h2load, oha) < medians
  python3 -c '
import sys
ref_name = sys.argv[1]
rows = [l.split() for l in sys.stdin]
ref = {}
for label, rps, cpu in rows:
    if label.startswith(ref_name + "-c"):
        ref[label.split("-")[1]] = (float(rps), float(cpu))
print(f"| client | connections | req/s (median) | vs {ref_name} | client CPU a request (median) | vs {ref_name} |")
print("|---|---:|---:|---:|---:|---:|")
for label, rps, cpu in rows:
    conns = label.split("-")[1] if label.startswith(ref_name + "-c") else "c" + label.rsplit("conn", 1)[1]
    r_rps, r_cpu = ref[conns]
    cpu_ratio = f"{float(cpu) / r_cpu:.2f}x" if r_cpu > 0 else "-"
    print(f"| {label} | {conns[1:]} | {float(rps):,.0f} | {float(rps) / r_rps:.2f}x | {float(cpu):.2f} us | {cpu_ratio} |")
' "$1"
}

# "concur-MODEL:100-h3-connC req/s cpu_us_per_request" for N GETs over HTTP/3.
http3_concur() { # SERVER_PID JSON MODEL CONNECTIONS N BASE CACERT
  crawl_row "$1" "$2" "$3:100-h3-conn$4" "$6&name={rand}" "$5" 100 "$3" --http3 --connections "$4" \
    --cacert "$7" | awk -v n="$5" '{ print $1, n / $2, 1e6 * $3 / n }'
}

# "oha-cC-mM req/s cpu_us_per_request": oha over HTTP/3, its CPU (user + sys) from time(1).
http3_oha() { # OHA C M N BASE
  local json cpu
  json=$(mktemp) cpu=$(mktemp)
  /usr/bin/time -f "%U %S" -o "$cpu" ${client_cpus:+taskset -c "$client_cpus"} \
    "$1" --http-version 3 --insecure -n "$4" -c "$2" -p "$3" --no-tui --output-format json "$5" > "$json"
  python3 - "$json" "$cpu" "oha-c$2-m$3" "$4" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
ok = json.load(open(sys.argv[1])).get("statusCodeDistribution", {}).get("200", 0)
if ok != int(sys.argv[4]):
    sys.exit(f"oha: {ok} of {sys.argv[4]} requests answered 200")
print(sys.argv[3], s["summary"]["requestsPerSec"], 1e6 * (user + sys_) / int(sys.argv[4]))
PY
  rm -f "$json" "$cpu"
}

# h2load's CPU (user + sys) from time(1), written after its own output.
http2_h2load() { # C M N BASE
  /usr/bin/time -f "cpu %U %S" ${client_cpus:+taskset -c "$client_cpus"} \
    h2load -n "$3" -c "$1" -m "$2" "$4" 2>&1 \
    | awk -v l="h2load-c$1-m$2" -v n="$3" '/^finished in/ { gsub(/,/, ""); rps = $4 }
        /^cpu / { print l, rps, 1e6 * ($2 + $3) / n }'
}
