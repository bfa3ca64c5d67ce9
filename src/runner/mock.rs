//! A deterministic executor for tests (hyperfine's `MockExecutor`): no processes, results made
//! from a formula, with failures, timeouts and interrupts on demand. Its numbers go through
//! the real [`classify`] and [`convert`], so its run lines have exactly the shape of real ones.
//!
//! The formula, for a cell of N tasks whose model runs P at once on a machine of C cores,
//! each task taking `t` (the workload's delay, else [`MockExecutor::task_time`], else
//! [`DEFAULT_TASK_S`]), plus the model's [`MockExecutor::overhead`] `o`:
//! - CPU-bound (`cpu`, `io`): `wall = N·t / min(P, C, N) + o`, `user = N·t`, `sys = 0`;
//! - waiting (`delay`, `net`): `wall = ceil(N / min(P, N))·t + o`, `user = sys = 0`;
//! - `max_rss_kib = 4000 + 100·P`, `tree_pss_kib = 3000 + 100·P`, `bytes = 10·N`, every task's
//!   latency `t`, and a timeline of tasks in waves of `min(P, N)` (CPU: of the slots).
//!
//! [`MockExecutor::jitter`] scales run `rep`'s wall by `1 + j·[0, +1, -1][rep % 3]`.
//!
//! Open-model runs (`--rate`, mean rate `r`): the cell's capacity is `c = slots / t` tasks/s.
//! At `r <= c` every task's latency and service are `t`, the queue 0, and the achieved rate
//! `r`; above it the achieved rate is `c` and the queue grows linearly to
//! `q = N·(1/c - 1/r)` for the last task, so latency percentile `x` is `t + x·q`; the wall is
//! `N / min(r, c) + t`.
//!
//! ```ignore
//! let mock = MockExecutor::new(4).task_time("fib:20", 0.1).failing("thread", MockEnd::Crash);
//! let plan = mock_plan(&["fib:20"], &["seq", "pool:4", "thread"], &[8], 3);
//! let runs = mock.runs(&plan);  // or study::execute(&plan, &mock, ...)
//! ```

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::analysis::results::{CellKey, Machine, RunResult};
use crate::measure::latency::LatencySummary;
use crate::measure::memory::TreePss;
use crate::measure::open::OpenStats;
use crate::measure::rusage::ChildUsage;
use crate::plan;
use crate::plan::{CellPlan, Hook, Plan, StudyOptions};
use crate::runner::child::ChildReport;
use crate::runner::convert::{classify, convert, not_started};
use crate::runner::supervise::{Ended, Kill};
use crate::runner::{Executor, Iteration};

/// Seconds per task of a workload the mock was told nothing about.
pub(crate) const DEFAULT_TASK_S: f64 = 0.01;

/// How a mocked run ends, when not well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MockEnd {
    /// The run measures, but this many of its tasks fail (kind `mock`).
    FailedTasks(usize),
    /// The child dies of SIGSEGV before reporting, saying `mock: segfault` on stderr.
    Crash,
    /// The child outlives the plan's timeout and is killed.
    Timeout,
    /// The child cannot be started.
    NoStart,
}

/// One call the mock received.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MockCall {
    /// The cell run.
    pub key: CellKey,
    /// Which of its runs.
    pub iteration: Iteration,
}

/// The deterministic executor; see the module documentation for its formula.
#[derive(Debug)]
pub(crate) struct MockExecutor {
    cores: usize,
    task_s: BTreeMap<String, f64>,
    overhead_s: BTreeMap<String, f64>,
    ends: BTreeMap<String, MockEnd>,
    jitter: f64,
    interrupt_after: Option<usize>,
    interrupt_during: Option<usize>,
    failing_hook: Option<Hook>,
    calls: Mutex<Vec<MockCall>>,
}

