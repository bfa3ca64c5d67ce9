//! The `redis` backend: Sidekiq's key layout and job JSON, with reliable fetch.
//!
//! Keys shared with Sidekiq: `queues` (set of queue names), `queue:NAME` (lists; clients
//! `LPUSH`, consumers take from the right), `schedule`, `retry` and `dead` (sorted sets scored
//! by epoch seconds), `stat:processed` and `stat:failed` (counters). Sidekiq clients can
//! enqueue for our workers and our client for Sidekiq's.
//!
//! Our own keys: a worker claims jobs by moving them into a private list,
//! `concur:inflight:WORKER:NAME` (Sidekiq's open-source `BRPOP` loses the job of a worker that
//! dies): a batch of up to N in one Lua script of `LMOVE`s, or one job with a blocking
//! `BLMOVE` when the queue is empty. It keeps `concur:hb:WORKER` alive with a TTL and is listed
//! in `concur:workers`. Acknowledgement is one Lua script per batch (`LREM` of each job from
//! the private list and `INCRBY stat:processed`), as are failures and the poller that moves
//! due retries and scheduled jobs onto their queues. The reaper
//! returns every private list whose worker's heartbeat key expired to the front (right end)
//! of its queue, in one script that checks the heartbeat again.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use redis::{Connection, Script};

use super::{
    now, Backend, Claimed, FailedSet, RedisUrl, Stats, BACKEND_URLS, DEAD_MAX_JOBS, DEAD_TIMEOUT,
};
use crate::base::error::{Error, Result};

const INFLIGHT: &str = "concur:inflight:";
const HEARTBEAT: &str = "concur:hb:";
const WORKERS: &str = "concur:workers";

fn inflight_key(worker: &str, queue: &str) -> String {
    format!("{INFLIGHT}{worker}:{queue}")
}

/// Acknowledges a batch: KEYS[i] is the private list holding ARGV[i].
const ACK: &str = r"
local n = 0
for i = 1, #ARGV do n = n + redis.call('LREM', KEYS[i], -1, ARGV[i]) end
if n > 0 then redis.call('INCRBY', 'stat:processed', n) end
return n";

/// Claims up to ARGV[1] jobs of the first non-empty queue: KEYS are the queues, then their
/// private lists in the same order. Returns the queue's position (from 1) and the jobs.
const CLAIM: &str = r"
local nq = #KEYS / 2
local max = tonumber(ARGV[1])
for i = 1, nq do
  local out = {tostring(i)}
  for _ = 1, max do
    local job = redis.call('LMOVE', KEYS[i], KEYS[nq + i], 'RIGHT', 'LEFT')
    if not job then break end
    out[#out + 1] = job
  end
  if #out > 1 then return out end
end
return {}";

const RETRY: &str = r"
redis.call('LREM', KEYS[1], -1, ARGV[1])
redis.call('ZADD', 'retry', ARGV[3], ARGV[2])
redis.call('INCR', 'stat:failed')
return 1";

const KILL: &str = r"
redis.call('LREM', KEYS[1], -1, ARGV[1])
if ARGV[2] ~= '' then
  redis.call('ZADD', 'dead', ARGV[3], ARGV[2])
  redis.call('ZREMRANGEBYSCORE', 'dead', '-inf', ARGV[4])
  redis.call('ZREMRANGEBYRANK', 'dead', 0, -(tonumber(ARGV[5]) + 1))
end
redis.call('INCR', 'stat:failed')
return 1";

/// Moves up to 100 members of a sorted set scored at most ARGV[1] onto their queues.
const PROMOTE: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
local n = 0
for _, job in ipairs(due) do
  if redis.call('ZREM', KEYS[1], job) == 1 then
    local ok, j = pcall(cjson.decode, job)
    local q = 'default'
    if ok and type(j) == 'table' and type(j['queue']) == 'string' then q = j['queue'] end
    redis.call('SADD', 'queues', q)
    redis.call('LPUSH', 'queue:' .. q, job)
    n = n + 1
  end
end
return n";

/// Returns a private list to the front of its queue unless its worker is alive (ARGV[2]
/// forces it: the worker itself is stopping).
const REAP: &str = r"
if ARGV[2] ~= '1' and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local n = 0
while redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'RIGHT') do n = n + 1 end
if n > 0 then redis.call('SADD', 'queues', ARGV[1]) end
return n";

