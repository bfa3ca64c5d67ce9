#!/usr/bin/env bash
# Issue 42, row 6 (docs/security.md): CONNECTIONS connections at once (6,000 by default), each
# sending BYTES (~400 KB) of a request head whose header line never ends, at `concur serve` on
# loopback. Prints the server's RSS before, its peak while they send (VmRSS read every 100 ms,
# and VmHWM), what the connections got back, and its RSS 15 s after they all closed. The
# review measured the server before its head cap at 2.45 GB with 6,000, still 1.1 GB 15 s after.
# Run it on a quiet machine: it is a memory figure, but 6,000 connections load both cores.
#
# usage: bench/slow-headers.sh [CONNECTIONS] [BYTES] [BIN]
#   BIN: a concur binary to serve (default: this tree's release build, built first)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
conns=${1:-6000}
bytes=${2:-400000}
[[ $conns =~ ^[1-9][0-9]*$ ]] || { echo "CONNECTIONS must be a positive number, not '$conns'" >&2; exit 2; }
[[ $bytes =~ ^[1-9][0-9]*$ ]] || { echo "BYTES must be a positive number, not '$bytes'" >&2; exit 2; }
if [ -n "${3:-}" ]; then bin=$3; else build; fi
raise_open_files
echo "load average at the start: $(cut -d' ' -f1 /proc/loadavg); open-files limit $(ulimit -n)"
start_server srv
python3 - "$srv_port" "$srv_pid" "$conns" "$bytes" <<'PY'
import asyncio, collections, sys, time

port, pid, n, size = (int(a) for a in sys.argv[1:5])


def status(field):
    """A /proc/PID/status figure of the server, in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


peak = 0.0
sampling = True


async def sample():
    global peak
    while sampling:
        peak = max(peak, status("VmRSS"))
        await asyncio.sleep(0.1)


answers = collections.Counter()
opening = asyncio.Semaphore(500)


async def one():
    """Opens a connection and sends `size` bytes of an unfinished header line; returns the
    connection (kept open) and the first line the server answered, if any."""
    async with opening:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
        except (OSError, asyncio.TimeoutError) as e:
            answers[f"connect failed ({type(e).__name__})"] += 1
            return None
        w.write(b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Unfinished: ")
        chunk = b"a" * 16384
        sent = 0
        try:
            while sent < size:
                part = chunk[: min(len(chunk), size - sent)]
                w.write(part)
                sent += len(part)
                await asyncio.wait_for(w.drain(), 30)
        except (OSError, asyncio.TimeoutError):
            pass
    try:
        line = await asyncio.wait_for(r.readline(), 5)
        what = line.decode(errors="replace").strip() or "closed by the server without an answer"
    except asyncio.TimeoutError:
        what = "no answer within 5 s (held open)"
    except OSError as e:
        # A socket closed with unread bytes in it is reset: the answer may be lost with them.
        what = f"reset by the server ({type(e).__name__})"
    answers[what] += 1
    return w


async def main():
    global sampling
    before = status("VmRSS")
    sampler = asyncio.create_task(sample())
    t = time.monotonic()
    writers = [w for w in await asyncio.gather(*(one() for _ in range(n))) if w]
    sent_s = time.monotonic() - t
    await asyncio.sleep(2)  # all of them open, their heads unfinished (or answered)
    during = status("VmRSS")
    for w in writers:
        w.close()
    await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
    sampling = False
    await sampler
    hwm = status("VmHWM")
    await asyncio.sleep(15)
    after = status("VmRSS")
    print(f"{n} connections x {size} bytes of an unfinished header line, sent in {sent_s:.1f} s")
    for what, count in answers.most_common():
        print(f"  {count:6d}  {what}")
    print(f"server RSS: before {before:.1f} MB, peak while they sent {peak:.1f} MB "
          f"(VmHWM {hwm:.1f} MB), with all still open {during:.1f} MB, "
          f"15 s after they closed {after:.1f} MB")


asyncio.run(main())
PY
