//! Background jobs: Sidekiq's job format, one [`Backend`] trait with three backends
//! (`memory`, `sqlite`, `redis`), the worker loop with retries and the dead set, and the
//! `concur jobs` commands.
//!
//! Semantics of the durable backends (`sqlite`, `redis`): at-least-once. A job is removed from
//! the queue only by its acknowledgement, after it ran; a worker that dies holding jobs has
//! them returned to their queue by another worker's reaper (an expired lease in SQLite, a
//! private in-flight list whose owner's heartbeat key expired in Redis), so a job may run more
//! than once but is never lost. The `memory` backend lives in one process and loses every
//! queued job when that process ends (Sucker Punch's trade).
//!
//! Timestamps: we write Sidekiq 6.x's float epoch seconds (`created_at`, `enqueued_at`,
//! `failed_at`, `retried_at`) and read both those and Sidekiq 8.x's integer epoch
//! milliseconds (any number above 10^11 is taken as milliseconds: 10^11 seconds is the year
//! 5138).

mod backend_url;
pub(crate) mod memory;
pub(crate) mod process;
pub(crate) mod redis;
pub mod slots;
pub(crate) mod sqlite;
pub mod supervisor;
pub mod worker;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::base::error::Result;

pub use backend_url::{BackendUrl, RedisUrl, SqliteSync, BACKEND_ENV, BACKEND_URLS, REDIS_URLS};

/// The class of jobs that run one task of a workload: args `[workload_spec, index]`.
pub const TASK_CLASS: &str = "Concur::Task";
/// The class of jobs that do nothing (for throughput measurements).
pub const NOOP_CLASS: &str = "Concur::Noop";
/// The class given to a dead-set entry made from a payload that did not parse as a job.
pub const MALFORMED_CLASS: &str = "Concur::MalformedJob";
/// Retries a job gets when its `retry` is `true` (Sidekiq's default).
pub const DEFAULT_RETRIES: u32 = 25;
/// The dead set keeps at most this many jobs (Sidekiq's cap)...
pub const DEAD_MAX_JOBS: usize = 10_000;
/// ...for at most this long (Sidekiq's 6 months).
pub const DEAD_TIMEOUT: Duration = Duration::from_secs(180 * 24 * 3600);
/// The queue used when none is named.
pub const DEFAULT_QUEUE: &str = "default";
/// The largest job payload a worker parses, in bytes. A job comes from whoever can write to
/// the queue, so its size is checked before `serde_json` allocates anything for it; a larger
/// one goes to the dead set with the reason. 64 KiB is over a hundred times our own jobs
/// (about 200 bytes) and Sidekiq's advice to pass ids, not data, as arguments.
pub const MAX_PAYLOAD: usize = 64 << 10;
/// How much of an oversized payload its dead-set entry keeps (the rest is dropped).
pub(crate) const OVERSIZED_KEPT: usize = 1 << 10;

/// Now, in float epoch seconds (Sidekiq 6.x's format).
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A random 64-bit number (SipHash of a counter under a random key: unique and uniform
/// enough for ids and jitter, without a dependency).
pub fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one((COUNTER.fetch_add(1, Ordering::Relaxed), std::process::id()))
}

/// A new job id: 24 hex characters, as Sidekiq's `SecureRandom.hex(12)`.
pub fn new_jid() -> String {
    format!(
        "{:016x}{:08x}",
        random_u64(),
        (random_u64() & 0xffff_ffff) as u32
    )
}

/// Reads a timestamp written as float seconds (Sidekiq 6.x) or integer milliseconds (8.x).
/// Milliseconds past 1e14 (the year 5138) are refused: divided by 1000 they would still read
/// as milliseconds, so a job written back would change its times at every reading.
pub fn read_timestamp(v: &Value) -> Option<f64> {
    let x = v.as_f64()?;
    match x {
        x if x > 1e14 => None,
        x if x > 1e11 => Some(x / 1000.0),
        x => Some(x),
    }
}