/// Puts one job of a live worker's private list back at the front of its queue, if it is
/// still there.
const RESCUE: &str = r"
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('SADD', 'queues', ARGV[2])
  return 1
end
return 0";

/// The jobs this process's workers hold, by private list, to find orphans: a job that a
/// `LMOVE` put into our private list whose reply never reached us (the server died after
/// persisting the move) sits in a list whose owner is alive, so the reaper never sees it.
#[derive(Default)]
struct Held {
    /// private list → (queue, payload → how many held)
    lists: HashMap<String, (String, HashMap<String, usize>)>,
    /// Payloads seen unheld in a private list at the last sweep.
    suspects: HashSet<(String, String)>,
}

/// A Sidekiq-compatible queue on a Redis server.
pub struct Redis {
    held: Mutex<Held>,
    url: RedisUrl,
    client: redis::Client,
    pool: Mutex<Vec<Connection>>,
    scripts: Scripts,
}

struct Scripts {
    ack: Script,
    claim: Script,
    retry: Script,
    kill: Script,
    promote: Script,
    reap: Script,
    rescue: Script,
}

fn rerr(url: &RedisUrl) -> impl Fn(redis::RedisError) -> Error + '_ {
    move |e| Error::Internal(format!("redis {url}: {}", url.scrub(&e.to_string())))
}

impl Redis {
    /// Connects to `url`; a URL the client refuses or an unreachable server is a usage
    /// error. Messages show the URL with its password masked.
    pub fn open(url: &RedisUrl) -> Result<Self> {
        let client = redis::Client::open(url.expose()).map_err(|e| {
            Error::usage(format!(
                "bad backend '{url}': {} (allowed: {BACKEND_URLS})",
                url.scrub(&e.to_string())
            ))
        })?;
        let unreachable = |e: redis::RedisError| {
            Error::usage(format!(
                "cannot reach redis at '{url}': {}",
                url.scrub(&e.to_string())
            ))
        };
        let r = Redis {
            url: url.clone(),
            client,
            pool: Mutex::new(Vec::new()),
            held: Mutex::new(Held::default()),
            scripts: Scripts {
                ack: Script::new(ACK),
                claim: Script::new(CLAIM),
                retry: Script::new(RETRY),
                kill: Script::new(KILL),
                promote: Script::new(PROMOTE),
                reap: Script::new(REAP),
                rescue: Script::new(RESCUE),
            },
        };
        let mut c = r.connect().map_err(unreachable)?;
        redis::cmd("PING")
            .query::<String>(&mut c)
            .map_err(unreachable)?;
        r.put(c);
        Ok(r)
    }

    fn connect(&self) -> redis::RedisResult<Connection> {
        connect(&self.client)
    }

    fn put(&self, c: Connection) {
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }

