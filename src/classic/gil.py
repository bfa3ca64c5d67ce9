#!/usr/bin/env python3
"""The classic CPython "GIL" experiment, one cell per process, as concur runs it (--classic).

  gil.py --body math1|io1 --mode plain|threads|processes --tasks K [--iterations N]
         [--reads R --read-size S]
  gil.py --calibrate N      # seconds of one math1(N) call (best of 3), and the version

A do_run() body is run K times as plain calls, K threading.Thread objects or K
multiprocessing.Process objects (fork), started together and joined. Bodies:
  math1 -- CPU: a, b = 3, 5; N times a, b = b, (a * b) % 2**64 (the modulo keeps the ints
           bounded, like concur's wrapping multiply);
  io1   -- I/O: open /dev/urandom once, then R reads of S bytes.
The last line is `CONCUR {"wall_s": ..., "bytes": ..., "tasks_ok": K}`: the work's own wall,
without the interpreter's start-up. Standard library only.
"""

import argparse
import json
import multiprocessing
import sys
import threading
import time

MOD64 = 1 << 64


def math1(iterations):
    a, b = 3, 5
    for _ in range(iterations):
        a, b = b, (a * b) % MOD64
    return 8


def io1(reads, read_size):
    total = 0
    with open("/dev/urandom", "rb", buffering=0) as f:
        for _ in range(reads):
            total += len(f.read(read_size))
    return total


def plain(fn, args, k):
    return sum(fn(*args) for _ in range(k))


def threads(fn, args, k):
    out = [0] * k

    def one(i):
        out[i] = fn(*args)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(out)


def processes(fn, args, k):
    ps = [multiprocessing.Process(target=fn, args=args) for _ in range(k)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    bad = [p.exitcode for p in ps if p.exitcode != 0]
    if bad:
        raise SystemExit(f"{len(bad)} worker processes failed (exit codes {bad})")
    # The children's results stay in the children, as in the classic; the bytes are known.
    return k * (fn is math1 and 8 or args[0] * args[1])


MODES = {"plain": plain, "threads": threads, "processes": processes}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--body", choices=["math1", "io1"], default="math1")
    p.add_argument("--mode", choices=sorted(MODES), default="plain")
    p.add_argument("--tasks", type=int, default=1)
    p.add_argument("--iterations", type=int, default=1_000_000)
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--read-size", type=int, default=65536)
    p.add_argument("--calibrate", type=int, metavar="N")
    a = p.parse_args()
    if a.calibrate:
        best = min(timed(math1, a.calibrate) for _ in range(3))
        print(json.dumps({"seconds": best, "version": sys.version.split()[0]}))
        return 0
    multiprocessing.set_start_method("fork")
    fn, args = (math1, (a.iterations,)) if a.body == "math1" else (io1, (a.reads, a.read_size))
    t = time.perf_counter()
    total = MODES[a.mode](fn, args, a.tasks)
    wall = time.perf_counter() - t
    print("CONCUR " + json.dumps({"wall_s": wall, "bytes": total, "tasks_ok": a.tasks}))
    return 0


def timed(fn, n):
    t = time.perf_counter()
    fn(n)
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
