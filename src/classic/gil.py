#!/usr/bin/env python3
"""The classic CPython "GIL" experiment: one cell per process, as concur runs it (--classic),
or the classic's whole table in one process (--table).

  gil.py --body math1|io1 --mode plain|threads|processes --tasks K [--iterations N]
         [--reads R --read-size S] [--start-method fork]
  gil.py --table [--bodies math1,io1] [--tasks 1,2,6,10] [--repeat 5] [--json FILE]
         [--iterations N] [--reads R --read-size S] [--start-method fork]
  gil.py --calibrate N      # seconds of one math1(N) call (best of 3), and the version

A do_run() body is run K times as plain calls, K threading.Thread objects or K
multiprocessing.Process objects (fork by default), started together and joined. Bodies:
  math1 -- CPU: a, b = 3, 5; N times a, b = b, (a * b) % 2**64 (the modulo keeps the ints
           bounded, like concur's wrapping multiply);
  io1   -- I/O: open /dev/urandom once, then R reads of S bytes.
One cell's last line is `CONCUR {"wall_s": ..., "bytes": ..., "tasks_ok": ...}`: the work's own
wall, without the interpreter's start-up, the calls that returned (threads' and processes'
results come back through a list or a shared array) and the bytes they produced, summed: math1's
8-byte result, io1's bytes read. The table times every (body, K, mode) REPEAT times
in the same way, one after another in this process, and prints the medians with the speedup
over plain calls for the same K; --json also writes them as a list of {"body", "mode",
"tasks", "median_s", "runs"}. Standard library only.
"""

import argparse
import json
import multiprocessing
import statistics
import sys
import threading
import time

MOD64 = 1 << 64


def math1(iterations):
    a, b = 3, 5
    for _ in range(iterations):
        a, b = b, (a * b) % MOD64
    return len(b.to_bytes(8, "little"))


def io1(reads, read_size):
    total = 0
    with open("/dev/urandom", "rb", buffering=0) as f:
        for _ in range(reads):
            total += len(f.read(read_size))
    return total


# Each mode returns every call's result (its bytes), None for a call that did not return.


def plain(fn, args, k):
    return [fn(*args) for _ in range(k)]


def threads(fn, args, k):
    out = [None] * k

    def one(i):
        out[i] = fn(*args)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def in_child(out, i, fn, args):
    """A worker process's call: its result goes back through the shared array."""
    out[i] = fn(*args)


def processes(fn, args, k):
    out = multiprocessing.RawArray("q", [-1] * k)
    ps = [multiprocessing.Process(target=in_child, args=(out, i, fn, args)) for i in range(k)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    bad = [p.exitcode for p in ps if p.exitcode != 0]
    if bad:
        raise SystemExit(f"{len(bad)} worker processes failed (exit codes {bad})")
    return [None if r < 0 else r for r in out]


MODES = {"plain": plain, "threads": threads, "processes": processes}


def run(mode, fn, args, k):
    """One cell, timed: its wall and the results of the calls that returned."""
    t = time.perf_counter()
    results = MODES[mode](fn, args, k)
    return time.perf_counter() - t, [r for r in results if r is not None]


def table(bodies, a):
    """The classic's table: every body, K and mode, REPEAT times each; medians and speedups."""
    print(f"# CPython {sys.version.split()[0]}, {multiprocessing.cpu_count()} CPUs; "
          f"math1 iterations={a.iterations}, io1 reads={a.reads} x {a.read_size} B; "
          f"repeat={a.repeat}; start method={a.start_method}")
    header = f"{'body':<6} {'mode':<10} {'tasks':>5} {'median_s':>10} {'speedup':>8}"
    print(header)
    print("-" * len(header), flush=True)
    rows = []
    for body in a.bodies:
        fn, args = bodies[body]
        for k in a.tasks:
            for mode in MODES:
                runs = [run(mode, fn, args, k)[0] for _ in range(a.repeat)]
                median = statistics.median(runs)
                if mode == "plain":
                    base = median
                print(f"{body:<6} {mode:<10} {k:>5} {median:>10.4f} {base / median:>7.2f}x", flush=True)
                rows.append({"body": body, "mode": mode, "tasks": k, "median_s": median, "runs": runs})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
            f.write("\n")
        print(f"# JSON written to {a.json}")


def whole(text):
    """A whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of at least 1")
    return int(text)


def wholes(text):
    """A comma-separated list of whole numbers of at least 1."""
    try:
        return [whole(t) for t in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a comma-separated list of whole numbers of at least 1") from None


def body_names(text):
    """A comma-separated list of bodies."""
    names = [t.strip() for t in text.split(",")]
    if not all(n in ("math1", "io1") for n in names):
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of math1, io1")
    return names


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--body", choices=["math1", "io1"], default="math1")
    p.add_argument("--mode", choices=sorted(MODES), default="plain")
    p.add_argument("--tasks", type=wholes, help="K (default 1); with --table a list (default 1,2,6,10)")
    p.add_argument("--iterations", type=whole, default=1_000_000)
    p.add_argument("--reads", type=whole, default=100)
    p.add_argument("--read-size", type=whole, default=65536)
    p.add_argument("--start-method", choices=multiprocessing.get_all_start_methods(), default="fork")
    p.add_argument("--calibrate", type=whole, metavar="N")
    p.add_argument("--table", action="store_true", help="the classic's whole table in this process")
    p.add_argument("--bodies", type=body_names, default=["math1", "io1"], help="--table: bodies")
    p.add_argument("--repeat", type=whole, default=5, help="--table: timed runs of each cell")
    p.add_argument("--json", metavar="FILE", help="--table: also write the table as JSON")
    a = p.parse_args()
    if a.calibrate:
        best = min(timed(math1, a.calibrate) for _ in range(3))
        print(json.dumps({"seconds": best, "version": sys.version.split()[0]}))
        return 0
    multiprocessing.set_start_method(a.start_method)
    bodies = {"math1": (math1, (a.iterations,)), "io1": (io1, (a.reads, a.read_size))}
    if a.table:
        a.tasks = a.tasks or [1, 2, 6, 10]
        try:
            if a.json:
                open(a.json, "w").close()
        except OSError as e:
            p.error(f"--json '{a.json}' cannot be written: {e.strerror}")
        table(bodies, a)
        return 0
    if a.tasks and len(a.tasks) > 1:
        p.error(f"--tasks takes one K for one cell (a list only with --table): {a.tasks}")
    k = a.tasks[0] if a.tasks else 1
    fn, args = bodies[a.body]
    wall, done = run(a.mode, fn, args, k)
    print("CONCUR " + json.dumps({"wall_s": wall, "bytes": sum(done), "tasks_ok": len(done)}))
    return 0


def timed(fn, n):
    t = time.perf_counter()
    fn(n)
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
