//! The child side of a run: the hidden `__run` command (one repetition of one cell, in a fresh
//! process), `__task` (one task, for the `spawn` model) and `__worker` (one queue worker of
//! `jobs-procs:W`). Each reads its request from fd 4 (`SelfCall::receive`, through
//! [`serve`], the one dispatch the binary and a library user's binary share); runs and tasks
//! report JSON on fd 3, workers append records to their file.

use std::collections::BTreeMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use std::sync::Arc;

use crate::measure::latency::{LatencyRecorder, LatencySummary};
use crate::measure::open::OpenStats;
use crate::measure::wakeups::Wakeups;
use crate::measure::{self, mono_ns};
use crate::model::arrivals::Arrivals;
use crate::model::selfcall::SelfCall;
use crate::model::{self, run_task, ModelOutcome, RunCtx, WorkloadRecipe};
use crate::os::process;
use crate::workload::gil;

pub use crate::model::selfcall::RunRequest;

/// What a `__run` child reports back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChildReport {
    /// Wall time from the model's start to its end.
    pub wall_s: f64,
    /// Tasks that succeeded.
    pub tasks_ok: usize,
    /// Tasks that failed.
    pub tasks_failed: usize,
    /// Failed tasks by kind.
    pub failures: BTreeMap<String, usize>,
    /// Bytes produced.
    pub bytes: u64,
    /// Why the run failed, if it did.
    pub error: Option<String>,
    /// Task latency percentiles, microseconds.
    pub latency_us: Option<LatencySummary>,
    /// OS threads the model created.
    pub threads_created: usize,
    /// Processes the model created.
    pub processes_created: usize,
    /// The process id of the run (distinct for every fresh process).
    #[serde(default)]
    pub pid: u32,
    /// Forced hand-overs of the emulated lock (this process only).
    pub gil_switches: u64,
    /// Each task's `[start, end]`, µs from the model's start, at most `--trace-tasks` of
    /// them (an even sample by task index).
    #[serde(default)]
    pub timeline_us: Option<Vec<[u64; 2]>>,
    /// The tasks behind `timeline_us`, span by span: index, lane, outcome; and how many
    /// tasks the run had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline_tasks: Option<measure::lanes::TimelineTasks>,
    /// Open-model runs: rates, service, queue, lag and the series (`latency_us` is then
    /// corrected for coordinated omission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenStats>,
    /// HTTP: the connections this process's tasks opened and reused, and what opening them
    /// cost.
    #[serde(default)]
    pub connections: Option<crate::measure::conn::Connections>,
    /// The latency histogram whole, with its exact count, min, max and sum (what a run on
    /// another host sends back, for the merged row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hdr: Option<crate::measure::latency::LatencyWire>,
    /// A closed run of a queue model: each job's wait from its enqueue to its start, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait_us: Option<LatencySummary>,
    /// The same, as its histogram whole (what a run on another host sends back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait_hdr: Option<crate::measure::latency::LatencyWire>,
    /// A run over several hosts: when its first task started, ns after the announced common
    /// start (negative: before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_task_ns: Option<i64>,
    /// A closed run of a waiting workload (`sleep:D`): how late the wake-ups came and the
    /// time to start every task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<Wakeups>,
}

/// The prefix of the live lines an open-model run writes on stderr once per interval; the
/// parent shows them (a line, or the progress bar's message) and keeps them out of the
/// stderr tail.
pub const LIVE_PREFIX: &str = "concur-live ";

/// One live line: what an open run has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LiveLine {
    /// Seconds since the first release.
    pub t_s: f64,
    /// Tasks due so far.
    pub due: u64,
    /// Tasks ended so far in the run's own process (forked, spawned and worker processes'
    /// tasks are not counted).
    pub ended: u64,
    /// Of those, failed.
    pub failed: u64,
    /// Tasks ended per second in the last interval.
    pub rate: f64,
    /// The asked rate now; 0 once every task has been released.
    pub asked: f64,
}

