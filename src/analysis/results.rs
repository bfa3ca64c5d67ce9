//! The results file: JSON Lines, one `meta` line, then one `run` line per finished run and one
//! `cell` line per finished cell (documented in `docs/results-schema.md`). This is the contract
//! between the runner, the reports and users' scripts.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
pub use crate::measure::conn::Connections;
use crate::measure::latency::{LatencySummary, LatencyWire};
use crate::measure::open::OpenStats;
use crate::measure::wakeups::Wakeups;
pub use crate::workload::Nature;

/// The schema version written in the meta line; bumped when a field is renamed or removed.
pub const SCHEMA: u32 = 1;

/// One line of the results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    /// The first line: who wrote the file, when, on which machine.
    Meta(Meta),
    /// One finished run.
    Run(RunResult),
    /// One finished cell's statistics.
    Cell(CellResult),
}

/// The machine a study ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// One-minute load average when the study started.
    pub load1: f64,
    /// CPU frequency governor, where the kernel exposes it.
    pub governor: Option<String>,
    /// Total memory, KiB.
    pub mem_total_kib: Option<u64>,
    /// Fraction of all CPU time busy in the quarter second before the study started.
    #[serde(default)]
    pub cpu_busy: Option<f64>,
}

/// Fraction of all CPU time busy, before a study, above which the machine counts as loaded.
pub const BUSY_THRESHOLD: f64 = 0.25;

impl Machine {
    /// Whether other work kept the machine busy when the study started.
    pub fn loaded(&self) -> bool {
        self.cpu_busy.is_some_and(|b| b > BUSY_THRESHOLD)
    }
}

/// The meta line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Results format version ([`SCHEMA`]).
    pub schema: u32,
    /// The concur version that wrote the file.
    pub concur: String,
    /// When the study started, RFC 3339 UTC.
    pub started: String,
    /// The machine.
    pub machine: Machine,
    /// The command line.
    #[serde(default)]
    pub command: Vec<String>,
    /// The global allocator of the concur that ran the study here (`jemalloc`, `mimalloc`,
    /// `system`, or what a program running concur as a library named): what its cells'
    /// memory and CPU were measured under. Agents of a `--hub` study and external programs
    /// have their own. None when concur ran inside a program that did not name its allocator
    /// ([`crate::base::allocator::set_allocator`]), and in files from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
    /// Notes about the plan (chosen task sizes, scaled cells).
    #[serde(default)]
    pub notes: Vec<String>,
    /// A study over several hosts (`--hub`): the agents that ran its shares, with their
    /// clocks against the hub's as measured when the study began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<MetaHost>,
}

/// One agent of a study over several hosts, on the meta line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaHost {
    /// Its name on the hub.
    pub name: String,
    /// Its host's name.
    pub host: String,
    /// Its address as the hub sees it.
    pub addr: Option<String>,
    /// Its cores.
    pub cores: usize,
    /// Its memory, KiB.
    pub mem_total_kib: Option<u64>,
    /// The concur version it runs.
    pub version: String,
    /// The hub's wall clock minus the agent's, ns (positive: the agent's is behind).
    pub clock_offset_ns: i64,
    /// That offset's uncertainty, ns.
    pub clock_uncertainty_ns: u64,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Every task succeeded.
    Ok,
    /// The run finished and measured, but some tasks failed or the model reported an error.
    Failed,
    /// The run's process died (signal, panic, bad exit) before reporting.
    Crashed,
    /// The run was killed at `--timeout`.
    Timeout,
    /// The run's process could not be started.
    Spawn,
    /// The user interrupted the run.
    Interrupted,
    /// A hook (`--setup`, `--prepare`, `--conclude`, `--cleanup`) failed: the run was not
    /// made, or is not counted.
    Hook,
}

impl RunStatus {
    /// Whether the run reported measurements that statistics may use.
    pub fn measured(self) -> bool {
        matches!(self, RunStatus::Ok | RunStatus::Failed)
    }
}

