//! The worker: threads that fetch, perform and acknowledge jobs, a housekeeping thread that
//! keeps the worker's heartbeat (lease renewal) on its own thread, reaps dead workers' jobs
//! and promotes due retries, and graceful shutdown that returns unfinished jobs.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::slots::JobSlots;
use super::{
    malformed_entry, now, Backend, Claimed, Job, RetrySchedule, DEFAULT_LEASE, DEFAULT_QUEUE,
    NOOP_CLASS, TASK_CLASS,
};
use crate::base::error::{Error, Result};
use crate::measure::{mono_ns, TaskError, TaskRecord};
use crate::workload::outside::{self, Allowed};
use crate::workload::{self, guarded_run, Workload, WorkloadOptions};

/// What performing one job came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Performed {
    /// It ran; the bytes it produced.
    Ok(u64),
    /// It failed: the error's kind (Sidekiq's `error_class`) and message. It is retried.
    Failed(String, String),
    /// Its arguments cannot be run (not retried: straight to the dead set with this reason).
    Malformed(String),
}

/// A new worker id: the pid and 12 random hex digits (no `:`, which our Redis keys use).
pub fn new_worker_id() -> String {
    format!(
        "{}-{:012x}",
        std::process::id(),
        super::random_u64() & 0xffff_ffff_ffff
    )
}

/// The most parsed workloads a [`Performer`] keeps: the specs come from the queue, so a
/// writer could send a new one with every job; when the cache is full it is emptied (a worker
/// that runs a handful of specs, the usual case, keeps them all; one fed a stream of distinct
/// specs parses each, as it would have without a cache).
pub const SPEC_CACHE_MAX: usize = 64;

/// Runs the jobs this crate knows: [`TASK_CLASS`] (`[workload_spec, index]`) and
/// [`NOOP_CLASS`]; parsed workloads are cached by spec (at most [`SPEC_CACHE_MAX`]). A job's spec comes from whoever can
/// write to the queue, so it is held to what the worker's operator allows
/// ([`outside::check`]: no commands without `--allow-commands`, no files, no local targets
/// unless listed) before it is parsed; a `jobs-procs` worker runs its own run's spec only.
pub struct Performer<'a> {
    options: &'a WorkloadOptions,
    allowed: &'a Allowed,
    only: Option<&'a str>,
    cache: Mutex<HashMap<String, Arc<dyn Workload>>>,
}

