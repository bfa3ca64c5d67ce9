#!/usr/bin/env python3
"""Job-queue throughput: N no-op jobs drained from one Redis by `concur jobs work` and by
Sidekiq 6.4.1 (`sidekiq -c 10` and `-c 25`) in the same run, and from the embedded SQLite
queue by 1 and 4 `concur jobs work` processes; idle memory of each worker process.

Method, the same for every consumer: enqueue N no-op jobs (class Concur::Noop, enqueued by
`concur jobs enqueue --noop`, the same JSON for both), start the consumer, poll the processed
counter every 20 ms (Sidekiq on Redis: N minus the queue's length, since Sidekiq updates its
counter only every 5 s; at most -c jobs are then still in flight), and take the rate between the first poll that saw a job processed and
the poll that saw all N (start-up is excluded for both). Redis runs without persistence.
Usage: bench/jobs/throughput.py [N] [ROUNDS]   (defaults 100000, 1; medians over the rounds). Installs redis-server and ruby-sidekiq
with apt-get when missing (run as root)."""

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from common import CONCUR, Redis, concur, ensure_packages, rss_kib, wait_for

quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def noop_rb(tmp):
    """Sidekiq's side of Concur::Noop: a file for `sidekiq -r`."""
    path = os.path.join(tmp, "noop.rb")
    with open(path, "w") as f:
        f.write("require 'sidekiq'\nmodule Concur\n  class Noop\n    include Sidekiq::Worker\n"
                "    def perform; end\n  end\nend\n")
    return path


def drain(n, start, processed, label):
    """Starts the consumers, measures the drain rate, reports idle memory, stops them."""
    procs = start()
    t0 = p0 = None
    while True:
        p = processed()
        now = time.monotonic()
        if t0 is None and p > 0:
            t0, p0 = now, p
        if p >= n:
            t1 = now
            break
        if any(pr.poll() is not None for pr in procs):
            sys.exit(f"{label}: a consumer exited early")
        time.sleep(0.02)
    time.sleep(1.0)  # idle now
    rss = [rss_kib(pr.pid) for pr in procs]
    for pr in procs:
        pr.terminate()
    for pr in procs:
        pr.wait()
    rate = (n - p0) / (t1 - t0)
    print(f"{label:34} {rate:9.0f} jobs/s   ({n - p0} jobs in {t1 - t0:.2f} s; "
          f"idle RSS {', '.join(f'{r / 1024:.1f} MiB' for r in rss)})", flush=True)
    return rate


# concur's workers are measured by their acknowledgements (`stat:processed`: a claimed
# batch counts only once it ran). Sidekiq flushes that counter only with its heartbeat
# (every 5 s), so it is measured by the queue's length: jobs taken off it (at most -c in
# flight), which favours it slightly.
def redis_run(r, n, label, start, processed):
    """N no-op jobs enqueued on the Redis r (emptied first), drained by start(): jobs/s."""
    r.cmd("FLUSHALL")
    concur("jobs", "enqueue", "--noop", "-n", str(n), "--jobs-backend", r.url, **quiet)
    return drain(n, start, processed, label)


def redis_concur(r, n, c):
    return redis_run(r, n, f"redis: concur jobs work -c {c}", lambda: [subprocess.Popen(
        [CONCUR, "jobs", "work", "-c", str(c), "--jobs-backend", r.url], **quiet)],
        lambda: int(r.cmd("GET", "stat:processed") or 0))


def redis_sidekiq(r, n, c, noop):
    env = dict(os.environ, REDIS_URL=r.url, RUBYOPT="-W0")
    return redis_run(r, n, f"redis: sidekiq 6.4.1 -c {c}", lambda: [subprocess.Popen(
        ["sidekiq", "-r", noop, "-c", str(c)], env=env, **quiet)],
        lambda: n - int(r.cmd("LLEN", "queue:default") or 0))


def sqlite_concur(db, n, procs, sync="normal"):
    """N no-op jobs enqueued in a new SQLite file db, drained by PROCS `concur jobs work -c 4`;
    SYNC is the queue's synchronous setting (normal, the default, or full)."""
    url = f"sqlite:{db}" + ("?synchronous=full" if sync == "full" else "")
    concur("jobs", "enqueue", "--noop", "-n", str(n), "--jobs-backend", url, **quiet)

    def sqlite_processed():
        with sqlite3.connect(db, timeout=30) as c:
            return c.execute("SELECT value FROM counters WHERE name='processed'").fetchone()[0]

    return drain(n, lambda: [subprocess.Popen(
        [CONCUR, "jobs", "work", "-c", "4", "--jobs-backend", url], **quiet) for _ in range(procs)],
        sqlite_processed, f"sqlite {sync}: {procs} x concur jobs work -c 4")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    ensure_packages(("redis-server", "redis-server"), ("sidekiq", "ruby-sidekiq"))
    tmp = tempfile.mkdtemp(prefix="concur-bench-")
    noop = noop_rb(tmp)
    results = {}
    print(f"load average at the start: {os.getloadavg()[0]:.2f}", flush=True)
    for k in range(rounds):
        print(f"== round {k + 1} of {rounds}", flush=True)
        r = Redis()
        try:
            for c in (10, 25):
                results.setdefault(f"concur -c {c}", []).append(redis_concur(r, n, c))
                results.setdefault(f"sidekiq -c {c}", []).append(redis_sidekiq(r, n, c, noop))
        finally:
            r.stop()
        for sync in ("normal", "full"):
            for procs in (1, 4):
                db = os.path.join(tmp, f"q{k}-{sync}-{procs}.sqlite")
                results.setdefault(f"sqlite {sync} x{procs}", []).append(
                    sqlite_concur(db, n, procs, sync))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"medians of {rounds} round(s), jobs/s:")
    for k, v in med.items():
        print(f"  {k:20} {v:9.0f}   rounds: {', '.join(f'{x:.0f}' for x in results[k])}")
    for c in (10, 25):
        ours, theirs = med[f"concur -c {c}"], med[f"sidekiq -c {c}"]
        print(f"-c {c}: concur / sidekiq = {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
