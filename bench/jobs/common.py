"""Helpers for the job-queue benchmark and interop scripts: a private redis-server, a tiny
RESP client (no Python package needed), and waiting on conditions with deadlines."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONCUR = os.environ.get("CONCUR", os.path.join(ROOT, "target", "release", "concur"))


def ensure_packages(*pkgs):
    """apt-get install the Debian packages whose command is missing (we run as root)."""
    missing = [p for cmd, p in pkgs if shutil.which(cmd) is None]
    if missing:
        print("== installing", " ".join(missing), flush=True)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server of our own on a free loopback port, in a temporary directory."""

    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="concur-redis-")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("redis-server", 20, lambda: self.try_cmd("PING") == "PONG")
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def try_cmd(self, *args):
        try:
            return self.cmd(*args)
        except OSError:
            return None

    def cmd(self, *args):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            out = b"*%d\r\n" % len(args)
            for a in args:
                a = str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
            s.sendall(out)
            f = s.makefile("rb")
            return read_reply(f)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def read_reply(f):
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:].decode()
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RuntimeError(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode()
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise RuntimeError(f"bad reply {line!r}")


def wait_for(what, limit, cond, every=0.02):
    deadline = time.monotonic() + limit
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(every)


def rss_kib(pid):
    """Resident memory of a process and its threads, KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def concur(*args, **kw):
    return subprocess.run([CONCUR, *args], check=True, **kw)