/// Identifies a cell: (study, workload, model, tasks, gil, http2, http3).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellKey {
    /// The study it belongs to.
    pub study: String,
    /// Canonical workload spec.
    pub workload: String,
    /// Canonical model spec.
    pub model: String,
    /// Task count N.
    pub tasks: usize,
    /// Whether the interpreter-lock emulation was on.
    pub gil: bool,
    /// Whether the cell asked for HTTP/2 (`--http2`; the crawl study's `h2` rows beside its
    /// HTTP/1.1 ones). Absent (false) on every other cell and in files from before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub http2: bool,
    /// Whether the cell asked for HTTP/3 (`--http3`; the crawl study's `h3` rows). Absent
    /// (false) on every other cell and in files from before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub http3: bool,
    /// Over how many hosts the cell's work was split (`--hub … --hosts K`); absent for a
    /// cell run on this machine alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<usize>,
}

impl CellKey {
    /// The row's name in a table: the model spec, with ` h2` when the cell asked for HTTP/2,
    /// ` h3` for HTTP/3.
    /// With `@K hosts` when its work was split over K hosts.
    pub fn model_label(&self) -> String {
        let mut label = self.model.clone();
        if self.http2 {
            label.push_str(" h2");
        }
        if self.http3 {
            label.push_str(" h3");
        }
        if let Some(k) = self.hosts {
            label.push_str(&format!(" @{k} host{}", if k == 1 { "" } else { "s" }));
        }
        label
    }

    /// `thread ×10` style label (`async:100 h2 ×1000` over HTTP/2).
    pub fn label(&self) -> String {
        format!("{} ×{}", self.model_label(), self.tasks)
    }
}

/// What a cell is, decided once when the plan is built from the workload and model objects,
/// and carried on every run and cell line so that the analysis and the reports never look at
/// spec strings or model names.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Traits {
    /// What bounds the workload (`nature`, and `delay_s` for a delay).
    #[serde(flatten)]
    pub nature: Nature,
    /// Whether tasks wait rather than compute ([`Nature::waits`]).
    #[serde(default)]
    pub waits: bool,
    /// Whether each task is one HTTP request (tables show throughput and latency).
    #[serde(default)]
    pub http: bool,
    /// The model's name without its worker count (`pool` for `pool:4`), for grouping curves.
    #[serde(default)]
    pub family: String,
    /// Whether this model is the reference the speedups are taken over (`seq`).
    #[serde(default)]
    pub baseline: bool,
    /// Whether the model runs each task (or worker) in a process of its own.
    #[serde(default)]
    pub task_processes: bool,
    /// Whether the model runs tasks as jobs through a queue (read as jobs/s).
    #[serde(default)]
    pub queue: bool,
    /// Whether the study planned this cell to fail (a thread-exhaustion cell): its failures
    /// do not make the exit status 1.
    #[serde(default)]
    pub expected_failure: bool,
    /// Whether the cell is an external program (`--peer`, `--classic`), measured like a run
    /// but bringing its own concurrency; its `model` is the label it was given.
    #[serde(default)]
    pub external: bool,
}

/// Where a run happened: in a fresh process of its own (the CLI, and a library user's binary
/// that calls [`crate::init`]), or inside the calling process (a library user's binary that
/// does not), where runtimes, pools and the allocator carry over between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// A fresh child process per run.
    #[default]
    FreshProcess,
    /// The calling process.
    InProcess,
}

