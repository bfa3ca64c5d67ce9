#!/usr/bin/env bash
# Every headline ratio of docs/benchmarks.md in one run, each beside its reference measured in
# the same run and the target of issue 18, for re-measuring after any change that can move
# them. Every comparison alternates concur and its reference within each of ROUNDS rounds
# (default 5, at least 5 but with --quick); medians are reported, and beside each ratio its
# spread: the lowest and highest of the rounds' own ratios (concur's figure of a round over
# its reference's in that round), so that a swing between two runs of the script shows as the
# machine's noise or as a real change. A target is "met" when every round meets it, "no" when
# none does, and "noise (K of N)" when the rounds disagree. The parts, each printing the load average at its start:
#   throughput  delay 0, 100 connections: async:100, async-local:100, curl:100 against wrk (and
#               oha if installed), as bench/throughput.sh; the server's CPU per request under
#               async:100
#   rate        open model at 1,000, 4,000 and 16,000 req/s, delay 0: client CPU per request of
#               async:100 and curl:100 against wrk2, as bench/rate.sh; each also with
#               `--grain 1ms`, the release timer of wrk2's own grain
#   scale       100,000 requests of 100 ms at 10,000 in flight: async, async-local, green, curl
#               against wrk's floor at 10,000 connections (N / its req/s), as bench/scale.sh;
#               the server's CPU per request under async there, against the throughput part's
#   jobs        no-op jobs/s: `concur jobs work -c 25` on Redis against `sidekiq -c 25`, the
#               embedded SQLite queue with 1 and 4 processes, as bench/jobs/throughput.py
#   overhead    bench/overhead.sh's models (N empty tasks, median wall / N) against the figures
#               in docs/benchmarks.md §3
#   crawl       1,000 GETs of a 100 ms delay at C = 100 under async:100 (§4: ≤ 1.03 s)
#   curlfloor   delay 0, 100 at once: curl:100 against libcurl's own floor (examples/curl_floor.rs,
#               the same libcurl and request with nothing around it), as bench/curl-floor.sh
#   tls         the same crawl over https (`concur serve --tls-self-signed`, --cacert) and over
#               plain http, alternated: async:100's wall over TLS against plain (#32: ≤ 1.05×)
#   http2       HTTP/2 at delay 0, 100 streams over 1 and 10 connections: async, async-local and
#               curl against h2load -c 1 -m 100 and -c 10 -m 10, as bench/http2.sh
# The output ends with one table: headline, concur median, reference median, ratio, the rounds'
# spread, target, met. A missing peer (wrk2, oha, h2load, sidekiq) is reported as not installed and its ratios
# left out; concur's side is still measured.
#
# Usage: bench/headlines.sh [--quick] [--parts LIST] [ROUNDS] [OUT_DIR]
#   --quick       small N and 1 round, to check that the script works (about a minute after
#                 the build; its figures are not comparable with the documented ones)
#   --parts LIST  a comma-separated subset of: throughput,rate,scale,jobs,crawl,curlfloor,tls,
#                 http2,overhead
#   OUT_DIR       default /tmp/concur-headlines (every run's JSON Lines and the samples)
# A full run (5 rounds, every part) takes about 18 minutes on the project's 2-core VM, 23 with
# wrk2 (its 10 s of calibration per rate and round), a few more when the machine is loaded.
# Peers: wrk (apt-get install wrk) and redis-server are needed; wrk2 is WRK2=path or wrk2 on
# PATH (built from giltene/wrk2, see bench/rate.sh); oha on PATH or /tmp/oha/bin/oha (see
# bench/throughput.sh); h2load from nghttp2-client; sidekiq from ruby-sidekiq.
set -euo pipefail
cd "$(dirname "$0")/.."
all_parts=throughput,rate,scale,jobs,crawl,curlfloor,tls,http2,overhead
parts=$all_parts
quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; shift ;;
    --parts) parts=$2; shift 2 ;;
    --parts=*) parts=${1#--parts=}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
for p in ${parts//,/ }; do
  case ",$all_parts," in *",$p,"*) ;; *) echo "unknown part $p (parts: $all_parts)" >&2; exit 2 ;; esac