fn de_time<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    let v = Value::deserialize(d)?;
    read_timestamp(&v).ok_or_else(|| serde::de::Error::custom(format!("bad timestamp {v}")))
}

fn de_opt_time<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(read_timestamp))
}

fn default_retry() -> Value {
    Value::Bool(true)
}

/// One job in Sidekiq's JSON format. Fields we do not know are kept as they were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// What runs it: [`TASK_CLASS`], [`NOOP_CLASS`], or a class of someone else's workers.
    pub class: String,
    /// The arguments; for [`TASK_CLASS`], `[workload_spec, index]`.
    pub args: Vec<Value>,
    /// The job id, 24 hex characters.
    pub jid: String,
    /// The queue it belongs to.
    pub queue: String,
    /// `true` (25 retries), `false` (none, and no dead set), or a number of retries.
    #[serde(default = "default_retry")]
    pub retry: Value,
    /// When the job was created (epoch seconds).
    #[serde(deserialize_with = "de_time")]
    pub created_at: f64,
    /// When it was last pushed onto its queue (epoch seconds).
    #[serde(
        default,
        deserialize_with = "de_opt_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub enqueued_at: Option<f64>,
    /// Failures so far minus one (absent before the first failure), as Sidekiq counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<u32>,
    /// The last failure's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The last failure's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// When it first failed.
    #[serde(
        default,
        deserialize_with = "de_opt_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub failed_at: Option<f64>,
    /// When it last failed again.
    #[serde(
        default,
        deserialize_with = "de_opt_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub retried_at: Option<f64>,
    /// Every other field, kept for interoperability.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl Job {
    /// A new job of `class` with `args` for `queue`.
    pub fn new(class: &str, args: Vec<Value>, queue: &str) -> Self {
        let t = now();
        Job {
            class: class.into(),
            args,
            jid: new_jid(),
            queue: queue.into(),
            retry: default_retry(),
            created_at: t,
            enqueued_at: Some(t),
            retry_count: None,
            error_message: None,
            error_class: None,
            failed_at: None,
            retried_at: None,
            extra: Default::default(),
        }
    }

    /// A job that runs task `index` of `workload`.
    pub fn task(workload: &str, index: usize, queue: &str) -> Self {
        Job::new(TASK_CLASS, vec![workload.into(), index.into()], queue)
    }

    /// Parses a payload of at most [`MAX_PAYLOAD`] bytes; the error says what is wrong with it.
    pub fn parse(raw: &str) -> std::result::Result<Job, String> {
        check_size(raw)?;
        let job: Job = serde_json::from_str(raw).map_err(|e| e.to_string())?;
        if job.class.is_empty() {
            return Err("empty class".into());
        }
        Ok(job)
    }

    /// The payload, as JSON.
    pub fn to_json(&self) -> String {
        // A Job is maps, strings and numbers: serialising it cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// How many times a failing job is retried before the dead set (`None`: never retried and
    /// not kept, Sidekiq's `retry: false`).
    pub fn max_retries(&self) -> Option<u32> {
        match &self.retry {
            Value::Bool(false) => None,
            Value::Number(n) => Some(n.as_u64().map_or(0, |n| n.min(u32::MAX as u64) as u32)),
            _ => Some(DEFAULT_RETRIES),
        }
    }
}

/// Refuses a payload over [`MAX_PAYLOAD`] bytes, before anything parses it.
pub fn check_size(raw: &str) -> std::result::Result<(), String> {
    if raw.len() > MAX_PAYLOAD {
        return Err(format!(
            "payload of {} bytes is over the {} KiB limit",
            raw.len(),
            MAX_PAYLOAD >> 10
        ));
    }
    Ok(())
}