    /// Runs `f` on an idle connection; a connection that saw an error is dropped (the next
    /// call reconnects, e.g. after a server restart).
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>) -> Result<T> {
        let idle = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut c = match idle {
            Some(c) => c,
            None => self.connect().map_err(rerr(&self.url))?,
        };
        match f(&mut c) {
            Ok(v) => {
                self.put(c);
                Ok(v)
            }
            Err(e) => Err(rerr(&self.url)(e)),
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hold(&self, worker: &str, jobs: &[Claimed]) {
        let mut h = self.held();
        for c in jobs {
            let entry = h
                .lists
                .entry(inflight_key(worker, &c.queue))
                .or_insert_with(|| (c.queue.clone(), HashMap::new()));
            *entry.1.entry(c.raw.clone()).or_default() += 1;
        }
    }

    fn unhold(&self, worker: &str, jobs: &[Claimed]) {
        let mut h = self.held();
        for c in jobs {
            if let Some((_, held)) = h.lists.get_mut(&inflight_key(worker, &c.queue)) {
                if let Some(n) = held.get_mut(&c.raw) {
                    *n -= 1;
                    if *n == 0 {
                        held.remove(&c.raw);
                    }
                }
            }
        }
    }

    /// Returns orphans of this process's private lists to their queues: payloads found unheld
    /// at two sweeps in a row (a job just fetched is held within milliseconds of its reply).
    fn rescue_orphans(&self) -> Result<usize> {
        let lists: Vec<(String, String)> = self
            .held()
            .lists
            .iter()
            .map(|(k, (q, _))| (k.clone(), q.clone()))
            .collect();
        let mut found = HashSet::new();
        for (key, _) in &lists {
            let items: Vec<String> =
                self.with(|c| redis::cmd("LRANGE").arg(key).arg(0).arg(-1).query(c))?;
            let h = self.held();
            let held = h.lists.get(key).map(|(_, m)| m);
            for raw in items {
                if !held.is_some_and(|m| m.contains_key(&raw)) {
                    found.insert((key.clone(), raw));
                }
            }
        }
        let orphans: Vec<(String, String)> = {
            let mut h = self.held();
            let o = found.intersection(&h.suspects).cloned().collect();
            h.suspects = found;
            o
        };
        let mut n = 0;
        for (key, raw) in orphans {
            let Some((_, queue)) = lists.iter().find(|(k, _)| *k == key) else {
                continue;
            };
            let moved: usize = self.with(|c| {
                self.scripts
                    .rescue
                    .key(&key)
                    .key(format!("queue:{queue}"))
                    .arg(&raw)
                    .arg(queue)
                    .invoke(c)
            })?;
            n += moved;
        }
        Ok(n)
    }

    fn fetch_raw(
        &self,
        worker: &str,
        queues: &[String],
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Claimed>> {
        self.with(|c| {
            let mut claim = self.scripts.claim.prepare_invoke();
            for q in queues {
                claim.key(format!("queue:{q}"));
            }
            for q in queues {
                claim.key(inflight_key(worker, q));
            }
            let got: Vec<String> = claim.arg(max.max(1)).invoke(c)?;
            let mut got = got.into_iter();
            if let Some(q) = got
                .next()
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| queues.get(i.wrapping_sub(1)))
            {
                return Ok(got
                    .map(|raw| Claimed {
                        queue: q.clone(),
                        raw,
                        token: 0,
                    })
                    .collect());
            }
            let Some(q) = queues.first() else {
                return Ok(vec![]);
            };
            if wait.is_zero() {
                return Ok(vec![]);
            }
            c.set_read_timeout(Some(wait + Duration::from_secs(5)))?;
            let raw: Option<String> = redis::cmd("BLMOVE")
                .arg(format!("queue:{q}"))
                .arg(inflight_key(worker, q))
                .arg("RIGHT")
                .arg("LEFT")
                .arg(wait.as_secs_f64())
                .query(c)?;
            c.set_read_timeout(Some(Duration::from_secs(10)))?;
            Ok(raw
                .map(|raw| Claimed {
                    queue: q.clone(),
                    raw,
                    token: 0,
                })
                .into_iter()
                .collect())
        })
    }

    fn ack_raw(&self, worker: &str, jobs: &[Claimed]) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.with(|c| {
            let mut ack = self.scripts.ack.prepare_invoke();
            for job in jobs {
                ack.key(inflight_key(worker, &job.queue)).arg(&job.raw);
            }
            ack.invoke::<i64>(c).map(|_| ())
        })
    }

    fn retry_raw(&self, worker: &str, job: &Claimed, payload: &str, at: f64) -> Result<()> {
        self.with(|c| {
            self.scripts
                .retry
                .key(inflight_key(worker, &job.queue))
                .arg(&job.raw)
                .arg(payload)
                .arg(at)
                .invoke::<i64>(c)
                .map(|_| ())
        })
    }

    fn kill_raw(&self, worker: &str, job: &Claimed, payload: Option<&str>) -> Result<()> {
        let t = now();
        self.with(|c| {
            self.scripts
                .kill
                .key(inflight_key(worker, &job.queue))
                .arg(&job.raw)
                .arg(payload.unwrap_or(""))
                .arg(t)
                .arg(t - DEAD_TIMEOUT.as_secs_f64())
                .arg(DEAD_MAX_JOBS)
                .invoke::<i64>(c)
                .map(|_| ())
        })
    }

    fn inflight_lists(c: &mut Connection) -> redis::RedisResult<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{INFLIGHT}*"))
                .arg("COUNT")
                .arg(1000)
                .query(c)?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// Returns private lists to their queues: all of `only`'s when given (forced), else every
    /// list whose worker's heartbeat expired.
    fn return_lists(&self, only: Option<&str>) -> Result<usize> {
        let reap = &self.scripts.reap;
        self.with(|c| {
            let mut n = 0;
            for key in Self::inflight_lists(c)? {
                let Some((worker, queue)) = key
                    .strip_prefix(INFLIGHT)
                    .and_then(|rest| rest.split_once(':'))
                else {
                    continue;
                };
                if only.is_some_and(|w| w != worker) {
                    continue;
                }
                let moved: usize = reap
                    .key(&key)
                    .key(format!("queue:{queue}"))
                    .key(format!("{HEARTBEAT}{worker}"))
                    .arg(queue)
                    .arg(if only.is_some() { "1" } else { "0" })
                    .invoke(c)?;
                n += moved;
            }
            Ok(n)
        })
    }
}

