//! Models: how N tasks are run. Each model is one file here plus one line in [`REGISTRY`];
//! the spec grammar is `NAME[:WORKERS]`.
//!
//! A model never knows which workload it runs: it calls [`run_task`] (blocking) or
//! [`run_task_async`] for each task and returns the [`TaskRecord`]s.

mod actor;
pub mod arrivals;
mod async_local;
mod async_mt;
mod curl_connect;
mod curl_multi;
mod curl_shards;
mod fork;
mod green;
mod jobs;
pub(crate) mod os_thread;
mod pool;
mod rayon_pool;
pub(crate) mod selfcall;
mod seq;
mod spawn;
mod thread;

use std::sync::Arc;

use crate::base::error::{Error, Input};
use crate::measure::lanes::Lanes;
use crate::measure::{mono_ns, TaskRecord};
use crate::workload::{self, guarded_run, Workload};

pub use crate::model::selfcall::WorkloadRecipe;

/// What a model gets for one run.
pub struct RunCtx {
    /// The workload, already parsed.
    pub workload: Arc<dyn Workload>,
    /// How many tasks to run.
    pub tasks: usize,
    /// How to re-create the workload in another process.
    pub recipe: WorkloadRecipe,
    /// Open-model runs (`--rate`): when each task is released; `None` hands all tasks to the
    /// model at once (a closed batch).
    pub arrivals: Option<Arc<arrivals::Arrivals>>,
}

/// What a model returns for one run.
#[derive(Debug, Default)]
pub struct ModelOutcome {
    /// One record per task, in any order.
    pub records: Vec<TaskRecord>,
    /// OS threads the model created.
    pub threads_created: usize,
    /// Processes the model created.
    pub processes_created: usize,
    /// Why the run as a whole failed (e.g. "could create K of N threads: ..."), if it did.
    pub error: Option<String>,
}

/// How N tasks are run.
pub trait Model: Send + Sync {
    /// The canonical spec, which parses back to the same model.
    fn spec(&self) -> String;
    /// The configured worker count, `None` for models without one.
    fn workers(&self) -> Option<usize>;
    /// How many of `tasks` tasks may run at once.
    fn parallelism(&self, tasks: usize) -> usize;
    /// Whether this model can run `w` (with the interpreter-lock emulation on or off); the
    /// reason when it cannot. Checked once, when the plan is built.
    fn check(&self, _w: &dyn Workload, _gil: bool) -> Result<(), String> {
        Ok(())
    }
    /// Runs `ctx.tasks` tasks and returns their records.
    fn run(&self, ctx: &RunCtx) -> ModelOutcome;
    /// The model's name without its worker count (`pool` for `pool:4`).
    fn family(&self) -> String {
        let spec = self.spec();
        spec.split(':').next().unwrap_or_default().to_string()
    }
    /// Whether this is the reference model that speedups are taken over (`seq`).
    fn is_baseline(&self) -> bool {
        false
    }
    /// Whether each task (or worker) runs in a process of its own.
    fn task_processes(&self) -> bool {
        false
    }
    /// Whether an HTTP task's phases (connect, TLS, send, wait, read) are recorded under this
    /// model: every client records them (curl's own, the async, blocking and green ones), into
    /// the run's process, so wherever the tasks run in it.
    fn sees_http_phases(&self) -> bool {
        !self.task_processes()
    }
    /// Whether the model records each task's process start and exit (`fork`, `spawn`).
    fn process_start_phases(&self) -> bool {
        false
    }
    /// Whether tasks go through a job queue, so that the cell reads as jobs per second.
    fn is_queue(&self) -> bool {
        false
    }
    /// Whether the model needs the Redis server that `--jobs-backend` names.
    fn needs_redis(&self) -> bool {
        false
    }
    /// What a task's lane (its worker in a trace) is. The default, slots assigned after the
    /// run, is right for any model that bounds tasks in flight; a model that knows its
    /// worker records it and says [`Lanes::Worker`].
    fn lanes(&self) -> Lanes {
        Lanes::Slot
    }
    /// Whether the model's HTTP client speaks HTTP/2 (`--http2`): one of [`HTTP2_MODELS`].
    fn speaks_http2(&self) -> bool {
        HTTP2_MODELS.contains(&self.family().as_str())
    }