/// One run line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The cell.
    #[serde(flatten)]
    pub key: CellKey,
    /// The model's worker count, null for models without one.
    pub workers: Option<usize>,
    /// How many tasks could run at once under this model.
    pub parallelism: usize,
    /// What the cell is (nature, waits, http, baseline...), decided when the plan was built.
    #[serde(flatten)]
    pub traits: Traits,
    /// Repetition number, 0-based.
    pub rep: usize,
    /// Where the run happened.
    #[serde(default)]
    pub isolation: Isolation,
    /// The process id of the run's process (null for lines written before it was recorded).
    #[serde(default)]
    pub pid: Option<u32>,
    /// How the run ended.
    pub status: RunStatus,
    /// Wall time of the tasks (measured by the run's process; by the parent when it crashed).
    pub wall_s: f64,
    /// User CPU of the run's process and its descendants.
    pub user_s: f64,
    /// System CPU of the run's process and its descendants.
    pub sys_s: f64,
    /// Peak RSS of the largest single process, KiB.
    pub max_rss_kib: u64,
    /// Peak total PSS of the whole process tree (sampled), KiB.
    pub tree_pss_kib: Option<u64>,
    /// Total PSS of the process tree sampled when every task had started and the run was not
    /// over (the child's counter page told the parent), KiB: the tree with every task in it.
    /// Absent where no such sample was taken (no counter page: external programs, in-process
    /// runs; a run whose tasks ended before the sampler saw them all started) and in files
    /// from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_pss_all_started_kib: Option<u64>,
    /// Total PSS of the process tree sampled when the child said its tasks were over, before
    /// it freed anything, KiB. Absent where no such sample was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_pss_end_kib: Option<u64>,
    /// Voluntary context switches.
    pub ctx_voluntary: u64,
    /// Involuntary context switches.
    pub ctx_involuntary: u64,
    /// OS threads the model created.
    pub threads_created: usize,
    /// Processes the model created.
    pub processes_created: usize,
    /// Tasks that succeeded.
    pub tasks_ok: usize,
    /// Tasks that failed.
    pub tasks_failed: usize,
    /// Failed tasks by error kind.
    #[serde(default)]
    pub failures: BTreeMap<String, usize>,
    /// Bytes produced by all tasks: the run's checksum.
    pub bytes: u64,
    /// Times the emulated interpreter lock was handed over at its switch interval.
    #[serde(default)]
    pub gil_switches: u64,
    /// Null, or why the run failed, in one line.
    pub error: Option<String>,
    /// Task latency percentiles, microseconds.
    pub latency_us: Option<LatencySummary>,
    /// Most requests the in-process server handled at once during the run (ground truth that
    /// the concurrency was real); null when no in-process server served the run.
    #[serde(default)]
    pub server_peak_in_flight: Option<i64>,
    /// HTTP: the connections the run's client opened and reused, and what opening them cost.
    #[serde(flatten)]
    pub conn: Connections,
    /// `[start, end]` of each task, µs from the run's start, ordered by start; only in a cell's
    /// first counted run (rep 0), evenly sampled down to 2,000 tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline_us: Option<Vec<[u64; 2]>>,
    /// The tasks behind `timeline_us`, span by span (index, lane, bytes, failure kind), what
    /// a lane is, and how many tasks the run had and the timeline kept; absent in files
    /// from before it was added and in runs merged over several hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline_tasks: Option<Box<crate::measure::lanes::TimelineTasks>>,
    /// External cells with a `CONCUR` line: the process's wall minus the work's own wall
    /// (interpreter start-up, imports, teardown); null for every other run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_s: Option<f64>,
    /// Open-model runs (`--rate`): asked and achieved rates, service, queue, lag, series
    /// (`latency_us` is then corrected for coordinated omission). Absent on closed runs.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenStats>,
    /// `--rate auto`: the search that chose this run's rate. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_search: Option<RateSearch>,
    /// A closed run of a queue model (`jobs…:W`): each job's wait from its enqueue to its
    /// start, µs (over several hosts: their histograms merged, exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait_us: Option<LatencySummary>,
    /// A closed run of a waiting workload (`sleep:D`): the time to start every task and how
    /// late the wake-ups came (an external program's own figures, from its `CONCUR` line;
    /// over several hosts: the worst host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<Wakeups>,
    /// A run over several hosts (`--hub … --hosts K`): each host's part, the merged latency
    /// histogram, the start spread and what share of the work the hosts covered. Absent for
    /// a run on this machine alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<HubRun>,
}

/// Beyond this spread of the hosts' first tasks (ms), the table warns.
pub const SPREAD_WARN_MS: f64 = 5.0;

/// How a run over several hosts came together, on its run line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HubRun {
    /// Over how many hosts the work was split.
    pub hosts: usize,
    /// The fraction of the cell's tasks (or arrivals) that hosts performed: 1 unless a host
    /// was lost or refused.
    pub covered: f64,
    /// Tasks (or arrivals) that lost or refusing hosts did not perform.
    pub lost_tasks: usize,
    /// The spread of the hosts' first task starts, ms (on the hub's clock, through each
    /// host's measured offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_spread_ms: Option<f64>,
    /// From the study's sending the work to the last host's first task, seconds: what
    /// coordinating the hosts cost this run (the announced lead included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination_s: Option<f64>,
    /// The merged latency histogram (V2, with the exact count, min, max and sum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hdr: Option<LatencyWire>,
    /// Where the study's delay server ran: `this host` (the study's own) or an agent's name;
    /// absent when the study had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_host: Option<String>,
    /// The CPU the delay server's process used during this run, seconds (to set beside the
    /// clients' CPU: per task, it is the server's cost per request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_s: Option<f64>,
    /// Each host's part.
    pub parts: Vec<HostPart>,
}

