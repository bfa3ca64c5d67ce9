//! The `redis` backend: Sidekiq's key layout and job JSON, with reliable fetch.
//!
//! Keys shared with Sidekiq: `queues` (set of queue names), `queue:NAME` (lists; clients
//! `LPUSH`, consumers take from the right), `schedule`, `retry` and `dead` (sorted sets scored
//! by epoch seconds), `stat:processed` and `stat:failed` (counters). Sidekiq clients can
//! enqueue for our workers and our client for Sidekiq's.
//!
//! Our own keys: a worker claims jobs by moving them into a private list,
//! `concur:inflight:WORKER:NAME` (Sidekiq's open-source `BRPOP` loses the job of a worker that
//! dies): a batch of up to N in one Lua script of `LMOVE`s, or, when the queue is empty, one
//! job with a blocking `BLMOVE` into `concur:landing:WORKER:NAME`, from which the same script,
//! sent with it, moves it on (the `BLMOVE`'s own reply skipped: `CLIENT REPLY SKIP`). So a
//! payload over [`MAX_PAYLOAD`] never reaches the worker: the script moves it to the dead set
//! with its first KiB and the reason and returns only that entry (a 286 MB payload would
//! otherwise be read whole, and copied, before it could be refused). It keeps
//! `concur:hb:WORKER` alive with a TTL and is listed in `concur:workers`. Acknowledgement is one Lua script per batch (`LREM` of each job from
//! the private list and `INCRBY stat:processed`), as are failures and the poller that moves
//! due retries and scheduled jobs onto their queues. The reaper
//! returns every private (and landing) list whose worker's heartbeat key expired to the front
//! (right end) of its queue, in one script that checks the heartbeat again.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use redis::{Connection, ConnectionLike, Script};

use super::{
    now, Backend, Claimed, FailedSet, RedisUrl, Stats, BACKEND_URLS, DEAD_MAX_JOBS, DEAD_TIMEOUT,
    MALFORMED_CLASS, MAX_PAYLOAD, OVERSIZED_KEPT,
};
use crate::base::error::{Error, Result};

const INFLIGHT: &str = "concur:inflight:";
const LANDING: &str = "concur:landing:";
const HEARTBEAT: &str = "concur:hb:";
const WORKERS: &str = "concur:workers";

fn inflight_key(worker: &str, queue: &str) -> String {
    format!("{INFLIGHT}{worker}:{queue}")
}

/// Where a worker's blocking wait on an empty queue puts the job it took, for the claim script
/// that follows it.
fn landing_key(worker: &str, queue: &str) -> String {
    format!("{LANDING}{worker}:{queue}")
}

/// Acknowledges a batch: KEYS[i] is the private list holding ARGV[i].
const ACK: &str = r"
local n = 0
for i = 1, #ARGV do n = n + redis.call('LREM', KEYS[i], -1, ARGV[i]) end
if n > 0 then redis.call('INCRBY', 'stat:processed', n) end
return n";