impl MockExecutor {
    /// A mock machine of `cores` cores on which every run succeeds.
    pub(crate) fn new(cores: usize) -> Self {
        MockExecutor {
            cores: cores.max(1),
            task_s: BTreeMap::new(),
            overhead_s: BTreeMap::new(),
            ends: BTreeMap::new(),
            jitter: 0.0,
            interrupt_after: None,
            interrupt_during: None,
            failing_hook: None,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Each task of `workload` (canonical spec) takes `secs` (delay workloads take their delay).
    pub(crate) fn task_time(mut self, workload: &str, secs: f64) -> Self {
        self.task_s.insert(workload.into(), secs);
        self
    }

    /// Every run of `model` (canonical spec) costs `secs` more wall (start-up, hand-overs).
    pub(crate) fn overhead(mut self, model: &str, secs: f64) -> Self {
        self.overhead_s.insert(model.into(), secs);
        self
    }

    /// Every run of `model` (canonical spec) ends as `end`.
    pub(crate) fn failing(mut self, model: &str, end: MockEnd) -> Self {
        self.ends.insert(model.into(), end);
        self
    }

    /// Spreads the walls of successive repetitions by the fraction `j`.
    pub(crate) fn jitter(mut self, j: f64) -> Self {
        self.jitter = j;
        self
    }

    /// The user "presses Ctrl-C" once `n` runs (warm-ups included) have been made: the study
    /// sees it before its next run.
    pub(crate) fn interrupt_after(mut self, n: usize) -> Self {
        self.interrupt_after = Some(n);
        self
    }

    /// The user "presses Ctrl-C" during run number `n` (0-based, warm-ups included): that run
    /// is killed and ends `interrupted`, as the real runner's would.
    pub(crate) fn interrupt_during(mut self, n: usize) -> Self {
        self.interrupt_during = Some(n);
        self
    }

    /// Makes every `hook` fail with exit code 3 (whether or not the plan has one).
    pub(crate) fn failing_hook(mut self, hook: Hook) -> Self {
        self.failing_hook = Some(hook);
        self
    }

    /// Every call so far, in order.
    pub(crate) fn calls(&self) -> Vec<MockCall> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every counted run of `plan`, cells in plan order within each repetition, without a
    /// study around them: the quickest way to results for analysis and exporter tests.
    pub(crate) fn runs(&self, plan: &Plan) -> Vec<RunResult> {
        (0..plan.repeat)
            .flat_map(|rep| {
                plan.cells
                    .iter()
                    .map(move |c| self.run(plan, c, Iteration::Counted(rep)))
            })
            .collect()
    }

    fn task_secs(&self, cell: &CellPlan) -> f64 {
        match cell.traits.nature.delay_s() {
            Some(d) => d,
            None => self
                .task_s
                .get(&cell.key.workload)
                .copied()
                .unwrap_or(DEFAULT_TASK_S),
        }
    }

    /// What the parent would have seen of a run that ends well (or with failed tasks).
    fn formula(&self, plan: &Plan, cell: &CellPlan, rep: usize, failed: usize) -> Ended {
        let n = cell.key.tasks;
        let t = self.task_secs(cell);
        let waits = cell.traits.waits;
        let slots = if waits {
            cell.parallelism.min(n).max(1)
        } else {
            cell.parallelism.min(self.cores).min(n).max(1)
        };
        let work = if waits {
            n.div_ceil(slots) as f64 * t
        } else {
            n as f64 * t / slots as f64
        };
        let overhead = self.overhead_s.get(&cell.key.model).copied().unwrap_or(0.0);
        let wave = [0.0, 1.0, -1.0][rep % 3];
        let open_run = plan.open.as_ref().and_then(|o| o.run(n));
        let work = match &open_run {
            Some(o) => {
                let (r, c) = (o.schedule.mean_rate(), slots as f64 / t);
                n as f64 / r.min(c) + t
            }
            None => work,
        };
        let wall = (work + overhead) * (1.0 + self.jitter * wave);
        let user = if waits { 0.0 } else { n as f64 * t };
        let t_us = (t * 1e6).round() as u64;
        let ok = n.saturating_sub(failed);
        let mut latency_override = None;
        let mut report = ChildReport {
            wall_s: wall,
            tasks_ok: ok,
            tasks_failed: failed,
            failures: if failed > 0 {
                BTreeMap::from([("mock".to_string(), failed)])
            } else {
                BTreeMap::new()
            },
            bytes: 10 * ok as u64,
            error: (failed > 0)
                .then(|| format!("{failed} of {n} tasks failed (first: mock: task failed)")),
            latency_us: (ok > 0).then_some(LatencySummary {
                p50: t_us,
                p90: t_us,
                p99: t_us,
                p999: t_us,
                max: t_us,
            }),
            threads_created: 0,
            processes_created: 0,
            latency_hdr: None,
            queue_wait_us: None,
            queue_wait_hdr: None,
            first_task_ns: None,
            wakeups: None,
            pid: 10_000 + rep as u32,
            gil_switches: 0,
            open: open_run.map(|o| {
                let (r, c) = (o.schedule.mean_rate(), slots as f64 / t);
                let q = if r > c {
                    n as f64 * (1.0 / c - 1.0 / r)
                } else {
                    0.0
                };
                let at = |x: f64| ((t + x * q) * 1e6).round() as u64;
                let summary = |f: &dyn Fn(f64) -> u64| LatencySummary {
                    p50: f(0.5),
                    p90: f(0.9),
                    p99: f(0.99),
                    p999: f(0.999),
                    max: f(1.0),
                };
                let achieved = r.min(c);
                latency_override = Some(summary(&at));
                OpenStats {
                    rate_asked: r,
                    rate_ramp: o
                        .schedule
                        .is_ramp()
                        .then_some([o.schedule.from, o.schedule.to]),
                    rate_achieved: Some(achieved),
                    behind: achieved < crate::measure::open::KEPT_UP * r,
                    service_us: Some(summary(&|_| t_us)),
                    queue_us: Some(summary(&|x| (x * q * 1e6).round() as u64)),
                    lag_us: Some(summary(&|_| 0)),
                    grain_us: (o.grain_us > 0).then_some(o.grain_us),
                    releaser_runnable_us: None,
                    lock_holders_runnable_us: None,
                    series: vec![],
                }
            }),
            connections: None,
            timeline_us: Some(
                (0..n.min(crate::measure::TRACE_TASKS_DEFAULT))
                    .map(|i| {
                        let start = (i / slots) as u64 * t_us;
                        [start, start + t_us]
                    })
                    .collect(),
            ),
            // The mock's timeline is waves, not tasks it ran: no lanes to tell.
            timeline_tasks: None,
        };
        if let (Some(l), true) = (latency_override, ok > 0) {
            report.latency_us = Some(l);
        }
        Ended {
            waited: Ok(ChildUsage {
                exit_code: Some(0),
                signal: None,
                user_s: user,
                sys_s: 0.0,
                max_rss_kib: 4000 + 100 * cell.parallelism as u64,
                ctx_voluntary: n as u64,
                ctx_involuntary: 0,
            }),
            killed_for: None,
            // The parent's wall includes the child's start-up; a millisecond stands for it.
            wall_s: wall + 0.001,
            pss: TreePss::peak(Some(3000 + 100 * cell.parallelism as u64)),
            report: Some(report),
            concur_line: None,
            stderr_tail: vec![],
        }
    }

    /// What the parent would have seen of a run killed with SIGKILL after `wall_s`.
    fn killed(kill: Kill, wall_s: f64) -> Ended {
        Ended {
            waited: Ok(ChildUsage {
                signal: Some(libc::SIGKILL),
                ..Default::default()
            }),
            killed_for: Some(kill),
            wall_s,
            pss: TreePss::peak(Some(3000)),
            report: None,
            concur_line: None,
            stderr_tail: vec![],
        }
    }
}

impl Executor for MockExecutor {
    fn machine(&self) -> Machine {
        Machine {
            cpu: "mock CPU".into(),
            cores: self.cores,
            kernel: "mock".into(),
            load1: 0.0,
            governor: None,
            mem_total_kib: None,
            cpu_busy: None,
        }
    }

    fn run(&self, plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunResult {
        let number = {
            let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
            calls.push(MockCall {
                key: cell.key.clone(),
                iteration,
            });
            calls.len() - 1
        };
        let rep = iteration.rep();
        let ended = if self.interrupt_during == Some(number) {
            Self::killed(Kill::Interrupt, 0.5)
        } else {
            match self.ends.get(&cell.key.model) {
                None => self.formula(plan, cell, rep, 0),
                Some(MockEnd::FailedTasks(k)) => self.formula(plan, cell, rep, *k),
                Some(MockEnd::Timeout) => Self::killed(Kill::Timeout, plan.timeout.as_secs_f64()),
                Some(MockEnd::Crash) => Ended {
                    waited: Ok(ChildUsage {
                        signal: Some(libc::SIGSEGV),
                        user_s: 0.01,
                        ..Default::default()
                    }),
                    killed_for: None,
                    wall_s: 0.02,
                    pss: TreePss::peak(Some(3000)),
                    report: None,
                    concur_line: None,
                    stderr_tail: vec!["mock: segfault".into(), String::new()],
                },
                Some(MockEnd::NoStart) => {
                    let why = std::io::Error::from(std::io::ErrorKind::NotFound);
                    return not_started(cell, rep, &why);
                }
            }
        };
        let verdict = classify(&ended, plan.timeout);
        convert(cell, rep, ended, verdict)
    }

    fn hook(&self, _plan: &Plan, _cell: &CellPlan, hook: Hook) -> Result<(), String> {
        if self.failing_hook == Some(hook) {
            return Err(format!(
                "{} 'mock' exited with code 3: mock hook",
                hook.flag()
            ));
        }
        Ok(())
    }

    fn interrupted(&self) -> bool {
        let made = self.calls.lock().unwrap_or_else(|p| p.into_inner()).len();
        self.interrupt_after.is_some_and(|n| made >= n)
            || self.interrupt_during.is_some_and(|n| made > n)
    }
}

/// A free-form plan of every workload × model × task count, `repeat` counted runs per cell
/// and no warm-up, validated like the user's (so specs are canonical).
pub(crate) fn mock_plan(
    workloads: &[&str],
    models: &[&str],
    tasks: &[usize],
    repeat: usize,
) -> Plan {
    let opts = StudyOptions {
        workloads: workloads.iter().map(|s| s.to_string()).collect(),
        models: models.iter().map(|s| s.to_string()).collect(),
        tasks: tasks.to_vec(),
        repeat: crate::plan::options::RepeatArg {
            repeat: Some(repeat),
        },
        warmup: Some(0),
        timeout: Duration::from_secs(60),
        ..StudyOptions::default()
    };
    match plan::build(&opts) {
        Ok(p) => p,
        Err(e) => panic!("mock plan {workloads:?} × {models:?}: {e}"),
    }
}