    /// Whether the model's HTTP client speaks HTTP/3 (`--http3`): one of [`HTTP3_MODELS`].
    fn speaks_http3(&self) -> bool {
        HTTP3_MODELS.contains(&self.family().as_str())
    }
}

/// The models whose HTTP client speaks HTTP/2 (`--http2`); the others are refused with it.
pub const HTTP2_MODELS: &[&str] = &["async", "async-local", "curl"];

/// The models whose HTTP client speaks HTTP/3 (`--http3`, quinn and h3 on tokio); the others
/// are refused with it.
pub const HTTP3_MODELS: &[&str] = &["async", "async-local"];

/// Whether this build's libcurl waits on its sockets with `select()` (built without
/// `HAVE_POLL`, as curl-sys builds it when concur is another crate's dependency and that
/// crate's build does not set `CFLAGS=-DHAVE_POLL`): `curl:W` then connects its TCP sockets
/// itself, so that libcurl never waits on a connect (docs/library.md). Asked once per
/// process.
pub fn libcurl_waits_with_select() -> bool {
    curl_connect::select_bound()
}

/// Runs task `index` on the calling thread and records it.
#[inline]
pub fn run_task(w: &dyn Workload, index: usize) -> TaskRecord {
    crate::measure::live::started();
    let start_ns = mono_ns();
    let result = guarded_run(w, index);
    record(index, start_ns, result)
}

/// Runs task `index` through the workload's async entry point ([`Workload::start_async`], whose
/// future this one holds inline) and records it; a panic is a failed task (kind `panic`), as in
/// [`run_task`].
pub async fn run_task_async(w: Arc<dyn Workload>, index: usize) -> TaskRecord {
    crate::measure::live::started();
    let start_ns = mono_ns();
    // A closure may panic while it builds its future, before there is a future to guard.
    let result =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.start_async(index))) {
            Ok(future) => workload::CatchPanic(future).await,
            Err(payload) => Err(workload::TaskError::new(
                "panic",
                workload::panic_message(&*payload),
            )),
        };
    record(index, start_ns, result)
}

/// Records for tasks that never ran because their thread or process could not be created.
pub(crate) fn never_started(
    indices: impl IntoIterator<Item = usize>,
    reason: &str,
) -> Vec<TaskRecord> {
    indices
        .into_iter()
        .map(|i| TaskRecord::not_started(i, workload::TaskError::new("spawn", reason)))
        .collect()
}

#[inline]
fn record(index: usize, start_ns: u64, result: Result<u64, workload::TaskError>) -> TaskRecord {
    let end_ns = mono_ns();
    crate::measure::live::ended(result.is_ok());
    match result {
        Ok(bytes) => TaskRecord {
            index: crate::measure::task_index(index),
            start_ns,
            end_ns,
            bytes,
            error: None,
            sched_ns: None,
            worker: 0,
        },
        Err(e) => TaskRecord {
            index: crate::measure::task_index(index),
            start_ns,
            end_ns,
            bytes: 0,
            error: Some(Box::new(e)),
            sched_ns: None,
            worker: 0,
        },
    }
}

/// One built-in model: its name, whether it takes a worker count, a line of help, a builder.
pub struct Entry {
    /// The name before the `:`.
    pub name: &'static str,
    /// Whether `:WORKERS` is accepted (required models default it to the core count).
    pub takes_workers: bool,
    /// What it does, in one line.
    pub help: &'static str,
    /// Builds the model from its worker count (always `Some` when `takes_workers`).
    pub build: fn(Option<usize>) -> Box<dyn Model>,
}

