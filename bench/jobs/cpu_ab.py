#!/usr/bin/env python3
"""What a job costs `concur jobs work` on Redis, two binaries alternated: N no-op jobs enqueued
on a fresh redis-server, drained by `concur jobs work -c C --until-empty` under `perf stat`
(task-clock and context switches of the worker's whole process tree: the supervisor and its
child since issue 42, the one process before), and redis-server's CPU over the same drain (from
/proc); per job, medians of ROUNDS rounds, each running OLD then NEW. ab.py's rate is measured
over well under a second and swings with whatever else the two cores do; the CPU time a job
costs swings less (these VMs count no instructions: `perf stat` says "not supported"). The drain's end
(`--until-empty` notices it within a second) and start-up are in the totals: small beside
N = 200,000 jobs.
Usage: bench/jobs/cpu_ab.py OLD_BIN NEW_BIN [N] [ROUNDS] [C]   (defaults 200000, 5, 10)."""

import os
import statistics
import subprocess
import sys
import tempfile

import common


def proc_cpu_s(pid):
    """A process's user + system CPU so far, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(binary, n, c, tmp):
    """One drain: worker CPU µs and context switches per job, redis CPU µs per job."""
    r = common.Redis()
    try:
        subprocess.run([binary, "jobs", "enqueue", "--noop", "-n", str(n), "--jobs-backend", r.url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = os.path.join(tmp, "perf.csv")
        before = proc_cpu_s(r.proc.pid)
        subprocess.run(["perf", "stat", "-x", ",", "-o", out, "-e", "task-clock,context-switches",
                        binary, "jobs", "work", "-c", str(c), "--until-empty",
                        "--jobs-backend", r.url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        redis_s = proc_cpu_s(r.proc.pid) - before
        processed = int(r.cmd("GET", "stat:processed") or 0)
        if processed != n:
            sys.exit(f"{binary}: {processed} of {n} jobs processed")
    finally:
        r.stop()
    counts = {}
    for line in open(out):
        parts = line.strip().split(",")
        if len(parts) > 2 and parts[0] and parts[0][0].isdigit():
            counts[parts[2].split(":")[0]] = float(parts[0])
    return (counts["task-clock"] * 1000 / n, counts["context-switches"] / n, redis_s * 1e6 / n)


def main():
    old, new = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    c = int(sys.argv[5]) if len(sys.argv) > 5 else 10
    common.ensure_packages(("redis-server", "redis-server"), ("perf", "linux-perf"))
    tmp = tempfile.mkdtemp(prefix="concur-jobs-cpu-")
    print(f"load average at the start: {os.getloadavg()[0]:.2f}", flush=True)
    got = {"old": [], "new": []}
    for k in range(rounds):
        for label, binary in (("old", old), ("new", new)):
            cpu_us, instr, redis_us = one(binary, n, c, tmp)
            got[label].append((cpu_us, instr, redis_us))
            print(f"round {k + 1}: {label}: worker {cpu_us:.2f} µs CPU and {instr:.3f} "
                  f"context switches a job, redis-server {redis_us:.2f} µs a job", flush=True)
    print(f"medians of {rounds} alternated round(s), {n} no-op jobs, jobs work -c {c}, per job:")
    for i, what in enumerate(("worker CPU µs", "worker switches", "redis-server CPU µs")):
        o = statistics.median(r[i] for r in got["old"])
        w = statistics.median(r[i] for r in got["new"])
        spread = lambda label: f"{min(r[i] for r in got[label]):.3f}-{max(r[i] for r in got[label]):.3f}"
        print(f"  {what:22} old {o:8.3f}  new {w:8.3f}  new/old {w / o:.3f}   "
              f"(old {spread('old')}; new {spread('new')})")


if __name__ == "__main__":
    main()
