#!/usr/bin/python3
"""The classic crawl experiment's Python clients, against any delay server.

  crawl.py CLIENT --url http://127.0.0.1:PORT [-n 1000] [-c 100] [--delay 100] [--cafile PEM]

CLIENT is one of:
  serial   -- requests.get, one after another (the classic's serial client)
  gevent   -- gevent greenlets (monkey-patched requests), a Pool of C
  tornado  -- tornado's CurlAsyncHTTPClient with max_clients=C
  aiohttp  -- one aiohttp ClientSession, an asyncio.Semaphore(C)

Each request is GET /add?name=crawl<10 random letters>&delay=MS; the server answers with 10
bytes. Prints one line `CONCUR {"wall_s", "bytes", "tasks_ok", "tasks_failed", "import_s",
"peak_rss_kib"}`: the work's own wall, without the interpreter's start-up and imports, as
concur's external cells read it (`concur run crawl --classic`); the time the imports (and
gevent's patching) took just before, so that the wall with them is wall_s + import_s; and the
process's peak RSS at the end. With an https:// URL, --cafile names the CA certificates to
trust instead of the system's (as requests' verify=, tornado's ca_certs and
ssl.create_default_context(cafile=) all do). Run each client in its own process (gevent patches the standard library).
"""

import argparse
import json
import os
import random
import resource
import string
import sys
import time


def urls(base, n, delay):
    rnd = random.Random(42)
    for _ in range(n):
        letters = "".join(rnd.choice(string.ascii_lowercase) for _ in range(10))
        yield f"{base}/add?name=crawl{letters}&delay={delay}"


def serial(args):
    import requests

    ok = errors = size = 0
    for u in urls(args.url, args.n, args.delay):
        try:
            r = requests.get(u, timeout=30, verify=args.cafile or True)
            size += len(r.content)
            ok += r.status_code == 200
            errors += r.status_code != 200
        except Exception:
            errors += 1
    return ok, errors, size


def gevent_client(args):
    from gevent import monkey

    monkey.patch_all()
    import gevent.pool
    import requests

    res = {"ok": 0, "errors": 0, "size": 0}

    def fetch(u):
        try:
            r = requests.get(u, timeout=30, verify=args.cafile or True)
            res["size"] += len(r.content)
            res["ok" if r.status_code == 200 else "errors"] += 1
        except Exception:
            res["errors"] += 1

    pool = gevent.pool.Pool(args.c)
    for u in urls(args.url, args.n, args.delay):
        pool.spawn(fetch, u)
    pool.join()
    return res["ok"], res["errors"], res["size"]


def tornado_client(args):
    import asyncio

    from tornado.httpclient import AsyncHTTPClient

    AsyncHTTPClient.configure(
        "tornado.curl_httpclient.CurlAsyncHTTPClient", max_clients=args.c
    )

    async def main():
        client = AsyncHTTPClient()
        res = await asyncio.gather(
            *(
                client.fetch(u, raise_error=False, request_timeout=30, ca_certs=args.cafile)
                for u in urls(args.url, args.n, args.delay)
            )
        )
        ok = sum(r.code == 200 for r in res)
        return ok, len(res) - ok, sum(len(r.body or b"") for r in res)

    return asyncio.run(main())


def aiohttp_client(args):
    import asyncio

    import aiohttp

    async def main():
        sem = asyncio.Semaphore(args.c)
        ssl_ctx = None
        if args.cafile:
            import ssl

            ssl_ctx = ssl.create_default_context(cafile=args.cafile)
        conn = aiohttp.TCPConnector(limit=args.c, ssl=ssl_ctx if ssl_ctx else True)
        async with aiohttp.ClientSession(connector=conn) as session:

            async def fetch(u):
                async with sem:
                    try:
                        async with session.get(u) as r:
                            body = await r.read()
                            return r.status == 200, len(body)
                    except Exception:
                        return False, 0

            res = await asyncio.gather(*(fetch(u) for u in urls(args.url, args.n, args.delay)))
        ok = sum(1 for good, _ in res if good)
        return ok, len(res) - ok, sum(n for _, n in res)

    return asyncio.run(main())


CLIENTS = {
    "serial": serial,
    "gevent": gevent_client,
    "tornado": tornado_client,
    "aiohttp": aiohttp_client,
}


def prepare_gevent():
    from gevent import monkey

    monkey.patch_all()
    import gevent.pool  # noqa: F401
    import requests  # noqa: F401


# Imports (and gevent's patching) happen before the clock starts: the CONCUR wall is the
# crawl's, and concur shows the rest of the process's wall as its start-up.
PREPARE = {
    "serial": lambda: __import__("requests"),
    "gevent": prepare_gevent,
    "tornado": lambda: __import__("tornado.curl_httpclient"),
    "aiohttp": lambda: __import__("aiohttp"),
}


def positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of at least 1")
    return value


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("client", choices=sorted(CLIENTS))
    p.add_argument("--url", required=True)
    p.add_argument("-n", type=positive, default=1000)
    p.add_argument("-c", type=positive, default=100)
    p.add_argument("--delay", type=int, default=100)
    p.add_argument("--cafile", help="a PEM file of the CA certificates to trust for https:// URLs (instead of the system's)")
    args = p.parse_args()
    if args.cafile and not os.path.isfile(args.cafile):
        p.error(f"--cafile '{args.cafile}' is not a file (allowed: a PEM file of CA certificates)")
    t = time.perf_counter()
    PREPARE[args.client]()
    imports = time.perf_counter() - t
    t = time.perf_counter()
    ok, errors, size = CLIENTS[args.client](args)
    wall = time.perf_counter() - t
    print("CONCUR " + json.dumps({
        "wall_s": wall, "bytes": size, "tasks_ok": ok, "tasks_failed": errors,
        "import_s": imports,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
