//! The parent side of a run, behind the [`Executor`] seam (hyperfine's executor, made for
//! processes of our own binary): [`ProcessExecutor`] starts a fresh child (`__run`), watches
//! it, judges how it ended and turns it into a run line, in four steps of one job each —
//! `supervise::spawn`, `supervise::supervise`, `convert::classify` and
//! `convert::convert`. A child that crashes, times out or cannot start becomes a run with
//! that status and reason; the study goes on. Tests use the deterministic `mock` instead.

pub(crate) mod child;
pub(crate) mod convert;
pub mod in_process;
pub(crate) mod machine;
#[cfg(test)]
pub(crate) mod mock;
pub mod remote_stats;
pub(crate) mod supervise;

use std::path::{Path, PathBuf};

use crate::analysis::results::{Machine, RunResult};
use crate::base::error::{Error, Result};
use crate::model::selfcall::RunRequest;
use crate::model::WorkloadRecipe;
use crate::os::terminal::Terminal;
use crate::plan::{CellKind, CellPlan, Hook, Plan};
use crate::runner::child::LiveLine;
use crate::runner::supervise::Launch;
use crate::server::Stats;
use remote_stats::RemoteStats;

/// Which of a cell's runs an executor is asked for (hyperfine's `BenchmarkIteration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iteration {
    /// An uncounted warm-up run (the number is its place among the cell's warm-ups).
    Warmup(usize),
    /// The counted repetition `rep` (0-based).
    Counted(usize),
    /// Probe number K (0-based) of a `--rate auto` search; the probe kept is written as rep 0.
    Probe(usize),
}

impl Iteration {
    /// The `rep` a run line carries: a warm-up's line is never written, and is numbered 0.
    pub fn rep(self) -> usize {
        match self {
            Iteration::Warmup(_) | Iteration::Probe(_) => 0,
            Iteration::Counted(rep) => rep,
        }
    }

    /// Its folder under a cell's `--cmd-output` folder: `rep-R` for the run line whose `rep`
    /// is R, `warmup-K` for the K-th warm-up and `probe-K` for a `--rate auto` search's K-th
    /// probe (0-based, as `rep`).
    pub fn folder(self) -> String {
        match self {
            Iteration::Warmup(k) => format!("warmup-{k}"),
            Iteration::Counted(rep) => format!("rep-{rep}"),
            Iteration::Probe(k) => format!("probe-{k}"),
        }
    }
}

/// Runs and measures one repetition of one cell: the seam between a study's loop
/// ([`crate::study::execute`]) and the processes, so the loop and everything downstream of
/// it can be tested without any.
pub trait Executor {
    /// The machine the runs happen on, for the meta line and the analysis.
    fn machine(&self) -> Machine;
    /// Runs `iteration` of `cell` and returns its run line. Never fails: a run that could not
    /// start, crashed or timed out is a run line with that status and reason.
    fn run(&self, plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunResult;
    /// Whether the user asked to stop; the study checks it before every run.
    fn interrupted(&self) -> bool;
    /// Runs `hook` of the plan for `cell`, if the plan has one; the reason when it failed.
    fn hook(&self, plan: &Plan, cell: &CellPlan, hook: Hook) -> std::result::Result<(), String>;
    /// Where open runs' live lines (one per interval) go from now on.
    fn show_live(&self, _terminal: Terminal) {}
    /// The other hosts the runs happen on, for the meta line (none: this machine only).
    fn hosts(&self) -> Vec<crate::analysis::results::MetaHost> {
        Vec::new()
    }
}

/// One live line of the run of `cell`, as the terminal shows it.
fn live_text(cell: &CellPlan, l: &LiveLine) -> String {
    let asked = if l.asked > 0.0 {
        format!("asked {:.1}/s", l.asked)
    } else {
        "all released".into()
    };
    format!(
        "{} {}: {:.0} s, {} due, {} done ({:.1}/s, {asked}), {} failed",
        cell.key.workload,
        cell.key.label(),
        l.t_s,
        l.due,
        l.ended,
        l.rate,
        l.failed
    )
}

/// The counters of the study's delay server, read around each run so that each run records
/// the server's peak in-flight: the server concur started in this process for its
/// `http:/PATH` cells, or a concur server `--url` points at. (Where it listens and the
/// certificate its clients trust are in the plan's options: the bind step put them there.)
pub enum StudyServer<'a> {
    /// The in-process server's counters.
    InProcess(&'a Stats),
    /// A concur server elsewhere, read over HTTP.
    Remote(&'a RemoteStats),
}

/// Reads the study's server's counters around one run (nothing for a server of another kind).
pub(crate) trait RunCounters {
    /// Clears them before a run.
    fn reset_counters(&self);
    /// The server's peak in-flight during the run.
    fn peak_in_flight(&self) -> Option<i64>;
}

impl RunCounters for Option<StudyServer<'_>> {
    fn reset_counters(&self) {
        match self {
            Some(StudyServer::InProcess(s)) => s.reset(),
            Some(StudyServer::Remote(r)) => r.reset(),
            None => {}
        }
    }

    fn peak_in_flight(&self) -> Option<i64> {
        match self {
            Some(StudyServer::InProcess(s)) => Some(s.snapshot().peak_in_flight),
            Some(StudyServer::Remote(r)) => r.peak_in_flight(),
            None => None,
        }
    }
}

/// The real executor: every run in a fresh child process of our own binary.
pub struct ProcessExecutor<'a> {
    exe: PathBuf,
    server: Option<StudyServer<'a>>,
    live: std::sync::Mutex<Terminal>,
}