impl Entry {
    /// The spec grammar: `pool:W`, or `seq` for models without workers.
    pub fn usage(&self) -> String {
        if self.takes_workers {
            format!("{}:W", self.name)
        } else {
            self.name.to_string()
        }
    }
}

/// Every built-in model. A new model is one file plus one line here.
pub const REGISTRY: &[Entry] = &[
    seq::ENTRY,
    thread::ENTRY,
    spawn::ENTRY,
    fork::ENTRY,
    pool::ENTRY,
    rayon_pool::ENTRY,
    async_mt::ENTRY,
    async_local::ENTRY,
    curl_multi::ENTRY,
    green::ENTRY,
    actor::ENTRY,
    jobs::ENTRY,
    jobs::MEMORY_ENTRY,
    jobs::REDIS_ENTRY,
    jobs::PROCS_ENTRY,
];

/// The largest worker count accepted: the most tasks a cell takes, so that every task can be
/// its own worker (the tasks study's `async:1000000`).
pub const MAX_WORKERS: usize = 1_000_000;

/// The machine's core count (what the OS lets this process use).
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn allowed() -> String {
    REGISTRY
        .iter()
        .map(Entry::usage)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Expands a worker scan into one spec per worker count: `pool:1,2,4,8` lists them,
/// `async:1..64` takes the powers of two from the first to the last (both ends included,
/// e.g. `3..20` is 3, 4, 8, 16, 20). Any other spec comes back alone, as typed.
pub fn expand_scan(spec: &str) -> Result<Vec<String>, Error> {
    one_model(spec)?;
    let Some((name, list)) = spec.split_once(':') else {
        return Ok(vec![spec.to_string()]);
    };
    if !list.contains(',') && !list.contains("..") {
        return Ok(vec![spec.to_string()]);
    }
    let bad = |why: String| Error::bad(Input::Model, format!("bad model '{spec}': {why}"));
    match REGISTRY.iter().find(|e| e.name == name) {
        Some(e) if e.takes_workers => {}
        Some(e) => {
            return Err(bad(format!(
                "{name} takes no worker count, so it cannot scan one ({})",
                e.help
            )))
        }
        None => {
            return Err(Error::bad(
                Input::Model,
                format!(
                    "unknown model '{name}' in '{spec}' (allowed: {})",
                    allowed()
                ),
            ))
        }
    }
    let number = |w: &str| {
        parse_workers(w.trim()).map_err(|why| bad(format!("{why} (a scan is W1,W2,… or LO..HI)")))
    };
    let workers: Vec<usize> = match list.split_once("..") {
        Some((lo, hi)) => {
            let (lo, hi) = (number(lo)?, number(hi)?);
            if lo > hi {
                return Err(bad(format!("the scan {lo}..{hi} runs backwards")));
            }
            let mut v = vec![lo];
            let mut p = lo.next_power_of_two();
            while p < hi {
                if p > lo {
                    v.push(p);
                }
                p *= 2;
            }
            if hi > lo {
                v.push(hi);
            }
            v
        }
        None => list.split(',').map(number).collect::<Result<_, _>>()?,
    };
    let mut seen = std::collections::BTreeSet::new();
    Ok(workers
        .into_iter()
        .filter(|w| seen.insert(*w))
        .map(|w| format!("{name}:{w}"))
        .collect())
}

/// Refuses several models in one spec (`seq,thread,pool:4`): a comma inside a spec lists a
/// scan's worker counts (`pool:1,2,4`), so a list of models is one `-m` each.
fn one_model(spec: &str) -> Result<(), Error> {
    let mut pieces = spec.split(',');
    let first = pieces.next().unwrap_or_default();
    let is_model = |p: &str| {
        let name = p.split(':').next().unwrap_or_default().trim();
        REGISTRY.iter().any(|e| e.name == name)
    };
    let rest: Vec<&str> = pieces.collect();
    // `seq,thread`: the comma is in the name; `pool:4,thread`: a model where a count should be.
    let several = !rest.is_empty() && (!first.contains(':') || rest.iter().any(|p| is_model(p)));
    if !several {
        return Ok(());
    }
    let flags: Vec<String> = std::iter::once(first)
        .chain(rest)
        .map(|p| format!("-m {}", p.trim()))
        .collect();
    Err(Error::bad(
        Input::Model,
        format!(
            "bad model '{spec}': -m takes one model per flag: {} (a comma inside one spec lists worker counts, as in pool:1,2,4)",
            flags.join(" ")
        ),
    ))
}

/// Parses a worker count `W` (of `pool:W`, a scan's element, a `--peer` label's `:W`): the
/// one place its range is decided.
pub fn parse_workers(w: &str) -> Result<usize, String> {
    match w.parse::<usize>() {
        Ok(n) if (1..=MAX_WORKERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "workers '{w}' must be a whole number from 1 to {MAX_WORKERS}"
        )),
    }
}

