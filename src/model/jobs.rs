//! `jobs:W`, `jobs-memory:W` and `jobs-redis:W`: background jobs. The run enqueues its N tasks
//! as jobs (Sidekiq's format, class `Concur::Task`, args `[workload, index]`, `retry: false`)
//! and W worker threads fetch, run and acknowledge them through the same code as `concur jobs
//! work`, so the cell shows what the queue costs beside `pool:W`.
//!
//! The backend is in the spec's name, so that all three can sit in one study: `jobs:W` is
//! SQLite (a fresh file in the temporary directory per run, removed afterwards, or the
//! `--jobs-backend sqlite:PATH` given), `jobs-memory:W` the in-process queue (Sucker Punch),
//! and `jobs-redis:W` the Redis server that `--jobs-backend redis://...` names, on a queue of
//! its own per run. `jobs-procs:W` is `jobs:W` with W worker processes (`concur __worker`, one thread each,
//! each reporting its task records through a shared file) instead of W threads; they run
//! without the interpreter-lock emulation (one thread each, so it would change nothing) and
//! with the `mail` workload's default sink. The run's wall time covers opening the queue (a few milliseconds for
//! SQLite), enqueueing, and everything up to the last acknowledgement.
//!
//! A traced job's phases, on worker threads: its wait in the queue (from its enqueue to the
//! fetch of its batch) and its acknowledgement (the one call for its batch, after the batch's
//! last job ran); its task is its run. `jobs-procs:W` records none: its workers are
//! processes of their own, whose phases the run's process cannot see.

use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::arrivals::Arrivals;
use super::{never_started, run_task, Entry, Model, ModelOutcome, RunCtx};
use crate::jobs::worker::{new_worker_id, run_batch, BatchSize, Performed};
use crate::jobs::{self, Backend, BackendUrl, Claimed, Job, RetrySchedule, DEFAULT_LEASE};
use crate::measure::lanes::Lanes;
use crate::measure::phases::{self, PhaseKind, TaskPhases};
use crate::measure::{mono_ns, TaskRecord, Waiter};
use crate::model::selfcall::SelfCall;
use crate::workload::Workload;

pub(super) const ENTRY: Entry = Entry {
    name: "jobs",
    takes_workers: true,
    help: "enqueue N jobs on SQLite (a fresh file, or --jobs-backend sqlite:PATH), W worker threads drain them",
    build: |w| jobs(w, Kind::Sqlite),
};

pub(super) const MEMORY_ENTRY: Entry = Entry {
    name: "jobs-memory",
    takes_workers: true,
    help: "enqueue N jobs on an in-process queue (not durable), W worker threads drain them",
    build: |w| jobs(w, Kind::Memory),
};

pub(super) const REDIS_ENTRY: Entry = Entry {
    name: "jobs-redis",
    takes_workers: true,
    help: "enqueue N jobs on the Redis of --jobs-backend redis://HOST:PORT/DB, W worker threads drain them",
    build: |w| jobs(w, Kind::Redis),
};

pub(super) const PROCS_ENTRY: Entry = Entry {
    name: "jobs-procs",
    takes_workers: true,
    help: "jobs:W with W worker processes (one queue worker each) instead of threads",
    build: |w| jobs(w, Kind::Procs),
};

/// Which queue a jobs model uses.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Sqlite,
    Procs,
    Memory,
    Redis,
}

fn jobs(w: Option<usize>, kind: Kind) -> Box<dyn Model> {
    Box::new(Jobs {
        workers: w.unwrap_or(1),
        kind,
    })
}

/// A job queue and W worker threads.
pub struct Jobs {
    workers: usize,
    kind: Kind,
}

/// A file of this run's own (a queue, the workers' records) in a private temporary folder
/// (`files::private_temp_dir`), which goes, with the SQLite journal beside it, when dropped.
struct TempFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempFile {
    fn new(purpose: &str, name: &str) -> Result<TempFile, String> {
        let dir = crate::os::files::private_temp_dir(purpose)
            .map_err(|e| format!("cannot make a temporary folder: {e}"))?;
        Ok(TempFile {
            path: dir.path().join(name),
            _dir: dir,
        })
    }
}