/// The dead-set entry for a payload that is not a job: the payload is kept (as the only
/// argument when it is not a JSON object) with the parse error. A payload over
/// [`MAX_PAYLOAD`] is not parsed: its first KiB is kept as the argument.
pub fn malformed_entry(raw: &str, queue: &str, error: &str) -> String {
    let t = now();
    let parsed = match check_size(raw) {
        Ok(()) => serde_json::from_str::<Value>(raw).ok(),
        Err(_) => None,
    };
    let mut obj = match parsed {
        Some(Value::Object(m)) => m,
        _ => {
            let mut kept = raw.len().min(OVERSIZED_KEPT);
            while !raw.is_char_boundary(kept) {
                kept -= 1;
            }
            let mut m = serde_json::Map::new();
            m.insert("class".into(), MALFORMED_CLASS.into());
            m.insert("args".into(), Value::Array(vec![raw[..kept].into()]));
            m
        }
    };
    obj.entry("jid").or_insert_with(|| fallback_jid(raw).into());
    obj.entry("queue").or_insert_with(|| queue.into());
    obj.insert("error_class".into(), "Concur::ParseError".into());
    obj.insert("error_message".into(), error.into());
    obj.insert("failed_at".into(), t.into());
    Value::Object(obj).to_string()
}

/// The job id given to a refused payload that has none: derived from the payload (24 hex
/// characters), so that the line that reports it and its dead-set entry name the same id.
pub fn fallback_jid(raw: &str) -> String {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let h = BuildHasherDefault::<DefaultHasher>::default();
    format!(
        "{:016x}{:08x}",
        h.hash_one(raw),
        h.hash_one((raw, 1u8)) as u32
    )
}

/// When the `count`-th retry (0-based) of a failed job runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetrySchedule {
    /// Sidekiq 6.x: `count^4 + 15 + rand(10) * (count + 1)` seconds from now.
    Sidekiq,
    /// A fixed delay (for tests and demonstrations).
    Fixed(Duration),
}

impl RetrySchedule {
    /// The delay before retry number `count` (0 for the first).
    pub fn delay(&self, count: u32) -> Duration {
        match self {
            RetrySchedule::Fixed(d) => *d,
            RetrySchedule::Sidekiq => {
                let c = count as u64;
                let jitter = random_u64() % 10;
                Duration::from_secs(c.pow(4) + 15 + jitter * (c + 1))
            }
        }
    }
}

/// The two sorted sets of failed jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailedSet {
    /// Failed jobs waiting for their next try.
    Retry,
    /// Jobs out of retries, or malformed.
    Dead,
}

impl FailedSet {
    /// The set's name (also its Redis key).
    pub fn name(self) -> &'static str {
        match self {
            FailedSet::Retry => "retry",
            FailedSet::Dead => "dead",
        }
    }
}

/// A job a worker holds: it stays the worker's until acknowledged, failed or returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claimed {
    /// The queue it came from.
    pub queue: String,
    /// The payload exactly as stored.
    pub raw: String,
    /// The backend's handle on it (a row id; unused by Redis).
    pub token: i64,
    /// Set when the backend refused the payload where it is stored (Redis: one over
    /// [`MAX_PAYLOAD`], moved to the dead set by the fetch itself, so that its bytes never
    /// reach the worker): `raw` is then its dead-set entry, and this the reason. The job is
    /// no longer held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// A queue's counts (`concur jobs stats`; the JSON uses these names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Jobs waiting in queues.
    pub enqueued: u64,
    /// Jobs claimed by a worker and not yet acknowledged.
    pub busy: u64,
    /// Jobs acknowledged (ran successfully), ever.
    pub processed: u64,
    /// Failures, ever (a job failing three times counts three).
    pub failed: u64,
    /// Jobs waiting for a retry.
    pub retry: u64,
    /// Jobs in the dead set.
    pub dead: u64,
    /// Worker processes with a live heartbeat.
    pub workers_alive: u64,
}