done
if [ $quick = 1 ]; then rounds=${1:-1}; else rounds=${1:-5}; fi
out=${2:-/tmp/concur-headlines}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number, not '$rounds' (usage: see --help)" >&2; exit 2; }
if [ $quick = 0 ] && [ "$rounds" -lt 5 ]; then
  echo "ROUNDS must be at least 5, not $rounds: fewer rounds cannot tell this machine's noise from a change (--quick takes 1 to check the script)" >&2
  exit 2
fi
mkdir -p "$out"
source bench/lib.sh

# The sizes: a full run's, or --quick's.
if [ $quick = 1 ]; then
  tp_n=20000 tp_secs=1 rate_secs=2 scale_n=20000 scale_w=10000 scale_secs=2 jobs_n=10000
  overhead_div=10 h2_n=20000
else
  tp_n=150000 tp_secs=5 rate_secs=10 scale_n=100000 scale_w=10000 scale_secs=4 jobs_n=100000
  overhead_div=1 h2_n=150000
fi
rates=(1000 4000 16000)

raise_open_files
build
# A copy of the binary: the build directory may be shared, and another build would replace it
# in the middle of the run.
cp "$bin" "$out/concur"
bin=$out/concur
export CONCUR=$bin # bench/jobs/*.py
: > "$out/samples.txt"
: > "$out/missing.txt"
: > "$out/parts.txt"
t_start=$SECONDS
echo "bench/headlines.sh: $rounds round(s)$([ $quick = 1 ] && echo ', --quick sizes'), parts $parts"
echo "machine: $(nproc) cores, $(uname -r), open files $(ulimit -n); concur $($bin --version); results in $out"

want() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
record() { echo "$1 $2" >> "$out/samples.txt"; }
missing() { # TOOL WHY
  echo "$1: not installed ($2); its ratios are left out"
  echo "$1 $2" >> "$out/missing.txt"
}
part() { # NAME TITLE
  part_name=$1
  part_t0=$SECONDS
  part_load=$(cut -d' ' -f1 /proc/loadavg)
  echo
  echo "== $1: $2"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}
part_done() {
  echo "($part_name: $((SECONDS - part_t0)) s)"
  echo "$part_name $part_load $((SECONDS - part_t0))" >> "$out/parts.txt"
}
stop_server() { # PID: stops one server of start_server's before the script's end
  kill "$1" 2> /dev/null || true
  wait "$1" 2> /dev/null || true
  local p keep=()
  for p in "${bench_pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  bench_pids=("${keep[@]}")
}
# CPU µs per request between two `proc_cpu` readings: BEFORE AFTER REQUESTS
cpu_us() { awk -v b="$1" -v a="$2" -v n="$3" 'BEGIN { split(b, x, " "); split(a, y, " ");
  printf "%.2f", (y[1] + y[2] - x[1] - x[2]) / n * 1e6 }'; }
json_field() { # JSONL FIELD: the field of its run record
  python3 -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"run\"" in l][0][sys.argv[2]])' "$1" "$2"
}

have_wrk=1
command -v wrk > /dev/null || { have_wrk=0; missing wrk "apt-get install wrk"; }

