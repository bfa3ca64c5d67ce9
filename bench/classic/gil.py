#!/usr/bin/python3
"""Classic CPython "GIL" experiment, for comparison with concur's gil study.

A do_run() body is run K times (K = 1, 2, 6, 10 by default) as
  (a) sequential  -- K plain calls, one after another,
  (b) threads     -- K threading.Thread objects, start all, then join all,
  (c) processes   -- K multiprocessing.Process objects, start all, then join all.
Bodies:
  math1 -- CPU bound: a, b = 3, 5; N times a, b = b, (a * b) % 2**64
           (the modulo keeps ints bounded, like the Rust wrapping multiply).
  io1   -- I/O bound: open /dev/urandom once, then READS reads of SIZE bytes.

Each (body, mode, K) is timed REPEAT times with time.perf_counter(); the
median is printed with the speedup over sequential for the same K
(speedup = sequential median / mode median).  --json FILE also writes a JSON
list of {"body", "mode", "tasks", "median_s", "runs"} objects.

Standard library only.  Run with /usr/bin/python3 (CPython 3.11).
"""

import argparse
import json
import multiprocessing
import statistics
import sys
import threading
import time

# Default math1 size.  concur's Rust CPU task is sized at ~60 ms, so one
# math1 call should take ~60 ms too.  Measured on this 2-core machine with
# /usr/bin/python3 (CPython 3.11.2): ~78-80 ms per 1,000,000 iterations,
# so 750,000 iterations ~= 60 ms per call.  (If your machine differs, check
# the "sequential K=1" row, which is exactly one call, and adjust
# --iterations.)
DEFAULT_ITERATIONS = 750_000
DEFAULT_READ_SIZE = 65536  # matches concur's gil study
DEFAULT_READS = 100
DEFAULT_REPEAT = 5  # default run: ~20-30 s on 2 cores
DEFAULT_TASKS = "1,2,6,10"

MOD64 = 18446744073709551616  # 2**64


def math1(iterations):
    a, b = 3, 5
    for _ in range(iterations):
        a, b = b, (a * b) % MOD64
    return a


def io1(reads, read_size):
    total = 0
    with open("/dev/urandom", "rb", buffering=0) as f:
        for _ in range(reads):
            total += len(f.read(read_size))
    return total


def run_sequential(fn, args, k):
    for _ in range(k):
        fn(*args)


def run_threads(fn, args, k):
    workers = [threading.Thread(target=fn, args=args) for _ in range(k)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def run_processes(fn, args, k):
    workers = [multiprocessing.Process(target=fn, args=args) for _ in range(k)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for w in workers:
        if w.exitcode != 0:
            raise RuntimeError(f"worker process exited with {w.exitcode}")


MODES = [
    ("sequential", run_sequential),
    ("threads", run_threads),
    ("processes", run_processes),
]


def parse_tasks(text):
    try:
        tasks = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --tasks list: {text!r}")
    if not tasks or any(t < 1 for t in tasks):
        raise argparse.ArgumentTypeError("--tasks needs positive integers")
    return tasks


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text}")
    return value


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=positive_int, default=DEFAULT_ITERATIONS,
                   help=f"math1 loop count (default {DEFAULT_ITERATIONS}, ~60 ms)")
    p.add_argument("--read-size", type=positive_int, default=DEFAULT_READ_SIZE,
                   help=f"io1 bytes per read (default {DEFAULT_READ_SIZE})")
    p.add_argument("--reads", type=positive_int, default=DEFAULT_READS,
                   help=f"io1 reads per call (default {DEFAULT_READS})")
    p.add_argument("--repeat", type=positive_int, default=DEFAULT_REPEAT,
                   help=f"timed repetitions per cell (default {DEFAULT_REPEAT})")
    p.add_argument("--tasks", type=parse_tasks, default=parse_tasks(DEFAULT_TASKS),
                   help=f"comma-separated K values (default {DEFAULT_TASKS})")
    p.add_argument("--bodies", default="math1,io1",
                   help="comma-separated bodies to run (default math1,io1)")
    p.add_argument("--start-method", default="fork",
                   choices=multiprocessing.get_all_start_methods(),
                   help="multiprocessing start method (default fork)")
    p.add_argument("--json", metavar="FILE", help="also write results as JSON")
    args = p.parse_args(argv)

    multiprocessing.set_start_method(args.start_method)

    bodies = {
        "math1": (math1, (args.iterations,)),
        "io1": (io1, (args.reads, args.read_size)),
    }
    selected = [b.strip() for b in args.bodies.split(",") if b.strip()]
    for b in selected:
        if b not in bodies:
            p.error(f"unknown body {b!r} (choose from {', '.join(bodies)})")

    print(f"# CPython {sys.version.split()[0]}, {multiprocessing.cpu_count()} CPUs; "
          f"math1 iterations={args.iterations}, io1 reads={args.reads} x "
          f"{args.read_size} B; repeat={args.repeat}; start method={args.start_method}")
    header = f"{'body':<6} {'mode':<10} {'tasks':>5} {'median_s':>10} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    sys.stdout.flush()

    results = []
    for body in selected:
        fn, fn_args = bodies[body]
        for k in args.tasks:
            seq_median = None
            for mode, runner in MODES:
                runs = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    runner(fn, fn_args, k)
                    runs.append(time.perf_counter() - t0)
                median = statistics.median(runs)
                if mode == "sequential":
                    seq_median = median
                speedup = seq_median / median if median > 0 else float("nan")
                print(f"{body:<6} {mode:<10} {k:>5} {median:>10.4f} {speedup:>7.2f}x",
                      flush=True)
                results.append({"body": body, "mode": mode, "tasks": k,
                                "median_s": median, "runs": runs})

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
        print(f"# JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
