#!/usr/bin/env python3
"""Job-queue throughput of two concur binaries in one session, alternated: N no-op jobs drained
from one Redis by `concur jobs work -c 10` and `-c 25`, and from the embedded SQLite queue by one
`concur jobs work -c 4`, ROUNDS rounds, each round running OLD then NEW; medians per consumer and
the ratio new/old. The method is throughput.py's (the rate between the first poll that saw a job
processed and the one that saw all N). To tell a change's cost per job from a machine's drift.
Usage: bench/jobs/ab.py OLD_BIN NEW_BIN [N] [ROUNDS]   (defaults 100000, 3)."""

import os
import statistics
import subprocess
import sys
import tempfile

import common
import throughput


def main():
    old, new = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    common.ensure_packages(("redis-server", "redis-server"))
    tmp = tempfile.mkdtemp(prefix="concur-jobs-ab-")
    results = {}
    print(f"load average at the start: {os.getloadavg()[0]:.2f}", flush=True)
    for k in range(rounds):
        for label, binary in (("old", old), ("new", new)):
            # throughput.py's consumers start common.CONCUR: point it at this binary.
            common.CONCUR = throughput.CONCUR = binary
            r = common.Redis()
            try:
                for c in (10, 25):
                    rate = throughput.redis_concur(r, n, c)
                    results.setdefault((f"redis -c {c}", label), []).append(rate)
            finally:
                r.stop()
            db = os.path.join(tmp, f"q{k}-{label}.sqlite")
            rate = throughput.sqlite_concur(db, n, 1)
            results.setdefault(("sqlite x1 -c 4", label), []).append(rate)
    print(f"medians of {rounds} alternated round(s), jobs/s:")
    for what in ("redis -c 10", "redis -c 25", "sqlite x1 -c 4"):
        o = statistics.median(results[(what, "old")])
        w = statistics.median(results[(what, "new")])
        print(f"  {what:16} old {o:9.0f}  new {w:9.0f}  new/old {w / o:.3f}   "
              f"rounds old {', '.join(f'{x:.0f}' for x in results[(what, 'old')])}; "
              f"new {', '.join(f'{x:.0f}' for x in results[(what, 'new')])}")


if __name__ == "__main__":
    main()