impl Backend for Redis {
    fn describe(&self) -> String {
        self.url.to_string()
    }

    fn enqueue(&self, queue: &str, payloads: &[String]) -> Result<()> {
        self.with(|c| {
            for chunk in payloads.chunks(1000) {
                redis::pipe()
                    .atomic()
                    .cmd("SADD")
                    .arg("queues")
                    .arg(queue)
                    .ignore()
                    .cmd("LPUSH")
                    .arg(format!("queue:{queue}"))
                    .arg(chunk)
                    .ignore()
                    .exec(c)?;
            }
            Ok(())
        })
    }

    fn fetch(&self, worker: &str, queues: &[String], wait: Duration) -> Result<Option<Claimed>> {
        Ok(self.fetch_batch(worker, queues, 1, wait)?.pop())
    }

    fn fetch_batch(
        &self,
        worker: &str,
        queues: &[String],
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Claimed>> {
        {
            // Watch these private lists for orphans from now on.
            let mut h = self.held();
            for q in queues {
                h.lists
                    .entry(inflight_key(worker, q))
                    .or_insert_with(|| (q.clone(), HashMap::new()));
            }
        }
        let got = self.fetch_raw(worker, queues, max, wait)?;
        self.hold(worker, &got);
        Ok(got)
    }

    fn ack(&self, worker: &str, job: &Claimed) -> Result<()> {
        self.ack_batch(worker, std::slice::from_ref(job))
    }

    fn ack_batch(&self, worker: &str, jobs: &[Claimed]) -> Result<()> {
        self.ack_raw(worker, jobs)?;
        self.unhold(worker, jobs);
        Ok(())
    }

    fn retry(&self, worker: &str, job: &Claimed, payload: &str, at: f64) -> Result<()> {
        self.retry_raw(worker, job, payload, at)?;
        self.unhold(worker, std::slice::from_ref(job));
        Ok(())
    }

    fn kill(&self, worker: &str, job: &Claimed, payload: Option<&str>) -> Result<()> {
        self.kill_raw(worker, job, payload)?;
        self.unhold(worker, std::slice::from_ref(job));
        Ok(())
    }

    fn heartbeat(&self, worker: &str, lease: Duration) -> Result<()> {
        self.with(|c| {
            redis::pipe()
                .cmd("SET")
                .arg(format!("{HEARTBEAT}{worker}"))
                .arg(now())
                .arg("PX")
                .arg(lease.as_millis().max(1) as u64)
                .ignore()
                .cmd("SADD")
                .arg(WORKERS)
                .arg(worker)
                .ignore()
                .exec(c)
        })
    }

    fn reap(&self) -> Result<usize> {
        let n = self.return_lists(None)? + self.rescue_orphans()?;
        // Forget workers whose heartbeat is gone (their lists were just returned).
        self.with(|c| {
            let workers: Vec<String> = redis::cmd("SMEMBERS").arg(WORKERS).query(c)?;
            for w in workers {
                let alive: bool = redis::cmd("EXISTS")
                    .arg(format!("{HEARTBEAT}{w}"))
                    .query(c)?;
                if !alive {
                    redis::cmd("SREM").arg(WORKERS).arg(&w).exec(c)?;
                }
            }
            Ok(())
        })?;
        Ok(n)
    }

    fn promote(&self) -> Result<usize> {
        let t = now();
        let mut n = 0;
        for set in ["schedule", "retry"] {
            loop {
                let moved: usize = self.with(|c| self.scripts.promote.key(set).arg(t).invoke(c))?;
                n += moved;
                if moved < 100 {
                    break;
                }
            }
        }
        Ok(n)
    }

    fn claimed_by(&self, worker: &str) -> Result<Vec<Claimed>> {
        let prefix = format!("{INFLIGHT}{worker}:");
        self.with(|c| {
            let mut held = Vec::new();
            for key in Self::inflight_lists(c)? {
                let Some(queue) = key.strip_prefix(&prefix) else {
                    continue;
                };
                let items: Vec<String> = redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query(c)?;
                held.extend(items.into_iter().map(|raw| Claimed {
                    queue: queue.to_string(),
                    raw,
                    token: 0,
                }));
            }
            Ok(held)
        })
    }

    fn release(&self, worker: &str) -> Result<usize> {
        let n = self.return_lists(Some(worker))?;
        let prefix = format!("{INFLIGHT}{worker}:");
        self.held().lists.retain(|k, _| !k.starts_with(&prefix));
        self.with(|c| {
            redis::pipe()
                .cmd("DEL")
                .arg(format!("{HEARTBEAT}{worker}"))
                .ignore()
                .cmd("SREM")
                .arg(WORKERS)
                .arg(worker)
                .ignore()
                .exec(c)
        })?;
        Ok(n)
    }

    fn stats(&self) -> Result<Stats> {
        self.with(|c| {
            let mut s = Stats::default();
            let queues: Vec<String> = redis::cmd("SMEMBERS").arg("queues").query(c)?;
            for q in queues {
                s.enqueued += redis::cmd("LLEN")
                    .arg(format!("queue:{q}"))
                    .query::<u64>(c)?;
            }
            for key in Self::inflight_lists(c)? {
                s.busy += redis::cmd("LLEN").arg(&key).query::<u64>(c)?;
            }
            let get = |c: &mut Connection, k: &str| -> redis::RedisResult<u64> {
                let v: Option<String> = redis::cmd("GET").arg(k).query(c)?;
                Ok(v.and_then(|v| v.parse().ok()).unwrap_or(0))
            };
            s.processed = get(c, "stat:processed")?;
            s.failed = get(c, "stat:failed")?;
            s.retry = redis::cmd("ZCARD").arg("retry").query(c)?;
            s.dead = redis::cmd("ZCARD").arg("dead").query(c)?;
            let workers: Vec<String> = redis::cmd("SMEMBERS").arg(WORKERS).query(c)?;
            for w in workers {
                let alive: bool = redis::cmd("EXISTS")
                    .arg(format!("{HEARTBEAT}{w}"))
                    .query(c)?;
                s.workers_alive += alive as u64;
            }
            Ok(s)
        })
    }

    fn list(&self, set: FailedSet, limit: usize) -> Result<Vec<String>> {
        if limit == 0 {
            return Ok(vec![]);
        }
        self.with(|c| {
            redis::cmd("ZRANGE")
                .arg(set.name())
                .arg(0)
                .arg(limit as i64 - 1)
                .query(c)
        })
    }

    fn forget_queue(&self, queue: &str) -> Result<()> {
        let n: u64 = self.with(|c| redis::cmd("LLEN").arg(format!("queue:{queue}")).query(c))?;
        if n == 0 {
            self.with(|c| redis::cmd("SREM").arg("queues").arg(queue).exec(c))?;
        }
        Ok(())
    }

    fn requeue(&self, set: FailedSet) -> Result<usize> {
        let mut n = 0;
        loop {
            let moved: usize =
                self.with(|c| self.scripts.promote.key(set.name()).arg("+inf").invoke(c))?;
            n += moved;
            if moved < 100 {
                return Ok(n);
            }
        }
    }
}

/// A connection to `client`'s server: 3 s to connect, 10 s for each reply (the queue's and
/// the hub's, which is the same engine).
pub(crate) fn connect(client: &redis::Client) -> redis::RedisResult<Connection> {
    let c = client.get_connection_with_timeout(Duration::from_secs(3))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    c.set_write_timeout(Some(Duration::from_secs(10)))?;
    Ok(c)
}