/// One host's part of a run over several hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostPart {
    /// The agent's name on the hub.
    pub host: String,
    /// Which share, from 0.
    pub share: usize,
    /// Its tasks (or arrivals).
    pub tasks: usize,
    /// How it ended (`lost`: the agent stopped beating; `refused`: it would not run it).
    pub status: PartStatus,
    /// Why, when it did not end well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its run line's own figures (absent for a lost or refused part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<PartFigures>,
    /// The hub's wall clock minus the agent's, ns (positive: the agent's is behind).
    pub clock_offset_ns: i64,
    /// That offset's uncertainty, ns.
    pub clock_uncertainty_ns: u64,
    /// When its first task started, ms after the announced common start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_task_ms: Option<f64>,
    /// Its latency histogram (V2), for re-merging or checking the merged one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hdr: Option<LatencyWire>,
}

/// How one host's part ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartStatus {
    /// Its run's status was `ok`.
    Ok,
    /// Its run ended otherwise (failed tasks, crash, timeout): see `run.status`.
    Failed,
    /// The agent stopped beating (killed, network gone) before answering.
    Lost,
    /// The agent would not run it (another version, a command without `--allow-commands`).
    Refused,
}

/// The figures of one host's run line that its part row shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartFigures {
    /// Its run's status.
    pub status: RunStatus,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// User CPU, seconds.
    pub user_s: f64,
    /// System CPU, seconds.
    pub sys_s: f64,
    /// Peak PSS of its process tree, KiB.
    pub tree_pss_kib: Option<u64>,
    /// Tasks that succeeded.
    pub tasks_ok: usize,
    /// Tasks that failed.
    pub tasks_failed: usize,
    /// Its latency percentiles, µs.
    pub latency_us: Option<LatencySummary>,
    /// A closed run of a queue model: its jobs' enqueue-to-start wait, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait_us: Option<LatencySummary>,
    /// An open run: whether this host fell behind its share of the schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<bool>,
    /// An open run: this host's achieved rate, tasks per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_achieved: Option<f64>,
}

/// One probe of `--rate auto`: a short open run at one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The asked rate, tasks per second.
    pub rate: f64,
    /// The achieved rate, tasks per second.
    pub achieved: Option<f64>,
    /// The SLO's percentile of the corrected latency, µs.
    pub latency_us: Option<u64>,
    /// Whether the run ended well, kept the SLO and achieved 99% of the asked rate.
    pub ok: bool,
}

/// `--rate auto`: the highest rate found that keeps the SLO, and every probe on the way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateSearch {
    /// The objective, as given (`p99<100ms`).
    pub slo: String,
    /// The highest rate that kept it, tasks per second; null when even the lowest failed.
    pub sustained: Option<f64>,
    /// The probes, in the order run.
    pub probes: Vec<Probe>,
}