impl<'a> ProcessExecutor<'a> {
    /// Finds our own binary and takes over Ctrl-C and SIGTERM (so a stopped study kills the
    /// current run's tree and keeps every finished run). With the study's server's
    /// counters, each run records the server's peak in-flight.
    pub fn new(server: Option<StudyServer<'a>>) -> Result<Self> {
        let exe = std::env::current_exe().map_err(|e| Error::io("finding our own binary", e))?;
        crate::os::interrupt::install_interrupt_handler();
        Ok(ProcessExecutor {
            exe,
            server,
            live: std::sync::Mutex::new(Terminal::silent()),
        })
    }
}

impl Executor for ProcessExecutor<'_> {
    fn machine(&self) -> Machine {
        machine::machine()
    }

    fn run(&self, plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunResult {
        self.server.reset_counters();
        let mut run = match &cell.kind {
            CellKind::Concur { .. } => {
                let terminal = self.live.lock().unwrap_or_else(|p| p.into_inner()).clone();
                // A warm-up's lines are not results: shown only with --verbose, marked.
                let warmup = matches!(iteration, Iteration::Warmup(_));
                let live = |l: &LiveLine| match (warmup, terminal.is_verbose()) {
                    (false, _) => terminal.live(live_text(cell, l)),
                    (true, true) => terminal.live(format!("warm-up {}", live_text(cell, l))),
                    (true, false) => {}
                };
                let watch = |p: Option<_>| terminal.watch(p);
                let watch = terminal
                    .watching()
                    .then_some(&watch as supervise::Watch<'_>);
                run_child(&self.exe, plan, cell, iteration, &live, watch)
            }
            CellKind::External { command, .. } => {
                run_external(command, plan, cell, iteration.rep())
            }
        };
        run.server_peak_in_flight = self.server.peak_in_flight();
        run
    }

    fn interrupted(&self) -> bool {
        crate::os::interrupt::interrupted()
    }

    fn show_live(&self, terminal: Terminal) {
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = terminal;
    }

    fn hook(&self, plan: &Plan, cell: &CellPlan, hook: Hook) -> std::result::Result<(), String> {
        run_hook(plan, cell, hook)
    }
}

/// Runs `hook` of the plan for `cell`, if the plan has one (`sh -c`, its own process group,
/// dying with us) to its end, at most `--timeout`; the reason when it failed: the flag, the
/// command as typed, how it ended and the first line of its stderr.
pub(crate) fn run_hook(
    plan: &Plan,
    cell: &CellPlan,
    hook: Hook,
) -> std::result::Result<(), String> {
    let Some(typed) = plan.hooks.get(hook) else {
        return Ok(());
    };
    let line = external_command(typed, plan, cell);
    let timeout = plan.timeout;
    let fail = |how: String| format!("{} '{typed}' {how}", hook.flag());
    let launch = Launch::External {
        command: &line,
        backend: plan.jobs_backend.as_ref(),
    };
    let ended = supervise::run(launch, timeout, &crate::os::interrupt::interrupted, &|_| {})
        .map_err(|e| fail(format!("could not start: {e}")))?;
    let usage = ended
        .waited
        .map_err(|e| fail(format!("could not be waited for: {e}")))?;
    let how = match (ended.killed_for, usage.exit_code, usage.signal) {
        (Some(_), _, _) => format!(
            "was killed after {}",
            crate::base::units::fmt_secs(timeout.as_secs_f64())
        ),
        (None, Some(0), _) => return Ok(()),
        (None, Some(code), _) => format!("exited with code {code}"),
        (None, _, Some(sig)) => {
            format!("was killed by {}", crate::measure::rusage::signal_name(sig))
        }
        _ => "ended without a status".into(),
    };
    let first = ended.stderr_tail.iter().find(|l| !l.trim().is_empty());
    Err(fail(match first {
        Some(l) => format!("{how}: {l}"),
        None => how,
    }))
}

/// What the `__run` child is asked to do for `iteration` of `cell`: the bound plan's options
/// (the study's own server and its certificate among them), narrowed to what the cell needs.
pub(crate) fn request(plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunRequest {
    let mut options = plan.options.clone();
    options.cell_tasks = Some(cell.key.tasks);
    options.http2 = cell.key.http2;
    options.http3 = cell.key.http3;
    // Secrets go only where the cell needs them: a run travels to other hosts through a
    // shared hub, and headers (tokens), a body and a queue's URL (a password) are of no use
    // to a workload that sends no HTTP or a model that keeps no queue.
    let http = cell.key.workload.starts_with("http:");
    if !http {
        options.headers.clear();
        options.body = None;
        options.ca_pem = None;
    }
    let jobs_backend = plan
        .jobs_backend
        .clone()
        .filter(|_| cell.key.model.starts_with("jobs"));
    // Each run keeps its commands' output in a folder of its own, in its cell's: every
    // repetition is kept, not only the last. With several workloads, a cell's folder starts
    // with its workload's place among them (w1-, w2-), or two workloads' cells of one model
    // would share it. The run creates it (`child::run_cell`): a request is only a value.
    if let Some(dir) = &options.cmd_output {
        let mut workloads: Vec<&str> = Vec::new();
        for c in &plan.cells {
            if !workloads.contains(&c.key.workload.as_str()) {
                workloads.push(&c.key.workload);
            }
        }
        let place = match workloads.iter().position(|w| *w == cell.key.workload) {
            Some(k) if workloads.len() > 1 => format!("w{}-", k + 1),
            _ => String::new(),
        };
        let sub = dir
            .join(format!(
                "{place}{}-x{}{}{}{}",
                cell.key.model.replace('/', "_"),
                cell.key.tasks,
                if cell.key.gil { "-gil" } else { "" },
                if cell.key.http2 { "-h2" } else { "" },
                if cell.key.http3 { "-h3" } else { "" }
            ))
            .join(iteration.folder());
        options.cmd_output = Some(sub);
    }
    RunRequest {
        recipe: WorkloadRecipe {
            workload: cell.key.workload.clone(),
            options,
            gil: cell.key.gil,
            settings: plan.settings,
            jobs_backend,
        },
        model: cell.key.model.clone(),
        tasks: cell.key.tasks,
        open: plan.open.as_ref().and_then(|o| o.run(cell.key.tasks)),
        part: None,
        counter_page: false,
        // The runs whose line keeps its timeline (`convert`: rep 0; a search's probes, the
        // one kept written as rep 0) record their tasks' phases.
        trace: matches!(iteration, Iteration::Counted(0) | Iteration::Probe(_)),
    }
}

/// One run in a fresh child of `exe`: the one supervise path, then judged.
fn run_child(
    exe: &Path,
    plan: &Plan,
    cell: &CellPlan,
    iteration: Iteration,
    live: &dyn Fn(&LiveLine),
    watch: Option<supervise::Watch<'_>>,
) -> RunResult {
    let launch = Launch::Own {
        exe,
        request: Box::new(request(plan, cell, iteration)),
    };
    let ended = supervise::run_watched(
        launch,
        plan.timeout,
        &crate::os::interrupt::interrupted,
        live,
        watch,
    );
    convert::judge(cell, iteration.rep(), ended, plan.timeout)
}

/// An external program's command for `cell`: `{tasks}`, `{workers}` (its label's `:W`, else
/// the task count) and `{url}` (`--url`, else the study's own server) replaced.
pub(crate) fn external_command(command: &str, plan: &Plan, cell: &CellPlan) -> String {
    let url = plan.options.base_url.as_deref().unwrap_or("");
    command
        .replace("{tasks}", &cell.key.tasks.to_string())
        .replace(
            "{workers}",
            &cell.workers.unwrap_or(cell.key.tasks).to_string(),
        )
        .replace("{url}", url)
}

/// One run of an external program (`sh -c`): the same supervise path and judgement as a run
/// of concur's own, so both are measured the same way.
fn run_external(command: &str, plan: &Plan, cell: &CellPlan, rep: usize) -> RunResult {
    let line = external_command(command, plan, cell);
    let launch = Launch::External {
        command: &line,
        backend: plan.jobs_backend.as_ref(),
    };
    let ended = supervise::run(
        launch,
        plan.timeout,
        &crate::os::interrupt::interrupted,
        &|_| {},
    );
    convert::judge(cell, rep, ended, plan.timeout)
}
