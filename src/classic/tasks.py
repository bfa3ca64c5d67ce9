"""The tasks study in CPython: N tasks that each wait, as Python's users write it: asyncio
coroutines gathered together (asyncio.sleep), the same on uvloop's event loop (libuv), trio
tasks started in one nursery (trio.sleep), or one thread per task (time.sleep).

    python3 tasks.py asyncio --tasks 100000 --wait-ms 10000
    python3 tasks.py uvloop --tasks 100000 --wait-ms 10000
    python3 tasks.py trio --tasks 100000 --wait-ms 10000
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


def summary(n, finished, wall, starts, late, runtime=""):
    late.sort()
    q = lambda p: max(0, round(late[round(p * (n - 1))] * 1e6))
    return {
        "wall_s": wall,
        "tasks_ok": finished,
        # A waiting task produces no bytes (concur's sleep task neither).
        "bytes": 0,
        "runtime": "cpython " + sys.version.split()[0] + runtime,
        "wakeups": {
            "start_all_s": max(starts),
            "late_us": {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999), "max": q(1)},
        },
    }


def coroutines(n, wait, sleep):
    """The coroutine of every task under an event loop whose sleep is `sleep`, the lists its
    tasks fill in, and the clock they are timed against: one body for asyncio, uvloop and trio."""
    starts, late = [0.0] * n, [0.0] * n

    async def task(i, t0):
        start = time.perf_counter()
        await sleep(wait)
        starts[i] = start - t0
        late[i] = time.perf_counter() - start - wait
        return 1

    return task, starts, late


def with_asyncio(n, wait, loop_factory=None, runtime=""):
    task, starts, late = coroutines(n, wait, asyncio.sleep)

    async def main():
        t0 = time.perf_counter()
        done = await asyncio.gather(*(task(i, t0) for i in range(n)))
        return time.perf_counter() - t0, sum(done)

    if loop_factory is None:
        wall, finished = asyncio.run(main())
    else:
        # asyncio.run takes a loop factory from 3.12 on; a Runner from 3.11.
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            wall, finished = runner.run(main())
    return summary(n, finished, wall, starts, late, runtime)


def with_uvloop(n, wait):
    import uvloop

    return with_asyncio(n, wait, uvloop.new_event_loop, ", uvloop " + uvloop.__version__)


def with_trio(n, wait):
    import trio

    task, starts, late = coroutines(n, wait, trio.sleep)
    # A nursery keeps no results: each task's 1 goes into its own slot, summed at the end.
    done = [0] * n

    async def counted(i, t0):
        done[i] = await task(i, t0)

    async def main():
        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(counted, i, t0)
        return time.perf_counter() - t0

    wall = trio.run(main)
    return summary(n, sum(done), wall, starts, late, ", trio " + trio.__version__)


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


MODES = {"asyncio": with_asyncio, "uvloop": with_uvloop, "trio": with_trio, "threads": with_threads}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=list(MODES))
    p.add_argument("--tasks", type=int, default=1)
    p.add_argument("--wait-ms", type=int, default=10000)
    a = p.parse_args()
    print("CONCUR " + json.dumps(MODES[a.mode](a.tasks, a.wait_ms / 1000)), flush=True)


if __name__ == "__main__":
    main()