/// One cell line: statistics over the cell's measured runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// The cell.
    #[serde(flatten)]
    pub key: CellKey,
    /// The model's worker count.
    pub workers: Option<usize>,
    /// How many tasks could run at once.
    pub parallelism: usize,
    /// Runs recorded.
    pub runs: usize,
    /// Runs that did not end `ok`.
    pub runs_failed: usize,
    /// Median wall time.
    pub wall_median_s: Option<f64>,
    /// 95% bootstrap CI of the median wall time.
    pub wall_ci95_s: Option<[f64; 2]>,
    /// Fastest run.
    pub wall_min_s: Option<f64>,
    /// Slowest run.
    pub wall_max_s: Option<f64>,
    /// Mean wall time.
    pub wall_mean_s: Option<f64>,
    /// Standard deviation of wall time.
    pub wall_sd_s: Option<f64>,
    /// Median user CPU.
    pub user_median_s: Option<f64>,
    /// Median system CPU.
    pub sys_median_s: Option<f64>,
    /// Median peak RSS of the largest process, KiB.
    pub max_rss_kib: Option<u64>,
    /// Median peak PSS of the process tree, KiB.
    pub tree_pss_kib: Option<u64>,
    /// Median of the runs' tree PSS when every task had started, KiB (over the runs that
    /// have one; absent when none has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_pss_all_started_kib: Option<u64>,
    /// Median of the runs' tree PSS at the run's end, KiB (over the runs that have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_pss_end_kib: Option<u64>,
    /// Median wall of `seq` (same workload, tasks, lock) over this cell's median.
    pub speedup: Option<f64>,
    /// Speedup over min(parallelism, cores).
    pub efficiency: Option<f64>,
    /// (user + sys) / wall, medians.
    pub effective_cores: Option<f64>,
    /// What the hardware allows (DESIGN.md): CPU-bound N·t/min(p, cores), delay-bound ceil(N/p)·delay.
    pub ideal_s: Option<f64>,
    /// Median wall over the ideal.
    pub vs_ideal: Option<f64>,
    /// The checksum (bytes) of the first measured run, and whether every run agreed.
    pub bytes: Option<u64>,
    /// Whether every measured run produced the same checksum.
    pub bytes_consistent: bool,
    /// Task latency of the median run, microseconds.
    pub latency_us: Option<LatencySummary>,
    /// The first run error, if any.
    pub error: Option<String>,
    /// Failed tasks summed over the measured runs.
    #[serde(default)]
    pub tasks_failed: usize,
    /// Failed tasks by kind, summed over the measured runs.
    #[serde(default)]
    pub failures: BTreeMap<String, usize>,
    /// Successful tasks per second of the median run (requests/s for http cells).
    #[serde(default)]
    pub tasks_per_s: Option<f64>,
    /// The largest server peak in-flight over the runs.
    #[serde(default)]
    pub server_peak_in_flight: Option<i64>,
    /// External cells with a `CONCUR` line: median start-up (process wall minus the work's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_median_s: Option<f64>,
    /// HTTP: the median run's connections.
    #[serde(flatten)]
    pub conn: Connections,
    /// What the cell is, as its runs recorded it.
    #[serde(flatten)]
    pub traits: Traits,
    /// Where its runs happened.
    #[serde(default)]
    pub isolation: Isolation,
    /// Open-model cells: the median run's rates, service, queue and lag (no series).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenStats>,
    /// `--rate auto`: the search, as its run recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_search: Option<RateSearch>,
    /// A waiting workload (`sleep:D`): the median run's start of every task and its
    /// wake-ups' lateness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<Wakeups>,
    /// Memory per task: the tree PSS above the same row's 1-task cell (same study, workload
    /// and lock; the model without its worker count), over the extra tasks, bytes. Taken
    /// from the all-started samples (`tree_pss_all_started_kib`) where both cells have one,
    /// from the peaks (`tree_pss_kib`) otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_per_task_b: Option<f64>,
}

/// Appends lines to a results file, flushing each so an interrupted study keeps every
/// finished run.
pub struct ResultsWriter {
    out: Box<dyn Write>,
    path: Option<PathBuf>,
    /// The flag that named the file, for its errors.
    flag: String,
}

impl ResultsWriter {
    /// Creates (truncates) the results file at `path`, by the rule of every output a user
    /// names (see `os/files.rs`; `flag` in its errors); `-` means stdout.
    pub fn create(flag: &str, path: &Path) -> Result<Self> {
        if path == Path::new("-") {
            return Ok(ResultsWriter {
                out: Box::new(std::io::stdout()),
                path: None,
                flag: flag.to_string(),
            });
        }
        let file = crate::os::files::create_output(flag, path)?;
        Ok(ResultsWriter {
            out: Box::new(file),
            path: Some(path.to_path_buf()),
            flag: flag.to_string(),
        })
    }

    /// A writer that keeps nothing (a library lab without a results file).
    pub fn sink() -> Self {
        ResultsWriter {
            out: Box::new(std::io::sink()),
            path: Some(PathBuf::new()),
            flag: String::new(),
        }
    }

    /// Where the results go (`None` for stdout).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Writes one line and flushes it.
    pub fn write(&mut self, line: &Line) -> Result<()> {
        let text = serde_json::to_string(line).map_err(|e| Error::Internal(e.to_string()))?;
        writeln!(self.out, "{text}")
            .and_then(|_| self.out.flush())
            .map_err(|e| match &self.path {
                Some(p) => Error::io(format!("{} '{}': writing", self.flag, p.display()), e),
                None => Error::stdout(e),
            })
    }
}