if want throughput; then
  part throughput "delay 0, 100 connections, $tp_n requests per concur client, wrk -d ${tp_secs}s ($rounds round(s))"
  oha="$(command -v oha || echo /tmp/oha/bin/oha)"
  [ -x "$oha" ] || { oha=; missing oha "cargo install oha --root /tmp/oha, as bench/throughput.sh"; }
  start_server srv
  base="$srv_url/add?delay=0&name="
  for r in $(seq "$rounds"); do
    for m in async async-local curl; do
      before=$(proc_cpu "$srv_pid")
      line=$(throughput_concur $m $tp_n "$base" "$out/throughput-$m-$r.jsonl")
      after=$(proc_cpu "$srv_pid")
      record "tp/${line% *}" "${line##* }"
      if [ $m = async ]; then
        record srv/100 "$(cpu_us "$before" "$after" $tp_n)"
        line="$line req/s, server CPU $(cpu_us "$before" "$after" $tp_n) µs a request"
      fi
      echo "  round $r: $line"
    done
    if [ $have_wrk = 1 ]; then
      line=$(throughput_wrk $tp_secs "$base")
      record "tp/${line% *}" "${line##* }"
      echo "  round $r: $line"
    fi
    if [ -n "$oha" ]; then
      line=$(throughput_oha "$oha" $tp_n "$base" "$out/oha-$r.json")
      record "tp/${line% *}" "${line##* }"
      echo "  round $r: $line"
    fi
  done
  stop_server "$srv_pid"
  part_done
fi

if want rate; then
  part rate "open model, delay 0, 100 connections, ${rates[*]} req/s for ${rate_secs}s each ($rounds round(s))"
  wrk2="${WRK2:-$(command -v wrk2 || true)}"
  [ -n "$wrk2" ] && [ -x "$wrk2" ] || {
    wrk2=
    missing wrk2 "WRK2=/path/to/wrk or wrk2 on PATH, built from a checkout of giltene/wrk2 with make, as bench/rate.sh"
  }
  start_server srv
  base="$srv_url/add?delay=0&name="
  for r in $(seq "$rounds"); do
    for rate in "${rates[@]}"; do
      for m in async curl; do
        for grain in "" 1ms; do
          line=$(rate_concur $m "$rate" $rate_secs "$base" "$out/rate-$m$grain-$rate-$r.jsonl" $grain)
          read -r label _ ach p50 p99 cpu failed <<< "$line"
          record "rate/$label/$rate" "$cpu"
          record "rate-achieved/$label/$rate" "$ach"
          echo "  round $r: $label at $rate/s: achieved $ach/s, p50 $p50 µs, p99 $p99 µs, client CPU $cpu µs a request, $failed failed"
        done
      done
      if [ -n "$wrk2" ]; then
        line=$(rate_wrk2 "$wrk2" "$rate" $rate_secs "$base" "$out/wrk2-$rate-$r")
        read -r label _ ach p50 p99 cpu errors <<< "$line"
        record "rate/wrk2/$rate" "$cpu"
        echo "  round $r: wrk2 at $rate/s: achieved $ach/s, p50 $p50 µs, p99 $p99 µs, client CPU $cpu µs a request, $errors errors"
      fi
    done
  done
  stop_server "$srv_pid"
  part_done
fi

if want scale; then
  part scale "$scale_n requests of 100 ms at $scale_w in flight; wrk -c $scale_w -d ${scale_secs}s for the floor ($rounds round(s))"
  start_server srv
  for r in $(seq "$rounds"); do
    for m in async async-local green curl; do
      json="$out/scale-$m-$r.jsonl"
      line=$(scale_client $m $scale_n $scale_w "$srv_url/add?name={rand}&delay=100" "$json" "$srv_pid")
      echo "  round $r: $line"
      record "scale/$m" "$(json_field "$json" wall_s)"
      record "scale-failed/$m" "$(json_field "$json" tasks_failed)"
      if [ $m = async ]; then
        # "... server CPU U user S sys"
        cpu=$(sed -E 's/.*server CPU ([0-9.]+) user ([0-9.]+) sys.*/\1 \2/' <<< "$line")
        record srv/$scale_w "$(cpu_us "0 0" "$cpu" "$(json_field "$json" tasks_ok)")"
      fi
    done
    if [ $have_wrk = 1 ]; then
      line=$(scale_wrk $scale_n $scale_w "$srv_url/add?name=wrk&delay=100" "$out/scale-wrk-$r" "$srv_pid" $scale_secs)
      echo "  round $r: $line"
      # "wrk:W  RATE req/s over ...": the least time N take is N / RATE.
      case $line in
        "wrk: no result"*) ;;
        *) record scale/wrk "$(awk -v n=$scale_n '{ printf "%.4f", n / $2 }' <<< "$line")" ;;
      esac
    fi
  done
  stop_server "$srv_pid"
  part_done