/// Claims up to ARGV[1] jobs of the first non-empty source: KEYS are the sources (queues, or a
/// landing list), then their private lists in the same order; ARGV[1 + i] names source i's
/// queue. Returns the source's position (from 1, `0` for none), the jobs, and the refused
/// payloads as (dead-set entry, reason). A payload over [`MAX_PAYLOAD`] is not returned: it
/// goes to the dead set here with its first [`OVERSIZED_KEPT`] bytes (bytes that are not
/// UTF-8 shown as `?`) and the reason the worker would give, as [`super::malformed_entry`]
/// writes it, its id derived from what it kept.
fn claim_script() -> String {
    format!(
        r"
local nq = #KEYS / 2
local max = tonumber(ARGV[1])
local function utf8(s)
  local out, i, n = {{}}, 1, #s
  while i <= n do
    local c = string.byte(s, i)
    local len, lo, hi = 0, 0x80, 0xBF
    if c < 0x80 then len = 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then
      len = 3
      if c == 0xE0 then lo = 0xA0 elseif c == 0xED then hi = 0x9F end
    elseif c >= 0xF0 and c <= 0xF4 then
      len = 4
      if c == 0xF0 then lo = 0x90 elseif c == 0xF4 then hi = 0x8F end
    end
    local ok = len > 0 and i + len - 1 <= n
    for k = 1, len - 1 do
      if not ok then break end
      local d = string.byte(s, i + k)
      if k == 1 then ok = d >= lo and d <= hi else ok = d >= 0x80 and d <= 0xBF end
    end
    if ok then
      out[#out + 1] = string.sub(s, i, i + len - 1)
      i = i + len
    else
      out[#out + 1] = '?'
      i = i + 1
    end
  end
  return table.concat(out)
end
local function refuse(job, queue)
  local head = string.sub(job, 1, {kept})
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  local why = string.format('payload of %d bytes is over the {cap_kib} KiB limit', #job)
  local entry = cjson.encode({{
    class = '{malformed}', args = {{utf8(head)}},
    jid = string.sub(redis.sha1hex(head .. '\0' .. #job), 1, 24), queue = queue,
    error_class = 'Concur::ParseError', error_message = why, failed_at = now
  }})
  redis.call('ZADD', 'dead', now, entry)
  redis.call('ZREMRANGEBYSCORE', 'dead', '-inf', now - {dead_timeout})
  redis.call('ZREMRANGEBYRANK', 'dead', 0, -({dead_max} + 1))
  redis.call('INCR', 'stat:failed')
  return {{entry, why}}
end
for i = 1, nq do
  local jobs, refused = {{}}, {{}}
  for _ = 1, max do
    local job = redis.call('LMOVE', KEYS[i], KEYS[nq + i], 'RIGHT', 'LEFT')
    if not job then break end
    if #job > {cap} then
      redis.call('LTRIM', KEYS[nq + i], 1, -1)
      refused[#refused + 1] = refuse(job, ARGV[1 + i])
    else
      jobs[#jobs + 1] = job
    end
  end
  if #jobs + #refused > 0 then return {{tostring(i), jobs, refused}} end
end
return {{'0', {{}}, {{}}}}",
        kept = OVERSIZED_KEPT,
        cap = MAX_PAYLOAD,
        cap_kib = MAX_PAYLOAD >> 10,
        malformed = MALFORMED_CLASS,
        dead_timeout = DEAD_TIMEOUT.as_secs(),
        dead_max = DEAD_MAX_JOBS,
    )
}

/// What the claim script returns: the source's position, the jobs, the refused payloads.
type ClaimReply = (String, Vec<String>, Vec<(String, String)>);

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
    /// landing list → queue: those this process's workers waited on.
    landings: HashMap<String, String>,
}

/// A Sidekiq-compatible queue on a Redis server.
pub struct Redis {
    held: Mutex<Held>,
    url: RedisUrl,
    client: redis::Client,
    pool: Mutex<Vec<Connection>>,
    scripts: Scripts,
    /// The claim script's text, sent after a blocking wait (`EVAL`: nothing to reload).
    claim_text: String,
    /// Whether the server skips a reply when asked (`CLIENT REPLY SKIP`): the blocking wait
    /// then takes no payload to the worker; without it (a proxy, an ACL), the wait's `BLMOVE`
    /// returns the job as it is, and an oversized one is refused after it was read.
    skips_replies: bool,
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
        let claim_text = claim_script();
        let mut r = Redis {
            url: url.clone(),
            client,
            pool: Mutex::new(Vec::new()),
            held: Mutex::new(Held::default()),
            scripts: Scripts {
                ack: Script::new(ACK),
                claim: Script::new(&claim_text),
                retry: Script::new(RETRY),
                kill: Script::new(KILL),
                promote: Script::new(PROMOTE),
                reap: Script::new(REAP),
                rescue: Script::new(RESCUE),
            },
            claim_text,
            skips_replies: false,
        };
        let mut c = r.connect().map_err(unreachable)?;
        redis::cmd("PING")
            .query::<String>(&mut c)
            .map_err(unreachable)?;
        r.skips_replies = skips_replies(&mut c);
        // A server that did not skip has replies still to come on this connection.
        if r.skips_replies {
            r.put(c);
        }
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
        // A refused payload is in the dead set already, not in a private list.
        for c in jobs.iter().filter(|c| c.refused.is_none()) {
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
    /// And whatever this process's landing lists hold goes back to the front of its queue: a
    /// job lands there only for the moment between a wait's `BLMOVE` and the claim script
    /// sent with it, so one found there was left by a wait whose reply never came (the script
    /// that then finds its landing list empty claims nothing; the job runs from its queue).
    fn rescue_orphans(&self) -> Result<usize> {
        let landings: Vec<(String, String)> = self
            .held()
            .landings
            .iter()
            .map(|(k, q)| (k.clone(), q.clone()))
            .collect();
        let mut n = 0;
        for (landing, queue) in landings {
            let moved: usize = self.with(|c| {
                self.scripts
                    .reap
                    .key(&landing)
                    .key(format!("queue:{queue}"))
                    // (The heartbeat's place: not looked at when forced.)
                    .key(&landing)
                    .arg(&queue)
                    .arg("1")
                    .invoke(c)
            })?;
            n += moved;
        }
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
            claim.arg(max.max(1));
            for q in queues {
                claim.arg(q);
            }
            let got = claimed(queues, claim.invoke(c)?);
            let Some(q) = queues.first() else {
                return Ok(got);
            };
            if !got.is_empty() || wait.is_zero() {
                return Ok(got);
            }
            c.set_read_timeout(Some(wait + Duration::from_secs(5)))?;
            let got = if self.skips_replies {
                let landing = landing_key(worker, q);
                self.held().landings.insert(landing.clone(), q.clone());
                // The wait's reply (the payload) is skipped; the claim script that follows
                // takes the job from the landing list as it takes one from a queue.
                let mut sent = redis::cmd("CLIENT")
                    .arg("REPLY")
                    .arg("SKIP")
                    .get_packed_command();
                sent.extend(
                    redis::cmd("BLMOVE")
                        .arg(format!("queue:{q}"))
                        .arg(&landing)
                        .arg("RIGHT")
                        .arg("LEFT")
                        .arg(wait.as_secs_f64())
                        .get_packed_command(),
                );
                sent.extend(
                    redis::cmd("EVAL")
                        .arg(&self.claim_text)
                        .arg(2)
                        .arg(&landing)
                        .arg(inflight_key(worker, q))
                        .arg(1)
                        .arg(q)
                        .get_packed_command(),
                );
                let reply = c.req_packed_commands(&sent, 0, 1)?;
                let reply = reply.into_iter().next().unwrap_or(redis::Value::Nil);
                let reply = redis::from_redis_value(reply.extract_error()?)?;
                claimed(std::slice::from_ref(q), reply)
            } else {
                let raw: Option<String> = redis::cmd("BLMOVE")
                    .arg(format!("queue:{q}"))
                    .arg(inflight_key(worker, q))
                    .arg("RIGHT")
                    .arg("LEFT")
                    .arg(wait.as_secs_f64())
                    .query(c)?;
                raw.map(|raw| Claimed {
                    queue: q.clone(),
                    raw,
                    token: 0,
                    refused: None,
                })
                .into_iter()
                .collect()
            };
            c.set_read_timeout(Some(Duration::from_secs(10)))?;
            Ok(got)
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
        Self::lists(c, INFLIGHT)
    }

    /// The keys matching `prefix` then anything (a `SCAN` pattern: private or landing lists).
    fn lists(c: &mut Connection, prefix: &str) -> redis::RedisResult<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{prefix}*"))
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

    /// Returns private and landing lists to their queues: all of `only`'s when given
    /// (forced), else every list whose worker's heartbeat expired.
    fn return_lists(&self, only: Option<&str>) -> Result<usize> {
        let reap = &self.scripts.reap;
        self.with(|c| {
            let mut n = 0;
            // One scan for both kinds (`concur:inflight:…` and `concur:landing:…`).
            for key in Self::lists(c, "concur:[il]")? {
                let Some((worker, queue)) = key
                    .strip_prefix(INFLIGHT)
                    .or_else(|| key.strip_prefix(LANDING))
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
                    refused: None,
                }));
            }
            Ok(held)
        })
    }

    fn release(&self, worker: &str) -> Result<usize> {
        let n = self.return_lists(Some(worker))?;
        let prefix = format!("{INFLIGHT}{worker}:");
        let landing = format!("{LANDING}{worker}:");
        let mut held = self.held();
        held.lists.retain(|k, _| !k.starts_with(&prefix));
        held.landings.retain(|k, _| !k.starts_with(&landing));
        drop(held);
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

/// The jobs of a claim script's reply, from `queues` (the sources it was given, in order):
/// refused payloads as already dead-set entries ([`Claimed::refused`]).
fn claimed(queues: &[String], (at, jobs, refused): ClaimReply) -> Vec<Claimed> {
    let Some(q) = at
        .parse::<usize>()
        .ok()
        .and_then(|i| queues.get(i.wrapping_sub(1)))
    else {
        return Vec::new();
    };
    let refused = refused.into_iter().map(|(entry, why)| Claimed {
        queue: q.clone(),
        raw: entry,
        token: 0,
        refused: Some(why),
    });
    let jobs = jobs.into_iter().map(|raw| Claimed {
        queue: q.clone(),
        raw,
        token: 0,
        refused: None,
    });
    refused.chain(jobs).collect()
}

/// Whether the server behind `c` skips the reply of the command after `CLIENT REPLY SKIP`
/// (Redis 3.2 and later; a proxy or an ACL may refuse it). When it does not, `c` has replies
/// still to come and must be dropped.
fn skips_replies(c: &mut Connection) -> bool {
    let mut sent = redis::cmd("CLIENT")
        .arg("REPLY")
        .arg("SKIP")
        .get_packed_command();
    sent.extend(redis::cmd("ECHO").arg("skipped").get_packed_command());
    sent.extend(redis::cmd("ECHO").arg("answered").get_packed_command());
    matches!(
        c.req_packed_commands(&sent, 0, 1).as_deref(),
        Ok([redis::Value::BulkString(b)]) if b == b"answered"
    )
}

/// A connection to `client`'s server: 3 s to connect, 10 s for each reply (the queue's and
/// the hub's, which is the same engine).
pub(crate) fn connect(client: &redis::Client) -> redis::RedisResult<Connection> {
    let c = client.get_connection_with_timeout(Duration::from_secs(3))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    c.set_write_timeout(Some(Duration::from_secs(10)))?;
    Ok(c)
}
