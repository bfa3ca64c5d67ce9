//! The parent side of a run, behind the [`Executor`] seam (hyperfine's executor, made for
//! processes of our own binary): [`ProcessExecutor`] starts a fresh child (`__run`), watches
//! it, judges how it ended and turns it into a run line, in four steps of one job each —
//! [`supervise::spawn`], [`supervise::supervise`], [`convert::classify`] and
//! [`convert::convert`]. A child that crashes, times out or cannot start becomes a run with
//! that status and reason; the study goes on. Tests use the deterministic `mock` instead.

pub(crate) mod convert;
#[cfg(test)]
pub(crate) mod mock;
pub(crate) mod supervise;

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::analysis::results::{Machine, RunResult};
use crate::error::{Error, Result};
use crate::model::TaskEnv;
use crate::selfcall::RunRequest;
use crate::server::Stats;
use crate::study::machine;
use crate::study::plan::{CellPlan, Plan};

/// Which of a cell's runs an executor is asked for (hyperfine's `BenchmarkIteration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iteration {
    /// An uncounted warm-up run (the number is its place among the cell's warm-ups).
    Warmup(usize),
    /// The counted repetition `rep` (0-based).
    Counted(usize),
}

impl Iteration {
    /// The `rep` a run line carries: a warm-up's line is never written, and is numbered 0.
    pub fn rep(self) -> usize {
        match self {
            Iteration::Warmup(_) => 0,
            Iteration::Counted(rep) => rep,
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
}

/// The server a study started for its `http:/PATH` cells: where it listens and its counters.
/// It belongs to the execution, not to the plan, which stays as it was built.
pub struct RunServer<'a> {
    /// `http://127.0.0.1:PORT` (`https://` with `--tls`).
    pub base_url: String,
    /// Its self-signed certificate (PEM) with `--tls`, which the runs' clients then trust.
    pub cert_pem: Option<String>,
    /// Its counters (each run records the peak in-flight).
    pub stats: &'a Stats,
}

/// The real executor: every run in a fresh child process of our own binary.
pub struct ProcessExecutor<'a> {
    exe: PathBuf,
    server: Option<RunServer<'a>>,
}

impl<'a> ProcessExecutor<'a> {
    /// Finds our own binary and takes over Ctrl-C and SIGTERM (so a stopped study kills the
    /// current run's tree and keeps every finished run). With the in-process server's
    /// counters, each run records the server's peak in-flight.
    pub fn new(server: Option<RunServer<'a>>) -> Result<Self> {
        let exe = std::env::current_exe().map_err(|e| Error::io("finding our own binary", e))?;
        crate::interrupt::install_interrupt_handler();
        Ok(ProcessExecutor { exe, server })
    }
}

impl Executor for ProcessExecutor<'_> {
    fn machine(&self) -> Machine {
        machine::machine()
    }

    fn run(&self, plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunResult {
        if let Some(s) = &self.server {
            s.stats.reset();
        }
        let server = self
            .server
            .as_ref()
            .map(|s| (s.base_url.as_str(), s.cert_pem.as_deref()));
        let mut run = run_child(&self.exe, plan, cell, iteration.rep(), server);
        run.server_peak_in_flight = self
            .server
            .as_ref()
            .map(|s| s.stats.snapshot().peak_in_flight);
        run
    }

    fn interrupted(&self) -> bool {
        crate::interrupt::interrupted()
    }
}

/// What the `__run` child is asked to do for `cell`; `server` is the study's own server (its
/// URL and, over TLS, its certificate), which `http:/PATH` workloads go to when no `--url` was
/// given.
fn request(plan: &Plan, cell: &CellPlan, server: Option<(&str, Option<&str>)>) -> RunRequest {
    let mut options = plan.options.clone();
    if let (Some((url, cert)), None) = (server, &options.base_url) {
        options.base_url = Some(url.to_string());
        // The study's self-signed certificate is trusted besides any --cacert.
        if let Some(cert) = cert {
            options.ca_pem = Some(match options.ca_pem.take() {
                Some(user) => format!("{user}\n{cert}"),
                None => cert.to_string(),
            });
        }
    }
    RunRequest {
        env: TaskEnv {
            workload: cell.key.workload.clone(),
            options,
            gil: cell.key.gil,
            switch_interval_us: plan.switch_interval.as_micros() as u64,
            jobs_backend: plan.jobs_backend.clone(),
        },
        model: cell.key.model.clone(),
        tasks: cell.key.tasks,
        stack_size: plan.stack_size,
    }
}

/// One run in a fresh child of `exe`: spawn, supervise, classify, convert.
fn run_child(
    exe: &Path,
    plan: &Plan,
    cell: &CellPlan,
    rep: usize,
    server: Option<(&str, Option<&str>)>,
) -> RunResult {
    let started = Instant::now();
    let child = match supervise::spawn(exe, request(plan, cell, server)) {
        Ok(c) => c,
        Err(e) => return convert::not_started(cell, rep, &e),
    };
    let ended = supervise::supervise(
        child,
        started,
        started + plan.timeout,
        &crate::interrupt::interrupted,
    );
    let verdict = convert::classify(&ended, plan.timeout);
    convert::convert(cell, rep, ended, verdict)
}