fn failed_run(tasks: usize, why: String) -> ModelOutcome {
    ModelOutcome {
        records: never_started(0..tasks, &why),
        error: Some(why),
        ..Default::default()
    }
}

std::thread_local! {
    /// The number of the queue worker thread running here: `perform` is one closure shared
    /// by every worker thread, and this tells it whose task it records (a thread-local read,
    /// no system call).
    static WORKER: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// When this worker thread fetched the batch it runs (ns); set only while tracing.
    static FETCHED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The traced jobs of this worker's batch that ran: their acknowledgement is a phase.
    static TO_ACK: std::cell::RefCell<Vec<TaskPhases>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Jobs {
    /// Starts the worker processes, waits until they have reported every task (each record is
    /// written after the job's acknowledgement), then kills them: they are idle by then.
    fn run_procs(&self, ctx: &RunCtx, url: &BackendUrl, queue: &str) -> ModelOutcome {
        let log = match TempFile::new("records", "records.jsonl") {
            Ok(f) => f,
            Err(e) => return failed_run(ctx.tasks, e),
        };
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => return failed_run(ctx.tasks, format!("finding our own binary: {e}")),
        };
        // Started and waited for on this thread, which therefore outlives the workers, as
        // their death-with-parent signal requires.
        let call = SelfCall::JobsWorker {
            recipe: crate::model::WorkloadRecipe {
                jobs_backend: Some(url.clone()),
                ..ctx.recipe.clone()
            },
            queue: queue.to_string(),
            records: log.path.clone(),
        };
        let mut children = Vec::with_capacity(self.workers);
        let mut error = None;
        for k in 0..self.workers {
            match call.spawn(&exe) {
                Ok((c, _)) => children.push(c),
                Err(e) => {
                    error = Some(format!(
                        "could start {k} of {} worker processes: {e}",
                        self.workers
                    ));
                    break;
                }
            }
        }
        // An open run's releases enqueue on the queue these processes fetch from and
        // acknowledge on (SQLite's write lock, one Redis server): their time kept off the
        // cores delays a release too, and is counted beside the releaser's own.
        if let Some(a) = &ctx.arrivals {
            for c in &children {
                a.lock_holder(Waiter::Process(c.id()));
            }
        }
        // Count the records as they are appended (each read goes on where the last stopped).
        let mut file: Option<std::fs::File> = None;
        let mut chunk = Vec::new();
        let mut lines = 0;
        while lines < ctx.tasks && !children.is_empty() {
            if file.is_none() {
                file = std::fs::File::open(&log.path).ok();
            }
            if let Some(f) = &mut file {
                chunk.clear();
                let _ = f.read_to_end(&mut chunk);
                lines += chunk.iter().filter(|&&b| b == b'\n').count();
            }
            if lines >= ctx.tasks {
                break;
            }
            if children
                .iter_mut()
                .all(|c| c.try_wait().ok().flatten().is_some())
            {
                error.get_or_insert_with(|| "every worker process ended early".into());
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        for c in &mut children {
            let _ = c.kill();
        }
        for c in &mut children {
            let _ = c.wait();
        }
        let mut records: Vec<TaskRecord> = std::fs::read_to_string(&log.path)
            .unwrap_or_default()
            .lines()
            .filter_map(TaskRecord::from_line)
            .collect();
        // A worker process's records carry its process id: its lane is its number here.
        let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
        for r in &mut records {
            if let Some(k) = pids.iter().position(|&p| p == r.worker) {
                r.worker = k as u32;
            }
        }
        let mut seen = vec![false; ctx.tasks];
        records.retain(|r| r.index() < ctx.tasks && !std::mem::replace(&mut seen[r.index()], true));
        let why = error.clone().unwrap_or_else(|| "the job never ran".into());
        records.extend(never_started((0..ctx.tasks).filter(|&i| !seen[i]), &why));
        ModelOutcome {
            records,
            threads_created: 0,
            processes_created: children.len(),
            error,
        }
    }
}

impl Model for Jobs {
    fn spec(&self) -> String {
        let name = match self.kind {
            Kind::Sqlite => "jobs",
            Kind::Memory => "jobs-memory",
            Kind::Redis => "jobs-redis",
            Kind::Procs => "jobs-procs",
        };
        format!("{name}:{}", self.workers)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.workers)
    }
    fn task_processes(&self) -> bool {
        self.kind == Kind::Procs
    }
    fn check(&self, w: &dyn Workload, _gil: bool) -> Result<(), String> {
        if self.kind == Kind::Procs && !w.portable() {
            return Err(format!(
                "its workers are processes that re-create the workload from its spec, which cannot re-create '{}' (a workload of this program's own); use jobs:W, which runs the same queue on threads",
                w.spec()
            ));
        }
        Ok(())
    }
    fn lanes(&self) -> Lanes {
        Lanes::Worker
    }
    fn is_queue(&self) -> bool {
        true
    }
    fn needs_redis(&self) -> bool {
        self.kind == Kind::Redis
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.workers.min(tasks)
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        // `_temp`, a fresh SQLite file, is removed when the run ends.
        let (url, _temp) = match queue_url(self.kind, &ctx.recipe.jobs_backend) {
            Ok(u) => u,
            Err(e) => return failed_run(ctx.tasks, e),
        };
        let q = match Opened::open(&url) {
            Ok(q) => q,
            Err(e) => return failed_run(ctx.tasks, e),
        };
        let payloads = enqueue_batch(&ctx.workload.spec(), ctx.tasks, &q.queue);
        let open = ctx.arrivals.clone();
        // A closed run enqueues every job at once: each job's wait in the queue is from then
        // to its start (the enqueue-to-start latency; an open run measures it from each job's
        // scheduled enqueue instead).
        let mut enqueued_ns = None;
        if open.is_none() {
            enqueued_ns = Some(crate::measure::mono_ns());
            if let Err(e) = q.backend.enqueue(&q.queue, &payloads) {
                return failed_run(ctx.tasks, e.to_string());
            }
        }
        // Open model: each job is enqueued when it is due, by a thread of its own, while the
        // workers drain the queue; the first enqueue error stops the releases and is the
        // run's error.
        let enqueue_error: Mutex<Option<String>> = Mutex::new(None);
        let release = |a: &Arrivals| {
            a.dispatch(|i| match q.backend.enqueue(&q.queue, &payloads[i..=i]) {
                Ok(_) => true,
                Err(e) => {
                    *enqueue_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    false
                }
            })
        };
        if self.kind == Kind::Procs {
            let mut out = self.drain_in_processes(ctx, &url, &q, open.as_deref(), &release);
            if let Some(e) = enqueue_error
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
            {
                out.error.get_or_insert(e);
            }
            return out;
        }
        let drain = Drain::new(ctx.tasks);
        let perform = |job: &Job| -> Performed {
            let Some(index) = job.args.get(1).and_then(|v| v.as_u64()) else {
                return Performed::Malformed(format!("no task index in {:?}", job.args));
            };
            let index = index as usize;
            // A traced job's wait in the queue: from its enqueue (an open run's scheduled
            // one) to its batch's fetch.
            let traced = phases::task(index);
            if let Some(t) = &traced {
                let enqueued = enqueued_ns.or_else(|| open.as_ref().map(|a| a.due_ns(index)));
                if let Some(at) = enqueued {
                    t.record(
                        PhaseKind::Queued,
                        at,
                        FETCHED.with(std::cell::Cell::get).max(at),
                    );
                }
            }
            let mut rec = run_task(&*ctx.workload, index);
            rec.set_sched(enqueued_ns);
            rec.worker = WORKER.with(std::cell::Cell::get);
            let out = match &rec.error {
                None => Performed::Ok(rec.bytes),
                Some(e) => Performed::Failed(e.kind.clone(), e.message.clone()),
            };
            if let (Some(t), None) = (traced, &rec.error) {
                TO_ACK.with(|a| a.borrow_mut().push(t));
            }
            drain
                .records
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(rec);
            out
        };
        let releases: Option<Releases> =
            open.as_deref().map(|a| (a, &release as _, &enqueue_error));
        let created = self.drain_on_threads(ctx, &q, &drain, &perform, releases);
        let _ = q.backend.release(&q.worker);
        let _ = q.backend.forget_queue(&q.queue);
        let enqueue_error = enqueue_error
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        drain.outcome(ctx.tasks, created, enqueue_error)
    }
}

/// An open run's releases: its arrivals, what enqueues one job, where the first enqueue
/// error goes.
type Releases<'r> = (
    &'r Arrivals,
    &'r (dyn Fn(&Arrivals) + Sync),
    &'r Mutex<Option<String>>,
);