/// Parses a model spec (`seq`, `pool:4`; a model that takes workers defaults to the cores)
/// and builds the model.
pub fn parse(spec: &str) -> Result<Box<dyn Model>, Error> {
    Ok(ModelSpec::parse(spec)?.build())
}

/// A model of the registry with its worker count: what the plan checks a model spec into and
/// its cells keep, so that nothing after the plan parses the text again. A request to another
/// process carries its text (`pool:4`, [`ModelSpec`]'s `Display`), which that process decodes
/// with [`ModelSpec::parse`], the plan's own parser.
#[derive(Clone, Copy)]
pub struct ModelSpec {
    entry: &'static Entry,
    workers: Option<usize>,
}

impl ModelSpec {
    /// Checks a model spec: a name of the registry, with a worker count from 1 to
    /// [`MAX_WORKERS`] where it takes one (the cores when none is given).
    pub fn parse(spec: &str) -> Result<ModelSpec, Error> {
        let (name, workers) = match spec.split_once(':') {
            Some((n, w)) => (n, Some(w)),
            None => (spec, None),
        };
        let entry = REGISTRY.iter().find(|e| e.name == name).ok_or_else(|| {
            Error::bad(
                Input::Model,
                format!(
                    "unknown model '{name}' in '{spec}' (allowed: {})",
                    allowed()
                ),
            )
        })?;
        let workers =
            match (entry.takes_workers, workers) {
                (false, None) => None,
                (false, Some(w)) => {
                    let why = format!("{name} takes no worker count ({}), got '{w}'", entry.help);
                    return Err(Error::bad(
                        Input::Model,
                        format!("bad model '{spec}': {why}"),
                    ));
                }
                (true, None) => Some(cores()),
                (true, Some(w)) => Some(parse_workers(w).map_err(|why| {
                    Error::bad(Input::Model, format!("bad model '{spec}': {why}"))
                })?),
            };
        Ok(ModelSpec { entry, workers })
    }

    /// The model, ready to run.
    pub fn build(&self) -> Box<dyn Model> {
        (self.entry.build)(self.workers)
    }
}

/// The canonical spec: `pool:4`, `seq`.
impl std::fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.workers {
            Some(w) => write!(f, "{}:{w}", self.entry.name),
            None => f.write_str(self.entry.name),
        }
    }
}

impl std::fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelSpec({self})")
    }
}

impl PartialEq for ModelSpec {
    fn eq(&self, other: &ModelSpec) -> bool {
        self.entry.name == other.entry.name && self.workers == other.workers
    }
}

