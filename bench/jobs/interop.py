#!/usr/bin/env python3
"""Interop with real Sidekiq (Debian's ruby-sidekiq 6.4.1) on one Redis:
  1. jobs pushed by Sidekiq's own client (Sidekiq::Client.push) run on `concur jobs work`;
  2. jobs pushed by `concur jobs enqueue` run on `sidekiq`.
Installs redis-server and ruby-sidekiq with apt-get when missing (run as root). Exits non-zero
on any mismatch. Usage: bench/jobs/interop.py [N]   (default 200 jobs each way)"""

import os
import subprocess
import sys
import tempfile

from common import CONCUR, Redis, concur, ensure_packages, wait_for

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200

ensure_packages(("redis-server", "redis-server"), ("sidekiq", "ruby-sidekiq"))
r = Redis()
tmp = tempfile.mkdtemp(prefix="concur-interop-")
try:
    # 1. Sidekiq's client -> concur's worker.
    push = f"""
require 'sidekiq'
Sidekiq.configure_client {{ |c| c.redis = {{ url: '{r.url}' }} }}
{N}.times {{ |i| Sidekiq::Client.push('class' => 'Concur::Task', 'args' => ['fib:20', i]) }}
"""
    subprocess.run(["ruby", "-W0", "-e", push], check=True)
    sample = r.cmd("LINDEX", "queue:default", 0)
    print("Sidekiq 6.4.1 pushed:", sample)
    concur("jobs", "work", "-c", "4", "--jobs-backend", r.url, "--until-empty")
    processed = int(r.cmd("GET", "stat:processed") or 0)
    assert processed == N, f"concur processed {processed} of {N} Sidekiq-pushed jobs"
    print(f"ok: {N} jobs pushed by Sidekiq::Client ran on concur jobs work")

    # 2. concur's client -> Sidekiq's worker.
    worker_rb = os.path.join(tmp, "worker.rb")
    with open(worker_rb, "w") as f:
        f.write("""
require 'sidekiq'
module Concur
  class Task
    include Sidekiq::Worker
    def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
    def perform(spec, index)
      fib(spec.split(':')[1].to_i)
      Sidekiq.redis { |r| r.sadd('interop:done', index) }
    end
  end
end
""")
    concur("jobs", "enqueue", "-w", "fib:20", "-n", str(N), "--jobs-backend", r.url)
    print("concur pushed:", r.cmd("LINDEX", "queue:default", 0))
    env = dict(os.environ, REDIS_URL=r.url)
    sk = subprocess.Popen(["sidekiq", "-r", worker_rb, "-c", "5"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("Sidekiq to run concur's jobs", 120,
                 lambda: r.cmd("SCARD", "interop:done") == N, every=0.1)
    finally:
        sk.terminate()
        sk.wait()
    failed = r.cmd("ZCARD", "retry") + r.cmd("ZCARD", "dead")
    assert failed == 0, f"{failed} jobs failed on Sidekiq"
    print(f"ok: {N} jobs pushed by concur jobs enqueue ran on sidekiq")
finally:
    r.stop()