impl Jobs {
    /// The worker processes drain the queue while the open run's releases (if any) run on a
    /// thread; then the run's worker leaves the backend.
    fn drain_in_processes(
        &self,
        ctx: &RunCtx,
        url: &BackendUrl,
        q: &Opened,
        open: Option<&Arrivals>,
        release: &(dyn Fn(&Arrivals) + Sync),
    ) -> ModelOutcome {
        let out = std::thread::scope(|s| {
            if let Some(a) = open {
                s.spawn(|| release(a));
            }
            self.run_procs(ctx, url, &q.queue)
        });
        let _ = q.backend.release(&q.worker);
        out
    }

    /// Runs the open run's releases (if any) on a thread, W worker threads with the run's
    /// stack size, and, on this thread until the run is over, the worker's heartbeat (its
    /// lease renewal). Returns how many worker threads were created.
    fn drain_on_threads(
        &self,
        ctx: &RunCtx,
        q: &Opened,
        drain: &Drain,
        perform: &(dyn Fn(&Job) -> Performed + Sync),
        releases: Option<Releases>,
    ) -> usize {
        std::thread::scope(|s| {
            if let Some((a, release, enqueue_error)) = releases {
                // The first enqueue error ends the run.
                s.spawn(|| {
                    release(a);
                    if enqueue_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .is_some()
                    {
                        drain.all_done.store(true, Ordering::SeqCst);
                    }
                });
            }
            let mut threads = Vec::new();
            for k in 0..self.workers {
                let lane = k as u32;
                // Scoped std threads (they borrow the run's state), with the run's stack size.
                match std::thread::Builder::new()
                    .stack_size(ctx.recipe.settings.stack_size)
                    .spawn_scoped(s, move || {
                        WORKER.with(|w| w.set(lane));
                        // The releases enqueue on the queue this thread fetches from and
                        // acknowledges on (the same lock): see `run_procs`.
                        if let Some((a, _, _)) = releases {
                            // SAFETY: gettid has no preconditions.
                            a.lock_holder(Waiter::Thread(unsafe { libc::gettid() }));
                        }
                        work(ctx.tasks, q, drain, perform)
                    }) {
                    Ok(t) => threads.push(t),
                    Err(e) => {
                        *drain.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                            "could create {k} of {} worker threads: {e}",
                            self.workers
                        ));
                        break;
                    }
                }
            }
            let created = threads.len();
            if created == 0 {
                drain.all_done.store(true, Ordering::SeqCst);
            }
            let mut beat = Instant::now();
            while !drain.all_done.load(Ordering::SeqCst) && threads.iter().any(|t| !t.is_finished())
            {
                if beat.elapsed() >= DEFAULT_LEASE / 3 {
                    let _ = q.backend.heartbeat(&q.worker, DEFAULT_LEASE);
                    beat = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            created
        })
    }
}