/// A job queue. Workers identify themselves by a worker id (one per worker process).
pub trait Backend: Send + Sync {
    /// Where it is, for messages (`memory`, `sqlite:PATH`, `redis://...` with its password
    /// masked).
    fn describe(&self) -> String;
    /// Pushes payloads onto `queue`, in order.
    fn enqueue(&self, queue: &str, payloads: &[String]) -> Result<()>;
    /// Claims the next job of the first non-empty queue of `queues`, waiting up to `wait`.
    fn fetch(&self, worker: &str, queues: &[String], wait: Duration) -> Result<Option<Claimed>>;
    /// Claims up to `max` jobs of the first non-empty queue of `queues` at once, in their
    /// order, waiting up to `wait` for one (a worker that runs short jobs claims them in
    /// batches: one round trip or transaction for many jobs).
    fn fetch_batch(
        &self,
        worker: &str,
        queues: &[String],
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Claimed>> {
        let _ = max;
        Ok(self.fetch(worker, queues, wait)?.into_iter().collect())
    }
    /// The job ran: remove it and count it processed, atomically.
    fn ack(&self, worker: &str, job: &Claimed) -> Result<()>;
    /// These jobs ran: remove them and count them processed (in one round trip or
    /// transaction where the backend can).
    fn ack_batch(&self, worker: &str, jobs: &[Claimed]) -> Result<()> {
        jobs.iter().try_for_each(|j| self.ack(worker, j))
    }
    /// The job failed: replace it by `payload` in the retry set, due at `at` (epoch seconds).
    fn retry(&self, worker: &str, job: &Claimed, payload: &str, at: f64) -> Result<()>;
    /// The job failed for good: replace it by `payload` in the dead set (`None`: drop it,
    /// Sidekiq's `retry: false`).
    fn kill(&self, worker: &str, job: &Claimed, payload: Option<&str>) -> Result<()>;
    /// The worker is alive: renew its leases or heartbeat for `lease`.
    fn heartbeat(&self, worker: &str, lease: Duration) -> Result<()>;
    /// Returns the jobs of workers whose lease or heartbeat expired to their queues; returns
    /// how many.
    fn reap(&self) -> Result<usize>;
    /// Moves retries (and scheduled jobs) that are due onto their queues; returns how many.
    fn promote(&self) -> Result<usize>;
    /// The worker stops: its unacknowledged jobs go back to their queues; returns how many.
    fn release(&self, worker: &str) -> Result<usize>;
    /// The jobs `worker` holds now (claimed, not yet acknowledged), oldest claim first: what
    /// a supervisor finds in the hands of a worker process that died.
    fn claimed_by(&self, worker: &str) -> Result<Vec<Claimed>>;
    /// The counts.
    fn stats(&self) -> Result<Stats>;
    /// Up to `limit` payloads of a failed set, oldest first.
    fn list(&self, set: FailedSet, limit: usize) -> Result<Vec<String>>;
    /// Moves every job of a failed set back onto its queue now; returns how many.
    fn requeue(&self, set: FailedSet) -> Result<usize>;
    /// Forgets an empty queue that was made for one run (Redis lists it in `queues`).
    fn forget_queue(&self, _queue: &str) -> Result<()> {
        Ok(())
    }
}

/// How long a lease (SQLite) or heartbeat key (Redis) lasts unless renewed: far longer than
/// any lock wait, so a live worker never loses its jobs.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The default SQLite file.
pub fn default_sqlite_path() -> PathBuf {
    PathBuf::from(crate::os::files::RESULTS_DIR).join("jobs.sqlite")
}

/// Opens a backend (see [`BackendUrl`]). An unreachable server is a usage error.
pub fn open(url: &BackendUrl) -> Result<Arc<dyn Backend>> {
    Ok(match url {
        BackendUrl::Memory => Arc::new(memory::Memory::new()),
        BackendUrl::Sqlite(None, sync) => {
            Arc::new(sqlite::Sqlite::open(&default_sqlite_path(), *sync)?)
        }
        BackendUrl::Sqlite(Some(path), sync) => Arc::new(sqlite::Sqlite::open(path, *sync)?),
        BackendUrl::Redis(u) => Arc::new(redis::Redis::open(u)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_over_the_cap_is_refused_before_it_is_parsed() {
        let job = Job::task("fib:5", 0, "q");
        let mut big = job.clone();
        big.args = vec!["x".repeat(MAX_PAYLOAD).into(), 0.into()];
        let raw = big.to_json();
        let e = Job::parse(&raw).unwrap_err();
        assert!(e.contains("over the 64 KiB limit"), "{e}");
        // Whitespace counts too: the cap is on bytes, before any parsing.
        let padded = format!("{}{}", job.to_json(), " ".repeat(MAX_PAYLOAD));
        assert!(Job::parse(&padded).unwrap_err().contains("64 KiB"));
        assert!(Job::parse(&job.to_json()).is_ok());
        // Its dead-set entry keeps a first KiB, not the payload.
        let entry: Value = serde_json::from_str(&malformed_entry(&raw, "q", &e)).unwrap();
        assert_eq!(entry["class"], MALFORMED_CLASS);
        assert_eq!(entry["args"][0].as_str().unwrap().len(), OVERSIZED_KEPT);
        assert_eq!(entry["error_message"], e.as_str());
    }

    #[test]
    fn timestamps_read_the_same_when_written_back() {
        // Found by the `job` fuzz target: 1.767e20 "milliseconds" read as 1.767e17, which
        // written back read as 1.767e14, and so on at every retry.
        let raw = r#"{"class":"Concur::Noop","args":[],"jid":"a","queue":"q","created_at":176722560012225600125}"#;
        assert!(Job::parse(raw).unwrap_err().contains("bad timestamp"));
        let ms = r#"{"class":"Concur::Noop","args":[],"jid":"a","queue":"q","created_at":1767225600125}"#;
        let job = Job::parse(ms).unwrap();
        assert_eq!(job.created_at, 1767225600.125);
        assert_eq!(Job::parse(&job.to_json()).unwrap(), job);
        // Found by the same target: without serde_json's float_roundtrip, this time read back
        // one unit in the last place off once written (…1767225 read as …1767223).
        let long = r#"{"class":"Concur::Noop","args":[],"jid":"a","queue":"q","created_at":1,"failed_at":1767225601.17672256001}"#;
        let job = Job::parse(long).unwrap();
        assert_eq!(Job::parse(&job.to_json()).unwrap(), job);
    }

    #[test]
    fn jobs_round_trip_and_keep_unknown_fields() {
        let j = Job::task("fib:5", 3, "default");
        assert_eq!(j.jid.len(), 24);
        assert!(j.jid.chars().all(|c| c.is_ascii_hexdigit()));
        // serde_json may parse a float one unit in the last place off: compare the rest.
        let back = Job::parse(&j.to_json()).unwrap();
        assert!((back.created_at - j.created_at).abs() < 1e-6);
        assert_eq!(
            (&back.jid, &back.args, &back.class),
            (&j.jid, &j.args, &j.class)
        );
        let raw = r#"{"class":"X","args":[1],"jid":"abc","queue":"q","retry":3,"created_at":1700000000123,"enqueued_at":1700000000.5,"bid":"b1"}"#;
        let j = Job::parse(raw).unwrap();
        assert!((j.created_at - 1_700_000_000.123).abs() < 1e-6, "8.x ms");
        assert_eq!(j.enqueued_at, Some(1_700_000_000.5), "6.x seconds");
        assert_eq!(j.max_retries(), Some(3));
        assert_eq!(j.extra["bid"], "b1");
        assert!(j.to_json().contains("\"bid\":\"b1\""));
    }

    #[test]
    fn malformed_payloads_are_kept_with_their_error() {
        let e = Job::parse("not json").unwrap_err();
        let d: Value = serde_json::from_str(&malformed_entry("not json", "q", &e)).unwrap();
        assert_eq!(d["args"][0], "not json");
        assert_eq!(d["error_class"], "Concur::ParseError");
        assert!(Job::parse(r#"{"class":"X"}"#).is_err());
    }

    #[test]
    fn sidekiq_backoff() {
        for c in 0..5u32 {
            let d = RetrySchedule::Sidekiq.delay(c).as_secs();
            let base = (c as u64).pow(4) + 15;
            assert!(d >= base && d <= base + 9 * (c as u64 + 1), "{c}: {d}");
        }
    }
}
