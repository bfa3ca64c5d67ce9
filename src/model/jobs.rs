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

use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{never_started, run_task, Entry, Model, ModelOutcome, RunCtx};
use crate::jobs::worker::{new_worker_id, run_batch, BatchSize, Performed};
use crate::jobs::{self, Backend, BackendUrl, Claimed, Job, RetrySchedule, DEFAULT_LEASE};
use crate::measure::lanes::Lanes;
use crate::measure::TaskRecord;
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
        records.retain(|r| r.index < ctx.tasks && !std::mem::replace(&mut seen[r.index], true));
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
        let mut _temp = None;
        let url = match (self.kind, &ctx.recipe.jobs_backend) {
            (Kind::Memory, _) => BackendUrl::Memory,
            (Kind::Redis, Some(u @ BackendUrl::Redis(_))) => u.clone(),
            // The plan refuses this; a library caller may not have built a plan.
            (Kind::Redis, _) => {
                return failed_run(
                    ctx.tasks,
                    "jobs-redis:W needs --jobs-backend redis://HOST:PORT/DB".into(),
                )
            }
            (Kind::Sqlite | Kind::Procs, Some(u @ BackendUrl::Sqlite(Some(_), _))) => u.clone(),
            (Kind::Sqlite | Kind::Procs, _) => {
                let db = match TempFile::new("jobs", "queue.sqlite") {
                    Ok(f) => f,
                    Err(e) => return failed_run(ctx.tasks, e),
                };
                let p = db.path.clone();
                _temp = Some(db);
                let sync = match &ctx.recipe.jobs_backend {
                    Some(BackendUrl::Sqlite(None, sync)) => *sync,
                    _ => jobs::SqliteSync::Normal,
                };
                BackendUrl::Sqlite(Some(p), sync)
            }
        };
        let backend: Arc<dyn Backend> = match jobs::open(&url) {
            Ok(b) => b,
            Err(e) => return failed_run(ctx.tasks, e.to_string()),
        };
        // A queue of our own, so that runs sharing a Redis server never take each other's jobs.
        let queue = format!("concur-run-{}-{:x}", std::process::id(), jobs::random_u64());
        let queues = [queue.clone()];
        let worker = new_worker_id();
        if let Err(e) = backend.heartbeat(&worker, DEFAULT_LEASE) {
            return failed_run(ctx.tasks, e.to_string());
        }
        let spec = ctx.workload.spec();
        let payloads: Vec<String> = (0..ctx.tasks)
            .map(|i| {
                let mut j = Job::task(&spec, i, &queue);
                j.retry = false.into();
                j.to_json()
            })
            .collect();
        let open = ctx.arrivals.clone();
        // A closed run enqueues every job at once: each job's wait in the queue is from then
        // to its start (the enqueue-to-start latency; an open run measures it from each job's
        // scheduled enqueue instead).
        let mut enqueued_ns = None;
        if open.is_none() {
            enqueued_ns = Some(crate::measure::mono_ns());
            if let Err(e) = backend.enqueue(&queue, &payloads) {
                return failed_run(ctx.tasks, e.to_string());
            }
        }
        // Open model: each job is enqueued when it is due, by a thread of its own, while the
        // workers drain the queue; the first enqueue error stops the releases and is the
        // run's error.
        let enqueue_error: Mutex<Option<String>> = Mutex::new(None);
        let release = |a: &super::arrivals::Arrivals| {
            a.dispatch(|i| match backend.enqueue(&queue, &payloads[i..=i]) {
                Ok(_) => true,
                Err(e) => {
                    *enqueue_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    false
                }
            })
        };
        if self.kind == Kind::Procs {
            let mut out = std::thread::scope(|s| {
                if let Some(a) = &open {
                    s.spawn(|| release(a));
                }
                self.run_procs(ctx, &url, &queue)
            });
            let _ = backend.release(&worker);
            if let Some(e) = enqueue_error
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
            {
                out.error.get_or_insert(e);
            }
            return out;
        }
        let records: Mutex<Vec<TaskRecord>> = Mutex::new(Vec::with_capacity(ctx.tasks));
        let finished = AtomicUsize::new(0);
        let all_done = AtomicBool::new(false);
        let error: Mutex<Option<String>> = Mutex::new(None);
        let perform = |job: &Job| -> Performed {
            let Some(index) = job.args.get(1).and_then(|v| v.as_u64()) else {
                return Performed::Malformed(format!("no task index in {:?}", job.args));
            };
            let mut rec = run_task(&*ctx.workload, index as usize);
            rec.sched_ns = enqueued_ns;
            rec.worker = WORKER.with(std::cell::Cell::get);
            let out = match &rec.error {
                None => Performed::Ok(rec.bytes),
                Some(e) => Performed::Failed(e.kind.clone(), e.message.clone()),
            };
            records.lock().unwrap_or_else(|p| p.into_inner()).push(rec);
            out
        };
        let mut created = 0;
        std::thread::scope(|s| {
            if let Some(a) = &open {
                s.spawn(|| {
                    release(a);
                    if enqueue_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .is_some()
                    {
                        all_done.store(true, Ordering::SeqCst);
                    }
                });
            }
            let mut threads = Vec::new();
            for k in 0..self.workers {
                let lane = k as u32;
                let body = || {
                    let mut size = BatchSize::default();
                    let done = || all_done.load(Ordering::SeqCst);
                    while finished.load(Ordering::SeqCst) < ctx.tasks && !done() {
                        // No blocking fetch: the last job's acknowledgement must end the run
                        // at once, not when the other threads' waits time out.
                        let batch =
                            match backend.fetch_batch(&worker, &queues, size.get(), Duration::ZERO)
                            {
                                Ok(b) if b.is_empty() => {
                                    std::thread::sleep(Duration::from_millis(1));
                                    continue;
                                }
                                Ok(b) => b,
                                Err(e) => {
                                    *error.lock().unwrap_or_else(|p| p.into_inner()) =
                                        Some(e.to_string());
                                    all_done.store(true, Ordering::SeqCst);
                                    return;
                                }
                            };
                        let mut ended = 0;
                        let mut each = |_: &Claimed, r: crate::base::error::Result<Performed>| {
                            if let Err(e) = r {
                                *error.lock().unwrap_or_else(|p| p.into_inner()) =
                                    Some(e.to_string());
                            }
                            ended += 1;
                        };
                        let acked = run_batch(
                            &*backend,
                            &worker,
                            &batch,
                            RetrySchedule::Sidekiq,
                            &perform,
                            &|_| {},
                            &done,
                            &mut size,
                            &mut each,
                        );
                        if let Err(e) = acked {
                            *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                        }
                        if finished.fetch_add(ended, Ordering::SeqCst) + ended >= ctx.tasks {
                            all_done.store(true, Ordering::SeqCst);
                        }
                    }
                };
                // Scoped std threads (they borrow the run's state), with the run's stack size.
                match std::thread::Builder::new()
                    .stack_size(ctx.recipe.settings.stack_size)
                    .spawn_scoped(s, move || {
                        WORKER.with(|w| w.set(lane));
                        body()
                    }) {
                    Ok(t) => threads.push(t),
                    Err(e) => {
                        *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                            "could create {k} of {} worker threads: {e}",
                            self.workers
                        ));
                        break;
                    }
                }
            }
            created = threads.len();
            if created == 0 {
                all_done.store(true, Ordering::SeqCst);
            }
            // The heartbeat (lease renewal) runs here, on its own thread.
            let mut beat = Instant::now();
            while !all_done.load(Ordering::SeqCst) && threads.iter().any(|t| !t.is_finished()) {
                if beat.elapsed() >= DEFAULT_LEASE / 3 {
                    let _ = backend.heartbeat(&worker, DEFAULT_LEASE);
                    beat = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let _ = backend.release(&worker);
        let _ = backend.forget_queue(&queue);
        let mut records = records.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut error = error.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = enqueue_error
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
        {
            error.get_or_insert(e);
        }
        if records.len() < ctx.tasks {
            let mut seen = vec![false; ctx.tasks];
            for r in &records {
                if let Some(s) = seen.get_mut(r.index) {
                    *s = true;
                }
            }
            let missing = (0..ctx.tasks).filter(|&i| !seen[i]);
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