fi

if want jobs; then
  part jobs "no-op jobs, $jobs_n per drain: Redis -c 25 (concur, Sidekiq), SQLite 1 and 4 processes ($rounds round(s))"
  if ! command -v redis-server > /dev/null; then
    missing redis-server "apt-get install redis-server: the Redis rows are left out"
  fi
  command -v sidekiq > /dev/null || missing sidekiq "apt-get install ruby-sidekiq (Debian's Sidekiq 6.4.1), as bench/jobs/throughput.py"
  python3 - "$jobs_n" "$rounds" "$out/samples.txt" <<'PY'
import os, shutil, sys, tempfile
sys.path.insert(0, "bench/jobs")
from common import Redis
import throughput as t

n, rounds, samples = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
tmp = tempfile.mkdtemp(prefix="concur-headlines-jobs-")
noop = t.noop_rb(tmp)
sidekiq = shutil.which("sidekiq")
redis = Redis() if shutil.which("redis-server") else None

def record(key, rate):
    with open(samples, "a") as f:
        f.write(f"jobs/{key} {rate:.1f}\n")

try:
    for k in range(1, rounds + 1):
        print(f"  round {k}:", flush=True)
        if redis:
            record("redis-concur-c25", t.redis_concur(redis, n, 25))
            if sidekiq:
                record("redis-sidekiq-c25", t.redis_sidekiq(redis, n, 25, noop))
        for procs in (1, 4):
            record(f"sqlite-{procs}", t.sqlite_concur(os.path.join(tmp, f"q{procs}-{k}.sqlite"), n, procs))
finally:
    if redis:
        redis.stop()
    shutil.rmtree(tmp, ignore_errors=True)
PY
  part_done
fi

if want crawl; then
  part crawl "1,000 GETs of a 100 ms delay at C = 100, async:100, 1 warm-up ($rounds round(s))"
  start_server srv
  url="$srv_url/add?name={rand}&delay=100"
  scale_client async 1000 100 "$url" "$out/crawl-warmup.jsonl" "$srv_pid" > /dev/null
  for r in $(seq "$rounds"); do
    json="$out/crawl-$r.jsonl"
    echo "  round $r: $(scale_client async 1000 100 "$url" "$json" "$srv_pid")"
    record crawl/async:100 "$(json_field "$json" wall_s)"
  done
  stop_server "$srv_pid"
  part_done
fi

if want curlfloor; then
  part curlfloor "delay 0, 100 at once, $tp_n requests: curl:100 against libcurl's own floor, alternated ($rounds round(s))"
  cargo build --release -q --example curl_floor
  floor=${CARGO_TARGET_DIR:-$PWD/target}/release/examples/curl_floor
  start_server srv
  for r in $(seq "$rounds"); do
    read -r rps _ < <("$floor" "$srv_url/add?delay=0&name=" "$tp_n" 100)
    echo "  round $r: floor $rps req/s"
    record curlfloor/floor "$rps"
    line=$(throughput_concur curl $tp_n "$srv_url/add?delay=0&name=" "$out/curlfloor-$r.jsonl")
    echo "  round $r: $line"
    record curlfloor/curl:100 "$(awk '{ print $2 }' <<< "$line")"
  done
  stop_server "$srv_pid"
  part_done
fi