/// How long after the run's process is ready the first task is due: room for the model to
/// build its pool or runtime, so that set-up does not read as the first tasks' queue time.
const LEAD: std::time::Duration = std::time::Duration::from_millis(10);

/// Condenses a model's outcome into the report; for an open-model run (`open`: its arrivals
/// and the series interval, ns), latency is taken from each task's scheduled time.
pub fn report_open(
    mut outcome: ModelOutcome,
    wall_s: f64,
    open: Option<(&Arrivals, u64)>,
) -> ChildReport {
    let mut r = ChildReport {
        wall_s,
        threads_created: outcome.threads_created,
        processes_created: outcome.processes_created,
        gil_switches: gil::forced_switches(),
        ..Default::default()
    };
    let mut latency = LatencyRecorder::new();
    if let Some((a, interval_ns)) = open {
        for rec in &mut outcome.records {
            rec.set_sched(Some(a.due_ns(rec.index())));
        }
        r.open = Some(OpenStats::measure(
            &outcome.records,
            &a.schedule,
            a.t0_ns,
            interval_ns,
            a.lag_summary(),
            &mut latency,
        ));
        if let Some(o) = r.open.as_mut() {
            o.grain_us = a.grain_us();
            o.releaser_runnable_us = a.releaser_runnable_us();
            o.lock_holders_runnable_us = a.lock_holders_runnable_us();
        }
    }
    let mut first_error = None;
    let mut queue_wait = LatencyRecorder::new();
    for rec in &outcome.records {
        match &rec.error {
            None => {
                r.tasks_ok += 1;
                r.bytes += rec.bytes;
                if open.is_none() {
                    latency.record_us(rec.end_ns.saturating_sub(rec.start_ns) / 1000);
                    if let Some(enqueued) = rec.sched() {
                        queue_wait.record_us(rec.start_ns.saturating_sub(enqueued) / 1000);
                    }
                }
            }
            Some(e) => {
                r.tasks_failed += 1;
                *r.failures.entry(e.kind.clone()).or_default() += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    r.latency_us = latency.summary();
    r.latency_hdr = latency.to_wire();
    r.queue_wait_us = queue_wait.summary();
    r.queue_wait_hdr = queue_wait.to_wire();
    let total = outcome.records.len();
    r.error = outcome.error.or_else(|| {
        first_error.map(|e| format!("{} of {total} tasks failed (first: {e})", r.tasks_failed))
    });
    r
}

fn pipe() -> Result<std::fs::File> {
    process::report_pipe().map_err(|e| Error::usage(e.to_string()))
}

/// In a process that concur started for part of its work: performs what the request on
/// fd 4 asks for (a run, a task, a queue worker) and reports it.
pub fn serve() -> Result<()> {
    match SelfCall::receive()? {
        SelfCall::Run(req) => run_main(req),
        SelfCall::Task { recipe, index } => task_main(recipe, index),
        SelfCall::JobsWorker {
            recipe,
            queue,
            records,
        } => worker_main(recipe, queue, records),
        SelfCall::QueueWorker(req) => {
            // It tells its supervisor through its job slots: the pipe on fd 3 is closed, so
            // that no process a job starts inherits it.
            drop(pipe()?);
            crate::jobs::supervisor::child_main(req).map(|_| ())
        }
    }
}

/// `concur __run`: runs one repetition of one cell and reports it on fd 3.
fn run_main(req: RunRequest) -> Result<()> {
    crate::base::allocator::as_a_measured_process();
    let mut out = pipe()?;
    // The page the parent's live view reads; without it (an older parent, a page that does
    // not map) the run counts into this process's own, as in-process runs do.
    if req.counter_page {
        if let Ok(page) = crate::measure::live::CounterPage::attach(process::PAGE_FD) {
            page.install();
        }
    }
    let rep = run_cell(req)?;
    let text = serde_json::to_string(&rep).map_err(|e| Error::Internal(e.to_string()))?;
    let _ = std::io::stdout().flush();
    writeln!(out, "{text}").map_err(|e| Error::io("writing the run report", e))
}

/// `concur __worker`: one thread working the run's queue until it is killed, each
/// acknowledged task's record appended to `records`.
fn worker_main(recipe: WorkloadRecipe, queue: String, records: std::path::PathBuf) -> Result<()> {
    // The workload is parsed here so that a request this binary cannot serve fails at once;
    // the worker runs that spec only, whatever else the queue holds.
    let own = recipe.install()?.spec();
    let backend = recipe
        .jobs_backend
        .clone()
        .ok_or_else(|| Error::usage("a jobs worker's request names no queue backend"))?;
    let opts = crate::jobs::worker::WorkOptions {
        concurrency: 1,
        queues: vec![queue],
        records: Some(records),
        workload_options: recipe.options,
        only: Some(own),
        ..Default::default()
    };
    crate::jobs::process::work_main(&backend, &opts).map(|_| ())
}

/// Runs one repetition of one cell in this process and condenses it into the report: the
/// work of a `__run` child, and of a library user's in-process fallback.
pub fn run_cell(req: RunRequest) -> Result<ChildReport> {
    // The run's own folder for its commands' output, in the one `--cmd-output` names (made
    // before any run): a run that cannot make it fails, saying why.
    if let Some(dir) = &req.recipe.options.cmd_output {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::io(
                format!("creating the run's --cmd-output folder '{}'", dir.display()),
                e,
            )
        })?;
    }
    let workload = req.recipe.install()?;
    // One host's share of a cell over several hosts: its tasks are the cell's every K-th.
    let workload = match &req.part {
        Some(p) => crate::workload::segmented::Segmented::wrap(workload, p.segment),
        None => workload,
    };
    let model = model::parse(&req.model)?;
    process::raise_nofile_limit();
    let start_at = req.part.map(|p| p.start_mono_ns);
    let arrivals = req.open.map(|o| {
        let t0 = start_at.unwrap_or_else(|| mono_ns() + LEAD.as_nanos() as u64);
        (
            Arrivals::new(o.schedule, t0, o.grain_us * 1000),
            o.interval_us.max(1) * 1000,
        )
    });
    let ctx = RunCtx {
        workload,
        tasks: req.tasks,
        recipe: req.recipe,
        arrivals: arrivals.as_ref().map(|(a, _)| a.clone()),
    };
    // Tasks in processes of their own are not counted live, and `fork` needs this process
    // single-threaded: those models run without the ticker (and without live lines).
    let ticker = arrivals
        .as_ref()
        .filter(|_| !model.task_processes())
        .map(|(a, i)| live_ticker(a.clone(), *i));
    // A closed share starts at the common instant too (an open one's first arrival is due then).
    if let (Some(at), None) = (start_at, &arrivals) {
        crate::model::arrivals::sleep_until(at);
    }
    crate::measure::live::begin(ctx.tasks);
    // The tasks the timeline keeps, and a buffer for the phases they show where this run's
    // timeline is kept and its workload or model has phases to see.
    let keep = measure::phases::Sample {
        tasks: req.tasks,
        cap: ctx.recipe.settings.trace_tasks,
    };
    let per_task = phases_per_task(&ctx, &*model);
    if req.trace && per_task > 0 {
        let mut book = measure::phases::Book::new(keep, per_task);
        if let Some(p) = &req.part {
            book = book.with_segment(p.segment.index, p.segment.of);
        }
        measure::phases::install(book);
        gil::trace(ctx.recipe.gil && !model.task_processes());
    }
    // What the kernel reads to time the tasks' waits: this thread's, which every thread and
    // process the model starts inherits.
    let timers = measure::slack::ThreadTimers::current();
    let t0 = mono_ns();
    let mut outcome = model.run(&ctx);
    gil::trace(false);
    let book = measure::phases::uninstall();
    // The parent samples the tree's PSS now, at the run's end, before anything is freed.
    crate::measure::live::run_ended(crate::measure::live::RUN_END_SAMPLE_WAIT);
    let first_task_ns = start_at.and_then(|at| {
        let first = outcome.records.iter().map(|r| r.start_ns).min()?;
        Some(first as i64 - at as i64)
    });
    let wall_s = mono_ns().saturating_sub(t0) as f64 / 1e9;
    if let Some((stop, handle)) = ticker {
        drop(stop);
        let _ = handle.join();
    }
    // Each task's lane, where the model could not record it as it ran, then the sampled
    // timeline with the tasks behind it (one sort of the records, after the run).
    let lanes = model.lanes();
    lanes.assign(&mut outcome.records);
    if let Some((a, _)) = &arrivals {
        for rec in &mut outcome.records {
            rec.set_sched(Some(a.due_ns(rec.index())));
        }
    }
    // A host's share is drawn on the common start's clock, so the hosts' tracks line up.
    let base = start_at.unwrap_or(t0);
    let (timeline, tasks) =
        measure::lanes::sample(&outcome.records, base, keep, lanes, book.as_deref());
    let wakeups = match (ctx.workload.wait(), &arrivals) {
        (Some(d), None) => Wakeups::measure(&outcome.records, t0, d.as_nanos() as u64).map(|w| {
            let slack = measure::slack::of_model(&model.family())
                .map(|r| measure::slack::Slack::of(r.primitive, d, timers));
            Wakeups { slack, ..w }
        }),
        _ => None,
    };
    let mut rep = report_open(outcome, wall_s, arrivals.as_ref().map(|(a, i)| (&**a, *i)));
    rep.timeline_us = Some(timeline);
    rep.timeline_tasks = Some(tasks);
    rep.connections = ctx.workload.http().and_then(|h| h.connections());
    rep.pid = std::process::id();
    rep.first_task_ns = first_task_ns;
    rep.wakeups = wakeups;
    Ok(rep)
}

/// How many phase events a traced task of this run keeps: what its workload and model can
/// show (HTTP's five, the lock's first hand-offs, a task process's start and exit, a job's
/// wait in the queue and acknowledgement); 0 for none.
fn phases_per_task(ctx: &RunCtx, model: &dyn model::Model) -> usize {
    use measure::phases::{
        HTTP_PHASES_PER_TASK, JOB_PHASES_PER_TASK, LOCK_PHASES_PER_TASK, PROCESS_PHASES_PER_TASK,
    };
    let mut n = 0;
    if ctx.workload.http().is_some() && model.sees_http_phases() {
        n += HTTP_PHASES_PER_TASK;
    }
    if ctx.recipe.gil && !model.task_processes() {
        n += LOCK_PHASES_PER_TASK;
    }
    if model.process_start_phases() {
        n += PROCESS_PHASES_PER_TASK;
    }
    if model.is_queue() && !model.task_processes() {
        n += JOB_PHASES_PER_TASK;
    }
    n
}

/// Writes a [`LiveLine`] on stderr every `interval_ns` until the returned sender is dropped.
fn live_ticker(
    a: Arc<Arrivals>,
    interval_ns: u64,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        let period = std::time::Duration::from_nanos(interval_ns);
        let mut last = 0u64;
        // Dropping the sender disconnects the channel: the run is over.
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
            let now = mono_ns();
            let (ended, failed) = crate::measure::live::counts();
            let t_s = now.saturating_sub(a.t0_ns) as f64 / 1e9;
            let line = LiveLine {
                t_s,
                due: a.due_by(now) as u64,
                ended,
                failed,
                rate: (ended - last) as f64 / period.as_secs_f64(),
                asked: if t_s <= a.schedule.span_s() {
                    a.schedule.rate_at(t_s)
                } else {
                    0.0
                },
            };
            last = ended;
            if let Ok(text) = serde_json::to_string(&line) {
                eprintln!("{LIVE_PREFIX}{text}");
            }
        }
    });
    (stop, handle)
}

/// `concur __task`: runs one task (the `spawn` model's child) and reports it on fd 3.
fn task_main(recipe: WorkloadRecipe, index: usize) -> Result<()> {
    let mut out = pipe()?;
    let workload = recipe.install()?;
    let rec = run_task(&*workload, index);
    let _ = std::io::stdout().flush();
    out.write_all(rec.to_line().as_bytes())
        .map_err(|e| Error::io("writing the task report", e))
}