/// Everything read back from a results file.
#[derive(Debug, Clone, Default)]
pub struct ResultsFile {
    /// The meta line, if present.
    pub meta: Option<Meta>,
    /// Every run line, in file order.
    pub runs: Vec<RunResult>,
    /// The last line, when it was cut short and left out.
    pub cut: Option<CutLine>,
}

/// A results file's last line that was cut short (no line end, not a whole JSON line): what a
/// study killed while writing leaves. The lines before it are read; it is left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutLine {
    /// The file.
    pub path: PathBuf,
    /// Its line number, from 1.
    pub line: usize,
    /// The bytes it holds.
    pub bytes: usize,
}

impl std::fmt::Display for CutLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "'{}' line {} is cut short ({} bytes, no line end: a study stopped while writing it?); it is left out, the {} lines before it are read",
            self.path.display(),
            self.line,
            self.bytes,
            self.line - 1
        )
    }
}

/// The longest line a results file may hold: 16 MiB. A run line is a few KiB, its `series`
/// (per-interval figures of an open run) about 150 bytes an interval, so a line a thousand
/// times longer than the longest real one still passes; a file that is not JSON Lines at all
/// (one endless line, a device) stops there instead of filling memory.
pub const MAX_LINE: usize = 16 << 20;

/// Fills in the traits of a run line written before they were recorded (concur 0.1 wrote
/// only `nature` and `delay_s`): the only place where they are read off the specs, and only
/// for such old files.
fn legacy_traits(r: &mut RunResult) {
    let family = r
        .key
        .model
        .split(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let t = &mut r.traits;
    t.waits = t.nature.waits();
    t.http = r.key.workload.starts_with("http:");
    t.baseline = family == "seq";
    t.task_processes = matches!(family.as_str(), "fork" | "spawn" | "jobs-procs");
    t.queue = family.starts_with("jobs");
    t.family = family;
}

/// The largest magnitude a figure of a results line may have: 1e18 (31 years in ns, an
/// exabyte in bytes) is past anything a run measures, and far enough below `f64::MAX` that
/// sums and charts of a million such figures stay finite (a `wall_s` of 1.7e308 made the sums
/// infinite and the HTML chart's axis loop forever).
pub const MAX_FIGURE: f64 = 1e18;

/// Refuses a line holding a number no run can produce (beyond [`MAX_FIGURE`] either way),
/// naming its field (`wall_s`, `latency_us.p99`, `series[3].p50`): a results line, and the
/// `CONCUR` line of an external program, whose figures become one.
pub fn check_figures(v: &serde_json::Value) -> std::result::Result<(), String> {
    check_figures_at(v, &mut String::new())
}

fn check_figures_at(v: &serde_json::Value, at: &mut String) -> std::result::Result<(), String> {
    use serde_json::Value;
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(x) if x.is_finite() && x.abs() <= MAX_FIGURE => Ok(()),
            _ => Err(format!(
                "field {} is {n}, beyond what a run can produce (at most {MAX_FIGURE:e} either way)",
                // The field's name came with the file: shown short and escaped.
                crate::os::terminal::escape_controls(&at.chars().take(120).collect::<String>())
            )),
        },
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, x)| {
            let len = at.len();
            at.push_str(&format!("[{i}]"));
            let r = check_figures_at(x, at);
            at.truncate(len);
            r
        }),
        Value::Object(fields) => fields.iter().try_for_each(|(k, x)| {
            let len = at.len();
            if !at.is_empty() {
                at.push('.');
            }
            at.push_str(k);
            let r = check_figures_at(x, at);
            at.truncate(len);
            r
        }),
        _ => Ok(()),
    }
}

/// Parses one line of a results file, its line end removed: `None` for a blank line. A run
/// line of an old file gets its traits; a meta line of a newer schema is refused. The error
/// says what is wrong, for the caller to put after the file and line number.
pub fn parse_line(bytes: &[u8]) -> std::result::Result<Option<Line>, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("not a concur results line (not UTF-8: {e})"))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not a concur results line ({e})"))?;
    check_figures(&value)?;
    let mut line: Line =
        serde_json::from_value(value).map_err(|e| format!("not a concur results line ({e})"))?;
    match &mut line {
        Line::Meta(m) if m.schema > SCHEMA => {
            return Err(format!(
                "results schema {} but this concur reads schema {SCHEMA} or older",
                m.schema
            ))
        }
        Line::Run(r) if r.traits.family.is_empty() => legacy_traits(r),
        _ => {}
    }
    Ok(Some(line))
}