if want tls; then
  part tls "the crawl over https and over plain http, async:100, alternated, 1 warm-up each ($rounds round(s))"
  start_server tls --tls-self-signed
  start_server plain
  for r in 0 $(seq "$rounds"); do
    for scheme in https http; do
      json="$out/tls-$scheme-$r.jsonl"
      if [ $scheme = https ]; then
        $bin crawl "$tls_url/add?name={rand}&delay=100" -n 1000 -c 100 --model async -q -i --json "$json" --cacert "$tls_ca" > /dev/null
      else
        $bin crawl "$plain_url/add?name={rand}&delay=100" -n 1000 -c 100 --model async -q -i --json "$json" > /dev/null
      fi
      [ "$r" = 0 ] && continue
      wall=$(json_field "$json" wall_s)
      echo "  round $r: $scheme wall $wall s, failed $(json_field "$json" tasks_failed)"
      record "tls/$scheme" "$wall"
    done
  done
  stop_server "$tls_pid"
  stop_server "$plain_pid"
  part_done
fi

if want http2; then
  part http2 "HTTP/2 (h2c), delay 0, 100 streams over 1 and 10 connections, $h2_n requests each ($rounds round(s))"
  have_h2load=1
  command -v h2load > /dev/null || { have_h2load=0; missing h2load "apt-get install nghttp2-client, as bench/http2.sh"; }
  start_server srv
  base="$srv_url/add?delay=0"
  for r in $(seq "$rounds"); do
    for c in 1 10; do
      if [ $have_h2load = 1 ]; then
        line=$(http2_h2load $c $((100 / c)) $h2_n "$base") || line=
        [ -n "$line" ] && record "h2/${line%% *}" "$(awk '{ print $2 }' <<< "$line")"
        echo "  round $r: ${line:-h2load-c$c: no result} (label, req/s, client CPU µs a request)"
      fi
      for model in async async-local curl; do
        line=$(http2_concur "$srv_pid" "$out/http2-run.jsonl" $model $c $h2_n "$base")
        record "h2/${line%% *}" "$(awk '{ print $2 }' <<< "$line")"
        echo "  round $r: $line"
      done
    done
  done
  stop_server "$srv_pid"
  part_done
fi

# Last: its thousands of short-lived threads and processes stay in the 1-minute load average
# for minutes, which would read as load at the start of any part after it.
if want overhead; then
  part overhead "bench/overhead.sh's models, 5 runs + 1 warm-up each$([ $overhead_div = 1 ] || echo ", N / $overhead_div") ($rounds round(s))"
  for r in $(seq "$rounds"); do
    for c in "${overhead_cases[@]}"; do
      read -r m n <<< "$c"
      n=$((n / overhead_div))
      line=$(overhead_case "$m" "$n" "$out/overhead-${m//:/-}-$r.jsonl")
      echo "  round $r: $line"
      record "overhead/$m" "$(awk '{ print $5 }' <<< "$line")"
    done
  done
  part_done
fi

echo
echo "all parts: $((SECONDS - t_start)) s"
python3 - "$out" "$quick" "$rounds" "$scale_n" "$scale_w" "${rates[*]}" <<'PY'
import collections, statistics, sys

out, quick, rounds, scale_n, scale_w, rates = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), [int(x) for x in sys.argv[6].split()]
samples = collections.defaultdict(list)
for line in open(f"{out}/samples.txt"):
    k, v = line.split()
    samples[k].append(float(v))
missing = {l.split()[0] for l in open(f"{out}/missing.txt") if l.strip()}
loads = {l.split()[0]: l.split()[1] for l in open(f"{out}/parts.txt")}
med = lambda k: statistics.median(samples[k]) if samples.get(k) else None

def fmt(v, unit):
    if v is None:
        return "–"
    if unit == "req/s" or unit == "jobs/s":
        return f"{v:,.0f} {unit}"
    if unit == "s":
        return f"{v:.3f} s"
    if unit == "µs":
        return f"{v:.3g} µs" if v < 100 else f"{v:,.0f} µs"
    return f"{v:g} {unit}"