impl Eq for ModelSpec {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every model that can run `sleep:D` has the wait strace saw its tasks sleep in
    /// (`measure::slack::MODELS`), and that table names no model the registry lacks.
    #[test]
    fn every_model_that_sleeps_has_its_traced_wait() {
        let sleep = crate::workload::parse("sleep:1s", &Default::default()).expect("sleep");
        for e in REGISTRY {
            let model = (e.build)(e.takes_workers.then_some(2));
            let runs = model.check(&*sleep, false).is_ok();
            assert_eq!(
                crate::measure::slack::of_model(e.name).is_some(),
                runs,
                "{}: runs sleep: {runs}, against measure::slack::MODELS",
                e.name
            );
        }
        for w in crate::measure::slack::MODELS {
            assert!(REGISTRY.iter().any(|e| e.name == w.row), "{}", w.row);
        }
    }

    #[test]
    fn a_model_spec_reads_back_as_the_models_own_spec() {
        for e in REGISTRY {
            let text = if e.takes_workers {
                format!("{}:3", e.name)
            } else {
                e.name.to_string()
            };
            let spec = ModelSpec::parse(&text).unwrap();
            assert_eq!(spec.to_string(), spec.build().spec(), "{text}");
            assert_eq!(spec.to_string(), text);
            assert_eq!(ModelSpec::parse(&spec.to_string()).unwrap(), spec);
        }
    }

    #[test]
    fn scans_expand_to_one_spec_per_worker_count() {
        let e = |s: &str| expand_scan(s).unwrap();
        assert_eq!(e("pool:1,2,4,8"), ["pool:1", "pool:2", "pool:4", "pool:8"]);
        assert_eq!(
            e("async:1..64"),
            ["async:1", "async:2", "async:4", "async:8", "async:16", "async:32", "async:64"]
        );
        assert_eq!(
            e("rayon:3..20"),
            ["rayon:3", "rayon:4", "rayon:8", "rayon:16", "rayon:20"]
        );
        assert_eq!(e("pool:4"), ["pool:4"]);
        assert_eq!(e("seq"), ["seq"]);
        for (s, needle) in [
            ("seq:1,2", "takes no worker count"),
            ("pool:8..2", "backwards"),
            ("pool:1,x", "'x'"),
            ("nope:1,2", "unknown model 'nope'"),
        ] {
            let err = expand_scan(s).unwrap_err().to_string();
            assert!(
                err.contains(needle) && err.contains(s.split(':').next().unwrap()),
                "{s}: {err}"
            );
        }
    }

    #[test]
    fn several_models_in_one_spec_are_refused_naming_one_flag_each() {
        for (s, flags) in [
            ("seq,thread,pool:4", "-m seq -m thread -m pool:4"),
            ("pool:4,thread", "-m pool:4 -m thread"),
            ("pool:1..4,async:2", "-m pool:1..4 -m async:2"),
        ] {
            let err = expand_scan(s).unwrap_err();
            assert_eq!(err.input(), Some(&Input::Model), "{s}");
            let err = err.to_string();
            assert!(
                err.starts_with(&format!(
                    "bad model '{s}': -m takes one model per flag: {flags} ("
                )),
                "{s}: {err}"
            );
        }
        // A scan's comma is a comma inside one spec.
        assert_eq!(expand_scan("pool:1, 2").unwrap(), ["pool:1", "pool:2"]);
    }

    #[test]
    fn specs_round_trip_and_bad_ones_are_named() {
        for s in [
            "seq",
            "thread",
            "spawn",
            "fork",
            "pool:10",
            "rayon:3",
            "async:100",
            "async-local:7",
            "actor:4",
            "jobs:2",
            "jobs-memory:3",
            "jobs-redis:5",
            "jobs-procs:2",
        ] {
            assert_eq!(parse(s).unwrap().spec(), s);
        }
        assert_eq!(parse("pool").unwrap().workers(), Some(cores()));
        for (s, needle) in [
            ("pool:0", "'0'"),
            ("pool:x", "'x'"),
            ("nope", "unknown model 'nope'"),
            ("seq:3", "takes no worker count"),
        ] {
            let e = parse(s).err().unwrap().to_string();
            assert!(e.contains(needle), "{s}: {e}");
        }
    }
}