impl<'a> Performer<'a> {
    /// A performer whose workloads read `options`, held to `allowed`; with `only`, every job
    /// must name that spec (the worker of one run, whose recipe carries it).
    pub fn new(options: &'a WorkloadOptions, allowed: &'a Allowed, only: Option<&'a str>) -> Self {
        Performer {
            options,
            allowed,
            only,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The workload and index a task job names, or why it cannot run.
    pub fn task_of(&self, job: &Job) -> std::result::Result<(Arc<dyn Workload>, usize), String> {
        let (spec, index) = match job.args.as_slice() {
            [Value::String(s), Value::Number(i)] => match i.as_u64() {
                Some(i) => (s.clone(), i as usize),
                None => return Err(format!("index {i} is not a whole number")),
            },
            other => {
                return Err(format!(
                    "{TASK_CLASS} takes [workload_spec, index], got {}",
                    Value::Array(other.to_vec())
                ))
            }
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = cache.get(&spec) {
            return Ok((w.clone(), index));
        }
        match self.only {
            Some(own) if own != spec => {
                return Err(format!(
                    "this worker runs only its run's workload '{own}'; the job asks for '{spec}'"
                ))
            }
            Some(_) => {}
            None => outside::check(&spec, self.options, self.allowed)?,
        }
        // Parsed and its files and program looked up as a user's spec is (plan, then bind).
        let w = workload::parse(&spec, self.options).map_err(|e| e.to_string())?;
        workload::acquire(&*w).map_err(|e| e.to_string())?;
        if cache.len() >= SPEC_CACHE_MAX {
            cache.clear();
        }
        cache.insert(spec, w.clone());
        Ok((w, index))
    }

    /// How many parsed workloads the cache holds.
    pub fn cached(&self) -> usize {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Performs one job.
    pub fn perform(&self, job: &Job) -> Performed {
        match job.class.as_str() {
            NOOP_CLASS => Performed::Ok(0),
            TASK_CLASS => match self.task_of(job) {
                Err(why) => Performed::Malformed(why),
                Ok((w, index)) => match guarded_run(&*w, index) {
                    Ok(bytes) => Performed::Ok(bytes),
                    Err(e) => Performed::Failed(e.kind, e.message),
                },
            },
            // Another deployment's class: fail and retry (Sidekiq does the same for a class
            // it cannot load), so a worker that knows it may take it later.
            other => Performed::Failed(
                "NameError".into(),
                format!(
                    "uninitialized class {other} (this worker runs {TASK_CLASS} and {NOOP_CLASS})"
                ),
            ),
        }
    }
}

/// Retries a backend call that failed (the server restarting, a lock wait past its timeout)
/// until it succeeds or `patience` runs out.
pub fn persist<T>(patience: Duration, mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = Instant::now() + patience;
    let mut pause = Duration::from_millis(50);
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// How long a worker keeps retrying an acknowledgement or failure report (and a supervisor
/// its calls).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Handles one claimed job end to end: parse, perform (`perform`), then retry or bury it if it
/// failed; a job that ran is pushed onto `ran` for its acknowledgement ([`run_batch`] sends
/// them). `on_ran` is called after a successful run and before its acknowledgement (the done
/// log: a crash between the two is what makes a duplicate). Returns what happened.
pub fn handle(
    backend: &dyn Backend,
    worker: &str,
    claimed: &Claimed,
    schedule: RetrySchedule,
    perform: &dyn Fn(&Job) -> Performed,
    on_ran: &dyn Fn(&Job),
    ran: &mut Vec<Claimed>,
) -> Result<Performed> {
    // Refused by the backend where it is stored: already in the dead set, `raw` its entry.
    if let Some(why) = &claimed.refused {
        return Ok(Performed::Malformed(why.clone()));
    }
    let job = match Job::parse(&claimed.raw) {
        Ok(j) => j,
        Err(why) => {
            let entry = malformed_entry(&claimed.raw, &claimed.queue, &why);
            persist(PATIENCE, || backend.kill(worker, claimed, Some(&entry)))?;
            return Ok(Performed::Malformed(why));
        }
    };
    let outcome = perform(&job);
    match &outcome {
        Performed::Ok(_) => {
            on_ran(&job);
            ran.push(claimed.clone());
        }
        Performed::Malformed(why) => {
            let entry = malformed_entry(&claimed.raw, &claimed.queue, why);
            persist(PATIENCE, || backend.kill(worker, claimed, Some(&entry)))?;
        }
        Performed::Failed(kind, message) => {
            fail(backend, worker, claimed, &job, kind, message, schedule)?
        }
    }
    Ok(outcome)
}

/// A claimed job failed with `kind` and `message`: into the retry set with its count, or the
/// dead set (or dropped, `retry: false`) once out of retries, as Sidekiq does.
pub fn fail(
    backend: &dyn Backend,
    worker: &str,
    claimed: &Claimed,
    job: &Job,
    kind: &str,
    message: &str,
    schedule: RetrySchedule,
) -> Result<()> {
    let mut failed = job.clone();
    let t = now();
    let count = job.retry_count.map_or(0, |c| c.saturating_add(1));
    failed.retry_count = Some(count);
    failed.error_class = Some(kind.to_string());
    failed.error_message = Some(message.to_string());
    if failed.failed_at.is_none() {
        failed.failed_at = Some(t);
    } else {
        failed.retried_at = Some(t);
    }
    let payload = failed.to_json();
    match job.max_retries() {
        None => persist(PATIENCE, || backend.kill(worker, claimed, None)),
        Some(max) if count < max => {
            let at = t + schedule.delay(count).as_secs_f64();
            persist(PATIENCE, || backend.retry(worker, claimed, &payload, at))
        }
        Some(_) => persist(PATIENCE, || backend.kill(worker, claimed, Some(&payload))),
    }
}

/// The most jobs a worker thread claims at once.
pub const BATCH_MAX: usize = 64;
/// A worker thread claims as many jobs as it ran in about this long: short jobs go in batches
/// (one round trip or transaction claims many, and one acknowledges them), a job of this
/// length or longer alone, so no thread sits on jobs that another idle thread could run.
pub const BATCH_TIME: Duration = Duration::from_millis(1);

/// How many jobs a worker thread claims next: starts at 1, at most doubles after each batch,
/// and follows the time the last batch's jobs took.
#[derive(Debug, Clone)]
pub struct BatchSize(usize);

impl Default for BatchSize {
    fn default() -> Self {
        BatchSize(1)
    }
}

impl BatchSize {
    /// How many to claim next.
    pub fn get(&self) -> usize {
        self.0
    }

    /// `jobs` jobs ran in `took`.
    pub fn ran(&mut self, jobs: usize, took: Duration) {
        if jobs == 0 {
            return;
        }
        let per_job = (took.as_nanos() / jobs as u128).max(1);
        let fit = (BATCH_TIME.as_nanos() / per_job).min(BATCH_MAX as u128) as usize;
        self.0 = fit.clamp(1, (self.0 * 2).min(BATCH_MAX));
    }
}

/// Runs a claimed batch in order ([`handle`] each, `each` told of every outcome), then
/// acknowledges the jobs that ran in one call; adjusts `size` to the time they took. Stops
/// starting jobs once `stop()` says so: those left stay claimed until the worker releases
/// them to their queue. The error is the acknowledgement's, after retrying for a minute.
#[allow(clippy::too_many_arguments)]
pub fn run_batch(
    backend: &dyn Backend,
    worker: &str,
    batch: &[Claimed],
    schedule: RetrySchedule,
    perform: &dyn Fn(&Job) -> Performed,
    on_ran: &dyn Fn(&Job),
    stop: &dyn Fn() -> bool,
    size: &mut BatchSize,
    each: &mut dyn FnMut(&Claimed, Result<Performed>),
) -> Result<()> {
    let mut ran = Vec::with_capacity(batch.len());
    let started = Instant::now();
    let mut done = 0;
    for c in batch {
        if done > 0 && stop() {
            break;
        }
        let outcome = handle(backend, worker, c, schedule, perform, on_ran, &mut ran);
        each(c, outcome);
        done += 1;
    }
    size.ran(done, started.elapsed());
    if ran.is_empty() {
        return Ok(());
    }
    persist(PATIENCE, || backend.ack_batch(worker, &ran))
}

/// A job's outcome could not be reported: it stays claimed and returns to its queue when this
/// worker stops (or its heartbeat expires), to run again.
fn report_lost(queue: &str, e: &Error) {
    eprintln!(
        "concur: could not report a job of queue {queue} (it returns when this worker stops): {e}"
    );
}

/// The key under which a worker process tells its supervisor which job it runs (in its
/// [`super::slots`]): a hash of the job id under fixed keys (the same in every process of one
/// binary), so that a slot is fixed-size whatever id a queue's writer chose.
pub fn job_key(jid: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(jid)
}

/// The id the dead-set entry of a refused payload has: its own `jid` when it has one, else
/// the one [`super::malformed_entry`] derives from it.
pub fn refused_jid(raw: &str) -> String {
    let parsed = match super::check_size(raw) {
        Ok(()) => serde_json::from_str::<Value>(raw).ok(),
        Err(_) => None,
    };
    match parsed.as_ref().and_then(|v| v.as_object()?.get("jid")) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => super::fallback_jid(raw),
    }
}

/// The line `concur jobs work` prints on stderr for a refused job: the job id and reason as a
/// queue's writer chose them, shortened and with control characters escaped.
pub fn refused_line(raw: &str, why: &str) -> String {
    fn cut(s: &str, max: usize) -> String {
        match s.char_indices().nth(max) {
            Some((i, _)) => format!("{}...", &s[..i]),
            None => s.to_string(),
        }
    }
    let text = format!(
        "concur jobs work: job {} refused: {} (moved to the dead set)",
        cut(&refused_jid(raw), 64),
        cut(why, 300)
    );
    crate::os::terminal::escape_controls(&text).into_owned()
}

/// This process's id, asked of the kernel once.
fn own_pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Appends the task record of a `Concur::Task` job that ran (or failed) to `f`.
fn write_record(f: &Mutex<File>, c: &Claimed, outcome: &Performed, (start, end): (u64, u64)) {
    let Some(index) = Job::parse(&c.raw)
        .ok()
        .filter(|j| j.class == TASK_CLASS)
        .and_then(|j| j.args.get(1).and_then(Value::as_u64))
    else {
        return;
    };
    let (bytes, error) = match outcome {
        Performed::Ok(b) => (*b, None),
        Performed::Failed(kind, msg) => (0, Some(TaskError::new(kind, msg.clone()))),
        Performed::Malformed(_) => return,
    };
    let rec = TaskRecord {
        index: crate::measure::task_index(index as usize),
        start_ns: start,
        end_ns: end,
        bytes,
        error: error.map(Box::new),
        sched_ns: None,
        // The process's id (read once): `jobs-procs` maps it to the worker's number, since a
        // worker process runs one queue worker and does not know its number among them.
        worker: own_pid(),
    };
    let _ = f
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .write_all(rec.to_line().as_bytes());
}

/// How `concur jobs work` runs.
#[derive(Debug, Clone)]
pub struct WorkOptions {
    /// Worker threads.
    pub concurrency: usize,
    /// Queues, in priority order.
    pub queues: Vec<String>,
    /// Lease / heartbeat TTL.
    pub lease: Duration,
    /// When failed jobs are retried.
    pub schedule: RetrySchedule,
    /// How long in-flight jobs may take to finish after a stop request before they are
    /// returned to their queue.
    pub shutdown_deadline: Duration,
    /// Append each job id to this file after it ran and before its acknowledgement.
    pub done_log: Option<PathBuf>,
    /// Append a task record (JSON line: index, start, end, bytes, error) to this file for
    /// every `Concur::Task` job once it ran (its acknowledgement follows with its batch's;
    /// the `jobs-procs:W` model reads it).
    pub records: Option<PathBuf>,
    /// Stop once every queue is empty and nothing is in flight.
    pub until_empty: bool,
    /// Options of the workloads tasks run.
    pub workload_options: WorkloadOptions,
    /// What a job's spec may ask of this host (`--allow-commands`, `--allow-targets`).
    pub allowed: Allowed,
    /// The one spec this worker runs (a `jobs-procs` worker: its run's own); `None` runs any
    /// spec that `allowed` admits.
    pub only: Option<String>,
    /// The worker id to claim jobs under (`None`: a new one); a supervised worker process
    /// gets it from its supervisor, which looks up what it held if it dies.
    pub worker_id: Option<String>,
    /// Where each job's start and end are told to the supervisor ([`super::slots`]): one
    /// slot a worker thread.
    pub slots: Option<Arc<JobSlots>>,
}

impl Default for WorkOptions {
    fn default() -> Self {
        WorkOptions {
            concurrency: 10,
            queues: vec![DEFAULT_QUEUE.into()],
            lease: DEFAULT_LEASE,
            schedule: RetrySchedule::Sidekiq,
            shutdown_deadline: Duration::from_secs(25),
            done_log: None,
            records: None,
            until_empty: false,
            workload_options: WorkloadOptions::default(),
            allowed: Allowed::default(),
            only: None,
            worker_id: None,
            slots: None,
        }
    }
}

/// What a worker process did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkSummary {
    /// Jobs that ran and were acknowledged.
    pub processed: u64,
    /// Failures (retried or buried).
    pub failed: u64,
    /// Unfinished jobs returned to their queues at shutdown.
    pub returned: usize,
    /// Whether the shutdown deadline passed with jobs still running.
    pub timed_out: bool,
}

/// Runs a worker process's threads until `stop` is set (or, with `until_empty`, the queues
/// drain), then shuts down gracefully: running jobs get `shutdown_deadline` to finish. When
/// the deadline passes, the unfinished jobs are returned to their queues and the process
/// exits with code 1 (a thread in the middle of a job cannot be stopped any other way).
pub fn work(
    backend: Arc<dyn Backend>,
    opts: &WorkOptions,
    stop: &AtomicBool,
) -> Result<WorkSummary> {
    let id = opts.worker_id.clone().unwrap_or_else(new_worker_id);
    backend.heartbeat(&id, opts.lease)?;
    let append = |p: &Option<PathBuf>, flag: &str| -> Result<Option<Mutex<File>>> {
        let Some(p) = p else { return Ok(None) };
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map(|f| Some(Mutex::new(f)))
            .map_err(|e| Error::flag(flag, format!("cannot open {flag} '{}': {e}", p.display())))
    };
    let done_log = append(&opts.done_log, "--done-log")?;
    let records = append(&opts.records, "--records")?;
    let performer = Performer::new(&opts.workload_options, &opts.allowed, opts.only.as_deref());
    let processed = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let finished_threads = AtomicU64::new(0);
    let quit = AtomicBool::new(false);
    let stopping = || quit.load(Ordering::SeqCst) || stop.load(Ordering::SeqCst);
    let log = |job: &Job| {
        if let Some(f) = &done_log {
            let mut f: std::sync::MutexGuard<'_, File> =
                f.lock().unwrap_or_else(|p| p.into_inner());
            let _ = f.write_all(format!("{}\n", job.jid).as_bytes());
        }
    };
    let mut timed_out = false;
    let beating = AtomicBool::new(true);
    let next_slot = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..opts.concurrency {
            s.spawn(|| {
                let mut warned: Option<Instant> = None;
                // When the last job ran (start and end on the monotonic clock), for records.
                let timing = std::cell::Cell::new((0, 0));
                // Each thread its own slot, in the order they start.
                let slot = (opts.slots.as_deref())
                    .and_then(|s| s.slot(next_slot.fetch_add(1, Ordering::Relaxed)));
                let perform = |j: &Job| {
                    let start = mono_ns();
                    if let Some(slot) = slot {
                        slot.start(job_key(&j.jid), start);
                    }
                    let out = performer.perform(j);
                    timing.set((start, mono_ns()));
                    if let Some(slot) = slot {
                        slot.end();
                    }
                    out
                };
                let mut size = BatchSize::default();
                while !stopping() {
                    match backend.fetch_batch(
                        &id,
                        &opts.queues,
                        size.get(),
                        Duration::from_millis(500),
                    ) {
                        Ok(batch) => {
                            // Records wait for the batch's acknowledgement: whoever reads them
                            // (the parent of `jobs-procs`) may stop this worker once it has
                            // them all, and must not stop it before the jobs are acknowledged.
                            let mut ran: Vec<(Claimed, Performed, (u64, u64))> = Vec::new();
                            let mut each = |c: &Claimed, outcome: Result<Performed>| {
                                if let (Some(_), Ok(o)) = (&records, &outcome) {
                                    ran.push((c.clone(), o.clone(), timing.get()));
                                }
                                match outcome {
                                    Ok(Performed::Ok(_)) => {
                                        processed.fetch_add(1, Ordering::Relaxed);
                                    }
                                    Ok(Performed::Malformed(why)) => {
                                        eprintln!("{}", refused_line(&c.raw, &why));
                                        failed.fetch_add(1, Ordering::Relaxed);
                                    }
                                    Ok(_) => {
                                        failed.fetch_add(1, Ordering::Relaxed);
                                    }
                                    Err(e) => report_lost(&c.queue, &e),
                                }
                            };
                            let acked = run_batch(
                                &*backend,
                                &id,
                                &batch,
                                opts.schedule,
                                &perform,
                                &log,
                                &stopping,
                                &mut size,
                                &mut each,
                            );
                            if let (Err(e), Some(c)) = (acked, batch.first()) {
                                report_lost(&c.queue, &e);
                            }
                            if let Some(f) = &records {
                                for (c, o, t) in &ran {
                                    write_record(f, c, o, *t);
                                }
                            }
                        }
                        Err(e) => {
                            if warned.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                                eprintln!(
                                    "concur: fetching from {}: {e} (retrying)",
                                    backend.describe()
                                );
                                warned = Some(Instant::now());
                            }
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
                finished_threads.fetch_add(1, Ordering::SeqCst);
            });
        }
        // The heartbeat (lease renewal) has a thread of its own, so that nothing else (a reaper
        // waiting for a lock) can delay it; it beats until the workers are done.
        s.spawn(|| {
            let beat_every = (opts.lease / 3).max(Duration::from_millis(50));
            let mut last_beat = Instant::now();
            while beating.load(Ordering::SeqCst) {
                if last_beat.elapsed() >= beat_every && backend.heartbeat(&id, opts.lease).is_ok() {
                    last_beat = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        // Housekeeping on this thread: the reaper, the retry poller, the stop conditions.
        let mut last_sweep: Option<Instant> = None;
        let mut waiting = RetryWait::default();
        let all = opts.concurrency as u64;
        let mut stop_at: Option<Instant> = None;
        loop {
            if finished_threads.load(Ordering::SeqCst) == all {
                break;
            }
            if stopping() {
                let at = *stop_at.get_or_insert_with(|| Instant::now() + opts.shutdown_deadline);
                if Instant::now() >= at {
                    timed_out = true;
                    break;
                }
            }
            let sweep_every = Duration::from_secs(1).min(opts.lease / 2);
            if last_sweep.is_none_or(|t| t.elapsed() >= sweep_every) {
                let _ = backend.reap();
                let _ = backend.promote();
                last_sweep = Some(Instant::now());
                if opts.until_empty {
                    if let Ok(st) = backend.stats() {
                        if st.enqueued == 0 && st.busy == 0 && st.retry == 0 {
                            quit.store(true, Ordering::SeqCst);
                        } else if st.enqueued == 0 && st.busy == 0 {
                            waiting.say(st.retry);
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        beating.store(false, Ordering::SeqCst);
        if timed_out {
            // Jobs still running go back to their queue now (another worker runs them again);
            // the process exits without waiting for them.
            let returned = backend.release(&id).unwrap_or(0);
            eprintln!(
                "concur: shutdown deadline passed: {returned} unfinished jobs returned to their queues"
            );
            let _ = std::io::stderr().flush();
            std::process::exit(1);
        }
    });
    let returned = persist(Duration::from_secs(5), || backend.release(&id))?;
    Ok(WorkSummary {
        processed: processed.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        returned,
        timed_out,
    })
}

/// `--until-empty` with nothing left but retries: one line when that starts or the count
/// changes, again every 30 s, so that a worker waiting out Sidekiq's backoff says why.
#[derive(Default)]
struct RetryWait {
    said: Option<(u64, Instant)>,
}

impl RetryWait {
    fn say(&mut self, retries: u64) {
        if self
            .said
            .is_some_and(|(n, at)| n == retries && at.elapsed() < Duration::from_secs(30))
        {
            return;
        }
        eprintln!("{}", retry_wait_line(retries));
        self.said = Some((retries, Instant::now()));
    }
}

/// What `--until-empty` says while only retries are left.
fn retry_wait_line(retries: u64) -> String {
    let jobs = if retries == 1 {
        "1 job"
    } else {
        &format!("{retries} jobs")
    };
    format!(
        "concur: --until-empty: the queues are empty; waiting for {jobs} in the retry set to \
         come due and run (the backoff is count^4 + 15 s + jitter; --retry-delay sets it; \
         Ctrl-C stops, leaving them there)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_performer_runs_only_what_its_operator_and_its_run_allow() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let planted = Job::task(&format!("cmd:touch {}", marker.display()), 0, "q");
        let opts = WorkloadOptions::default();
        // A jobs-procs worker: its run's spec only, whatever the queue holds (a trigger of a
        // planted database rewrote the spec; another writer pushed a job).
        let allowed = Allowed {
            commands: true,
            ..Allowed::default()
        };
        let own = Performer::new(&opts, &allowed, Some("fib:5"));
        match own.perform(&planted) {
            Performed::Malformed(why) => assert!(why.contains("only its run's"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(own.perform(&Job::task("fib:5", 0, "q")), Performed::Ok(8));
        // `concur jobs work` without --allow-commands.
        let none = Allowed::default();
        let worker = Performer::new(&opts, &none, None);
        match worker.perform(&planted) {
            Performed::Malformed(why) => assert!(why.contains("--allow-commands"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!marker.exists());
    }

    #[test]
    fn the_spec_cache_holds_at_most_its_bound() {
        let opts = WorkloadOptions::default();
        let allowed = Allowed::default();
        let p = Performer::new(&opts, &allowed, None);
        // A writer sending a new spec with every job: the cache never passes its bound.
        for n in 0..(3 * SPEC_CACHE_MAX) {
            let job = Job::task(&format!("sleep:{}ms", n + 1), 0, "q");
            let _ = p.task_of(&job).unwrap();
            assert!(p.cached() <= SPEC_CACHE_MAX, "{} at {n}", p.cached());
        }
        assert!(p.cached() > 0);
    }

    #[test]
    fn a_refused_line_names_the_job_and_escapes_controls() {
        let raw =
            r#"{"class":"Concur::Task","args":[],"jid":"a\u001b[31mb","queue":"q","created_at":1}"#;
        let line = refused_line(raw, "bad\u{7}args");
        assert_eq!(
            line,
            r"concur jobs work: job a\x1b[31mb refused: bad\x07args (moved to the dead set)"
        );
        // No jid, not JSON, or too large to parse: the id its dead-set entry gets.
        for raw in [
            "not json".to_string(),
            "y".repeat(super::super::MAX_PAYLOAD + 1),
        ] {
            let entry: Value =
                serde_json::from_str(&super::super::malformed_entry(&raw, "q", "x")).unwrap();
            assert_eq!(entry["jid"].as_str().unwrap(), refused_jid(&raw));
        }
    }

    #[test]
    fn a_thread_claims_what_it_runs_in_about_a_millisecond() {
        let mut size = BatchSize::default();
        assert_eq!(size.get(), 1);
        // No-op jobs: the batch doubles each time, up to the cap.
        let mut seen = vec![];
        for _ in 0..8 {
            size.ran(size.get(), Duration::from_micros(size.get() as u64));
            seen.push(size.get());
        }
        assert_eq!(seen, [2, 4, 8, 16, 32, 64, 64, 64]);
        // 100 µs jobs: ten fit in a millisecond.
        size.ran(64, Duration::from_micros(6400));
        assert_eq!(size.get(), 10);
        // Jobs of a millisecond or more go one at a time, at once.
        size.ran(10, Duration::from_millis(30));
        assert_eq!(size.get(), 1);
        // Nothing ran (a stop before the first job): unchanged.
        size.ran(0, Duration::ZERO);
        assert_eq!(size.get(), 1);
    }
}