rows = []
def row(title, key, unit, ref=None, ref_label=None, peer=None, target=None, ok=None, ratio_of=None):
    """ref: a sample key, or a number (a documented or ideal figure); ok(ratio or value) -> bool."""
    c = med(key)
    if c is None:
        return
    if peer in missing:
        rows.append((title, fmt(c, unit), f"{peer}: not installed", "–", "–", target, "–"))
        return
    r = med(ref) if isinstance(ref, str) else ref
    ratio = c / r if r else None
    ref_text = "–" if r is None else fmt(r, unit) + (f" ({ref_label})" if ref_label else "")
    # The rounds' own ratios: concur's figure of each round over its reference's in the same
    # round (the samples are recorded round by round), or over a fixed reference.
    ours = samples[key]
    if isinstance(ref, str):
        theirs = samples.get(ref, [])
        per_round = [a / b for a, b in zip(ours, theirs) if b] if len(theirs) == len(ours) else []
    else:
        per_round = [a / ref for a in ours] if ref else []
    spread = f"{min(per_round):.2f}–{max(per_round):.2f}×" if len(per_round) > 1 else "–"
    v = ratio if ratio_of == "ratio" else c
    if ok is None or v is None:
        met = "–"
    else:
        each = per_round if ratio_of == "ratio" and per_round else ours
        good = sum(1 for x in each if ok(x))
        met = "yes" if good == len(each) else "no" if good == 0 else f"noise ({good} of {len(each)})"
    rows.append((title, fmt(c, unit), ref_text, f"{ratio:.2f}×" if ratio else "–", spread, target, met))

# Throughput at delay 0, 100 connections.
for m in ("curl", "async", "async-local"):
    target, ok = ("≥ 1.20× wrk (#18)", lambda x: x >= 1.2) if m == "curl" else ("– (none)", None)
    row(f"delay 0, C = 100: `{m}:100` req/s vs wrk", f"tp/concur-{m}:100", "req/s", "tp/wrk",
        peer="wrk", target=target, ok=ok, ratio_of="ratio")
best = max((f"tp/concur-{m}:100" for m in ("async", "async-local", "curl") if med(f"tp/concur-{m}:100")),
           key=med, default=None)
if best:
    samples["tp/best"] = samples[best]
    for peer in ("wrk", "oha"):
        row(f"delay 0, C = 100: best concur client (`{best[10:]}`) vs {peer}", "tp/best", "req/s",
            f"tp/{peer}", peer=peer, target=f"≥ 1.00× (§4 goal, not #18)", ok=lambda x: x >= 1.0,
            ratio_of="ratio")
# The open model: client CPU per request against wrk2.
for rate in rates:
    for m in ("async", "curl"):
        for grain, shown in (("", ""), ("+grain1ms", " --grain 1ms")):
            key = f"rate/concur-{m}:100{grain}/{rate}"
            ach = med(f"rate-achieved/concur-{m}:100{grain}/{rate}")
            note = f" (achieved {ach:,.0f}/s)" if ach is not None and ach < 0.99 * rate else ""
            row(f"open model {rate:,}/s: `{m}:100{shown}` client CPU/request vs wrk2{note}", key, "µs",
                f"rate/wrk2/{rate}", peer="wrk2", target="≤ 1.00× wrk2 (#18)", ok=lambda x: x <= 1.0,
                ratio_of="ratio")
# Ten thousand connections.
for m, bound in (("async", 1.15), ("async-local", 1.15), ("green", 1.15), ("curl", 2.0)):
    failed = sum(samples.get(f"scale-failed/{m}", []))
    note = f" ({failed:.0f} failed)" if failed else ""
    row(f"{scale_n:,} × 100 ms at W = {scale_w:,}: `{m}` wall vs wrk's floor{note}", f"scale/{m}", "s",
        "scale/wrk", peer="wrk", target=f"≤ {bound:.2f}× (#18)", ok=lambda x, b=bound: x <= b and not failed,
        ratio_of="ratio")