/// One worker thread's loop: fetches a batch without blocking, runs and acknowledges it, until
/// every job of the run has ended or the run is over.
fn work(tasks: usize, q: &Opened, drain: &Drain, perform: &(dyn Fn(&Job) -> Performed + Sync)) {
    let mut size = BatchSize::default();
    let done = || drain.all_done.load(Ordering::SeqCst);
    while drain.finished.load(Ordering::SeqCst) < tasks && !done() {
        // No blocking fetch: the last job's acknowledgement must end the run at once, not
        // when the other threads' waits time out.
        let batch = match q
            .backend
            .fetch_batch(&q.worker, &q.queues, size.get(), Duration::ZERO)
        {
            Ok(b) if b.is_empty() => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Ok(b) => b,
            Err(e) => {
                *drain.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                drain.all_done.store(true, Ordering::SeqCst);
                return;
            }
        };
        // While tracing: when the batch was fetched, and when its last job was handled (the
        // acknowledgement follows).
        let tracing = phases::on();
        if tracing {
            FETCHED.with(|f| f.set(mono_ns()));
        }
        let mut handled = 0;
        let mut ended = 0;
        let mut each = |_: &Claimed, r: crate::base::error::Result<Performed>| {
            if let Err(e) = r {
                *drain.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
            }
            if tracing {
                handled = mono_ns();
            }
            ended += 1;
        };
        let acked = run_batch(
            &*q.backend,
            &q.worker,
            &batch,
            RetrySchedule::Sidekiq,
            perform,
            &|_| {},
            &done,
            &mut size,
            &mut each,
        );
        if tracing {
            let now = mono_ns();
            let traced = TO_ACK.with(|a| std::mem::take(&mut *a.borrow_mut()));
            if acked.is_ok() {
                for t in traced {
                    t.record(PhaseKind::Ack, handled.min(now), now);
                }
            }
        }
        if let Err(e) = acked {
            *drain.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        }
        if drain.finished.fetch_add(ended, Ordering::SeqCst) + ended >= tasks {
            drain.all_done.store(true, Ordering::SeqCst);
        }
    }
}

