"""The tasks study in CPython: N tasks that each wait, as Python's users write it: asyncio
coroutines gathered together (asyncio.sleep), or one thread per task (time.sleep).

    python3 tasks.py asyncio --tasks 100000 --wait-ms 10000
    python3 tasks.py threads --tasks 10000 --wait-ms 10000

Prints one CONCUR line: the tasks that finished, counted from their own results (each returns
1 when its wait is over), the work's wall, the time to start every task, and how late each woke.
"""
import argparse
import asyncio
import json
import sys
import threading
import time


def summary(n, finished, wall, starts, late):
    late.sort()
    q = lambda p: max(0, round(late[round(p * (n - 1))] * 1e6))
    return {
        "wall_s": wall,
        "tasks_ok": finished,
        # A waiting task produces no bytes (concur's sleep task neither).
        "bytes": 0,
        "runtime": "cpython " + sys.version.split()[0],
        "wakeups": {
            "start_all_s": max(starts),
            "late_us": {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999), "max": q(1)},
        },
    }


def with_asyncio(n, wait):
    starts, late = [0.0] * n, [0.0] * n

    async def task(i, t0):
        start = time.perf_counter()
        await asyncio.sleep(wait)
        starts[i] = start - t0
        late[i] = time.perf_counter() - start - wait
        return 1

    async def main():
        t0 = time.perf_counter()
        done = await asyncio.gather(*(task(i, t0) for i in range(n)))
        return time.perf_counter() - t0, sum(done)

    wall, finished = asyncio.run(main())
    return summary(n, finished, wall, starts, late)


def with_threads(n, wait):
    starts, late, done = [0.0] * n, [0.0] * n, [0] * n

    def task(i, t0):
        start = time.perf_counter()
        time.sleep(wait)
        starts[i] = start - t0
        late[i] = time.perf_counter() - start - wait
        done[i] = 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=task, args=(i, t0)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return summary(n, sum(done), wall, starts, late)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["asyncio", "threads"])
    p.add_argument("--tasks", type=int, default=1)
    p.add_argument("--wait-ms", type=int, default=10000)
    a = p.parse_args()
    run = with_asyncio if a.mode == "asyncio" else with_threads
    print("CONCUR " + json.dumps(run(a.tasks, a.wait_ms / 1000)), flush=True)


if __name__ == "__main__":
    main()