row(f"`concur serve` CPU/request: {scale_w:,} connections (delay 100 ms) vs 100 (delay 0), under `async`",
    f"srv/{scale_w}", "µs", "srv/100", ref_label="at 100", target="≤ 1.30× (#18)", ok=lambda x: x <= 1.3,
    ratio_of="ratio")
# Jobs.
row("no-op jobs/s, Redis, `-c 25`: concur vs Sidekiq 6.4.1", "jobs/redis-concur-c25", "jobs/s",
    "jobs/redis-sidekiq-c25", peer="sidekiq", target="≥ 6.00× (#18)", ok=lambda x: x >= 6.0, ratio_of="ratio")
row("no-op jobs/s, Redis, `concur jobs work -c 25`", "jobs/redis-concur-c25", "jobs/s",
    target="≥ 45,000/s (#18)", ok=lambda x: x >= 45000)
for procs in (1, 4):
    row(f"no-op jobs/s, SQLite, {procs} × `concur jobs work -c 4`", f"jobs/sqlite-{procs}", "jobs/s",
        target="≥ 20,000/s (#18)", ok=lambda x: x >= 20000)
# Per-task overhead against docs/benchmarks.md §3's latest figures (2026-12-02's where it has
# them, else 2026-12-01's: another VM). "Within noise" (#18) is read as at most 1.25× of them.
doc = {"seq": 0.102, "pool:2": 0.187, "rayon:2": 0.07, "async:2": 0.267, "async-local:2": 0.16,
       "thread": 63.3, "fork": 199, "spawn": 1028, "actor:2": 0.302, "jobs-memory:2": 3.0,
       "jobs:2": 156}
for m, d in doc.items():
    row(f"overhead per task, `{m}` (bench/overhead.sh)", f"overhead/{m}", "µs", d, ref_label="docs §3",
        target="≤ 1.25× docs (#18: within noise)", ok=lambda x: x <= 1.25, ratio_of="ratio")
row("crawl 1,000 × 100 ms at C = 100, `async:100` wall", "crawl/async:100", "s", 1.0, ref_label="ideal",
    target="≤ 1.03 s (#18, §4)", ok=lambda x: x <= 1.03)
row("delay 0, 100 at once: `curl:100` req/s vs libcurl's floor (examples/curl_floor.rs)", "curlfloor/curl:100",
    "req/s", "curlfloor/floor", target="≥ 0.91× (#32: within 1.1×)", ok=lambda x: x >= 1 / 1.1, ratio_of="ratio")
row("TLS crawl 1,000 × 100 ms at C = 100, `async:100` wall vs the same crawl over plain http",
    "tls/https", "s", "tls/http", ref_label="plain", target="≤ 1.05× (#32)", ok=lambda x: x <= 1.05,
    ratio_of="ratio")
# HTTP/2 against h2load.
for c in (1, 10):
    for m in ("async", "async-local", "curl"):
        row(f"HTTP/2, delay 0, 100 streams on {c} connection{'s' if c > 1 else ''}: `{m}:100` req/s vs h2load -c {c} -m {100 // c}",
            f"h2/{m}:100-h2-conn{c}", "req/s", f"h2/h2load-c{c}-m{100 // c}", peer="h2load",
            target="≥ 0.90× (§13 goal, not #18)", ok=lambda x: x >= 0.9, ratio_of="ratio")

print()
if missing:
    print("left out, not installed: " + ", ".join(sorted(missing)))
print("load average at each part's start: " + ", ".join(f"{p} {l}" for p, l in loads.items()))
print(f"medians of {rounds} round(s)" + (" with --quick's sizes: NOT comparable with docs/benchmarks.md" if quick else ""))
print()
print("| headline | concur (median) | reference (median) | ratio | rounds' ratios | target | met |")
print("|---|---:|---:|---:|---:|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