/// Where a run's queue is: a URL given (or the in-process queue), or a fresh SQLite file.
#[derive(Debug, PartialEq)]
enum Place {
    Given(BackendUrl),
    FreshSqlite(jobs::SqliteSync),
}

/// Where a model of `kind` keeps its queue, given the run's `--jobs-backend`.
fn place(kind: Kind, given: &Option<BackendUrl>) -> Result<Place, String> {
    Ok(match (kind, given) {
        (Kind::Memory, _) => Place::Given(BackendUrl::Memory),
        (Kind::Redis, Some(u @ BackendUrl::Redis(_))) => Place::Given(u.clone()),
        // The plan refuses this; a library caller may not have built a plan.
        (Kind::Redis, _) => {
            return Err("jobs-redis:W needs --jobs-backend redis://HOST:PORT/DB".into())
        }
        (Kind::Sqlite | Kind::Procs, Some(u @ BackendUrl::Sqlite(Some(_), _))) => {
            Place::Given(u.clone())
        }
        (Kind::Sqlite | Kind::Procs, Some(BackendUrl::Sqlite(None, sync))) => {
            Place::FreshSqlite(*sync)
        }
        (Kind::Sqlite | Kind::Procs, _) => Place::FreshSqlite(jobs::SqliteSync::Normal),
    })
}

/// The queue's URL for a model of `kind`, with the fresh file it made, if it made one.
fn queue_url(
    kind: Kind,
    given: &Option<BackendUrl>,
) -> Result<(BackendUrl, Option<TempFile>), String> {
    match place(kind, given)? {
        Place::Given(url) => Ok((url, None)),
        Place::FreshSqlite(sync) => {
            let db = TempFile::new("jobs", "queue.sqlite")?;
            Ok((BackendUrl::Sqlite(Some(db.path.clone()), sync), Some(db)))
        }
    }
}

/// A run's queue, opened: its backend, the queue of its own, and the worker that drains it.
struct Opened {
    backend: Arc<dyn Backend>,
    queue: String,
    queues: [String; 1],
    worker: String,
}

impl Opened {
    /// Opens `url`'s backend, names a queue of the run's own (so that runs sharing a Redis
    /// server never take each other's jobs), and registers the run's worker.
    fn open(url: &BackendUrl) -> Result<Opened, String> {
        let backend: Arc<dyn Backend> = jobs::open(url).map_err(|e| e.to_string())?;
        let queue = format!("concur-run-{}-{:x}", std::process::id(), jobs::random_u64());
        let worker = new_worker_id();
        backend
            .heartbeat(&worker, DEFAULT_LEASE)
            .map_err(|e| e.to_string())?;
        Ok(Opened {
            backend,
            queues: [queue.clone()],
            queue,
            worker,
        })
    }
}

/// The jobs of a run of `tasks` tasks of `workload`, on `queue`, in task order: Sidekiq's
/// JSON, with no retry.
fn enqueue_batch(workload: &str, tasks: usize, queue: &str) -> Vec<String> {
    (0..tasks)
        .map(|i| {
            let mut j = Job::task(workload, i, queue);
            j.retry = false.into();
            j.to_json()
        })
        .collect()
}