/// Opens a results file for reading, refusing anything but a regular file
/// ([`crate::os::files::open_regular`]: a device never ends, a FIFO would block).
fn open_regular(path: &Path) -> Result<File> {
    crate::os::files::open_regular(path).map_err(|why| {
        let why = if why.starts_with("it is ") {
            format!("{why}; a results file must be a regular file")
        } else {
            why
        };
        Error::file(
            path,
            None,
            format!("cannot read results file '{}': {why}", path.display()),
        )
    })
}

/// Reads a results file; a malformed line is an error naming the file and line number, but a
/// last line cut short is left out and named in [`ResultsFile::cut`]. Only regular files are
/// read, and no line longer than [`MAX_LINE`]. Cell lines are not read back: cells are always
/// recomputed from the runs.
pub fn read_results(path: &Path) -> Result<ResultsFile> {
    let mut reader = BufReader::new(open_regular(path)?);
    let mut out = ResultsFile::default();
    let mut bytes = Vec::new();
    for number in 1usize.. {
        bytes.clear();
        let got = reader
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut bytes)
            .map_err(|e| {
                Error::file(path, None, format!("cannot read '{}': {e}", path.display()))
            })?;
        if got == 0 {
            break;
        }
        let ended = bytes.last() == Some(&b'\n');
        if ended {
            bytes.pop();
        } else if bytes.len() > MAX_LINE {
            return Err(Error::file(
                path,
                Some(number as u64),
                format!(
                    "'{}' line {number}: longer than the {} MiB a results line may hold",
                    path.display(),
                    MAX_LINE >> 20
                ),
            ));
        }
        match parse_line(&bytes) {
            Ok(Some(Line::Meta(m))) => out.meta = Some(m),
            Ok(Some(Line::Run(r))) => out.runs.push(r),
            Ok(Some(Line::Cell(_)) | None) => {}
            // No line end: the end of the file, so this is the last line; not JSON at all, so
            // cut while it was written (a whole line of a newer schema is still refused).
            Err(_)
                if !ended && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() =>
            {
                out.cut = Some(CutLine {
                    path: path.to_path_buf(),
                    line: number,
                    bytes: bytes.len(),
                });
                break;
            }
            Err(why) => {
                return Err(Error::file(
                    path,
                    Some(number as u64),
                    format!("'{}' line {number}: {why}", path.display()),
                ))
            }
        }
    }
    if out.meta.is_none() {
        // The meta line names the machine the runs were made on, which the analysis needs
        // (its cores): a file without one was not written by concur.
        return Err(Error::file(
            path,
            None,
            format!(
                "'{}' holds no concur results (no meta line)",
                path.display()
            ),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lines_of_old_files_get_their_traits_from_the_specs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.jsonl");
        let meta = r#"{"type":"meta","schema":1,"concur":"0.1.0","started":"2026-01-01T00:00:00Z","machine":{"cpu":"x","cores":2,"kernel":"6","load1":0.0,"governor":null,"mem_total_kib":null}}"#;
        let run = |workload: &str, model: &str, nature: &str| {
            format!(
                r#"{{"type":"run","study":"custom","workload":"{workload}","model":"{model}","tasks":2,"gil":false,"workers":null,"parallelism":1,"nature":"{nature}","delay_s":null,"rep":0,"status":"ok","wall_s":1.0,"user_s":1.0,"sys_s":0.0,"max_rss_kib":1,"tree_pss_kib":null,"ctx_voluntary":0,"ctx_involuntary":0,"threads_created":0,"processes_created":0,"tasks_ok":2,"tasks_failed":0,"bytes":2,"error":null,"latency_us":null}}"#
            )
        };
        let text = [
            meta.to_string(),
            run("fib:5", "seq", "cpu"),
            run("http:/x", "jobs-procs:2", "net"),
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let f = read_results(&path).unwrap();
        let (seq, jobs) = (&f.runs[0].traits, &f.runs[1].traits);
        assert!(seq.baseline && !seq.http && !seq.waits && seq.family == "seq");
        assert!(jobs.http && jobs.waits && jobs.queue && jobs.task_processes);
        assert_eq!(jobs.family, "jobs-procs");
        assert_eq!(jobs.nature, Nature::Network);
    }
}