/// What the worker threads of one run share: the task records, how many jobs ended, whether
/// the run is over, and its error.
struct Drain {
    records: Mutex<Vec<TaskRecord>>,
    finished: AtomicUsize,
    all_done: AtomicBool,
    error: Mutex<Option<String>>,
}

impl Drain {
    fn new(tasks: usize) -> Drain {
        Drain {
            records: Mutex::new(Vec::with_capacity(tasks)),
            finished: AtomicUsize::new(0),
            all_done: AtomicBool::new(false),
            error: Mutex::new(None),
        }
    }

    /// The run's outcome: its records, each task that has none recorded as never started
    /// with the run's error (the workers' first, else the releases'), or "the job never ran".
    fn outcome(self, tasks: usize, created: usize, enqueue_error: Option<String>) -> ModelOutcome {
        let mut records = self.records.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut error = self.error.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = enqueue_error {
            error.get_or_insert(e);
        }
        if records.len() < tasks {
            let mut seen = vec![false; tasks];
            for r in &records {
                if let Some(s) = seen.get_mut(r.index()) {
                    *s = true;
                }
            }
            let missing = (0..tasks).filter(|&i| !seen[i]);
            let why = error.clone().unwrap_or_else(|| "the job never ran".into());
            records.extend(never_started(missing, &why));
        }
        ModelOutcome {
            records,
            threads_created: created,
            processes_created: 0,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_model_takes_its_queue_from_its_name_and_the_backend_given() {
        let redis: BackendUrl = "redis://127.0.0.1:6379/0".parse().unwrap();
        let file = BackendUrl::Sqlite(Some("/tmp/q.sqlite".into()), jobs::SqliteSync::Normal);
        let full = Some(BackendUrl::Sqlite(None, jobs::SqliteSync::Full));
        assert_eq!(
            place(Kind::Memory, &Some(redis.clone())),
            Ok(Place::Given(BackendUrl::Memory))
        );
        assert_eq!(
            place(Kind::Redis, &Some(redis.clone())),
            Ok(Place::Given(redis.clone()))
        );
        assert_eq!(
            place(Kind::Redis, &None),
            Err("jobs-redis:W needs --jobs-backend redis://HOST:PORT/DB".into())
        );
        assert_eq!(
            place(Kind::Procs, &Some(file.clone())),
            Ok(Place::Given(file))
        );
        assert_eq!(
            place(Kind::Sqlite, &full),
            Ok(Place::FreshSqlite(jobs::SqliteSync::Full))
        );
        assert_eq!(
            place(Kind::Sqlite, &Some(redis)),
            Ok(Place::FreshSqlite(jobs::SqliteSync::Normal))
        );
    }

    #[test]
    fn the_batch_is_one_job_per_task_in_order_without_retries() {
        let batch = enqueue_batch("fib:5", 3, "concur-run-1");
        assert_eq!(batch.len(), 3);
        for (i, text) in batch.iter().enumerate() {
            let job: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(job["args"], serde_json::json!(["fib:5", i]));
            assert_eq!(job["queue"], "concur-run-1");
            assert_eq!(job["retry"], false);
        }
    }

    #[test]
    fn tasks_without_a_record_are_never_started_with_the_runs_error() {
        let drain = Drain::new(3);
        drain
            .records
            .lock()
            .unwrap()
            .extend(never_started([1, 7], "ran"));
        let out = drain.outcome(3, 2, Some("enqueue failed".into()));
        assert_eq!(out.error.as_deref(), Some("enqueue failed"));
        assert_eq!(out.threads_created, 2);
        let mut why: Vec<(usize, String)> = out
            .records
            .iter()
            .map(|r| (r.index(), r.error.as_ref().unwrap().message.clone()))
            .collect();
        why.sort();
        assert_eq!(
            why,
            [
                (0, "enqueue failed".to_string()),
                (1, "ran".into()),
                (2, "enqueue failed".into()),
                (7, "ran".into())
            ]
        );
        // Every task recorded: nothing added, and no error of the run's own.
        let drain = Drain::new(1);
        drain
            .records
            .lock()
            .unwrap()
            .extend(never_started([0], "x"));
        let out = drain.outcome(1, 1, None);
        assert_eq!((out.records.len(), out.error), (1, None));
    }
}
