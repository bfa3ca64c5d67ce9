//! The child side of a run: the hidden `__run` command (one repetition of one cell, in a fresh
//! process) and `__task` (one task, for the `spawn` model). Both read their request from fd 4
//! ([`SelfCall::receive`]) and report JSON on fd 3.

use std::collections::BTreeMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::measure::latency::{LatencyRecorder, LatencySummary};
use crate::measure::{self, mono_ns};
use crate::model::{self, execute, ModelOutcome, RunCtx};
use crate::selfcall::SelfCall;
use crate::{gil, process};

pub use crate::selfcall::RunRequest;

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
    /// Forced hand-overs of the emulated lock (this process only).
    pub gil_switches: u64,
    /// Each task's `[start, end]`, µs from the model's start, at most
    /// [`crate::measure::TIMELINE_CAP`] of them.
    #[serde(default)]
    pub timeline_us: Option<Vec<[u64; 2]>>,
    /// HTTP: the connections this process's tasks opened and reused, and what opening them
    /// cost.
    #[serde(default)]
    pub connections: Option<crate::measure::conn::ConnSummary>,
}

/// Condenses a model's outcome into the report.
pub fn report(outcome: ModelOutcome, wall_s: f64) -> ChildReport {
    let mut r = ChildReport {
        wall_s,
        threads_created: outcome.threads_created,
        processes_created: outcome.processes_created,
        gil_switches: gil::forced_switches(),
        ..Default::default()
    };
    let mut latency = LatencyRecorder::new();
    let mut first_error = None;
    for rec in &outcome.records {
        match &rec.error {
            None => {
                r.tasks_ok += 1;
                r.bytes += rec.bytes;
                latency.record_us(rec.end_ns.saturating_sub(rec.start_ns) / 1000);
            }
            Some(e) => {
                r.tasks_failed += 1;
                *r.failures.entry(e.kind.clone()).or_default() += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    r.latency_us = latency.summary();
    let total = outcome.records.len();
    r.error = outcome.error.or_else(|| {
        first_error.map(|e| format!("{} of {total} tasks failed (first: {e})", r.tasks_failed))
    });
    r
}

fn pipe() -> Result<std::fs::File> {
    process::report_pipe().map_err(|e| Error::usage(e.to_string()))
}

/// The error for a request meant for another hidden command than `name`.
fn wrong_request(name: &str) -> Error {
    Error::usage(format!(
        "{name} was handed another command's request on fd 4"
    ))
}

/// `concur __run`: runs one repetition of one cell (the request on fd 4) and reports it on
/// fd 3.
pub fn run_main() -> Result<()> {
    let mut out = pipe()?;
    let SelfCall::Run(req) = SelfCall::receive()? else {
        return Err(wrong_request(SelfCall::RUN));
    };
    let workload = req.env.install()?;
    let model = model::parse(&req.model)?;
    process::raise_nofile_limit();
    let ctx = RunCtx {
        workload,
        tasks: req.tasks,
        env: req.env,
        stack_size: req.stack_size,
    };
    let t0 = mono_ns();
    let outcome = model.run(&ctx);
    let wall_s = mono_ns().saturating_sub(t0) as f64 / 1e9;
    let timeline = measure::timeline(&outcome.records, t0, measure::TIMELINE_CAP);
    let mut rep = report(outcome, wall_s);
    rep.timeline_us = Some(timeline);
    rep.connections = ctx.workload.connections();
    let text = serde_json::to_string(&rep).map_err(|e| Error::Internal(e.to_string()))?;
    let _ = std::io::stdout().flush();
    writeln!(out, "{text}").map_err(|e| Error::io("writing the run report", e))
}

/// `concur __task`: runs one task (the `spawn` model's child; the request on fd 4) and
/// reports it on fd 3.
pub fn task_main() -> Result<()> {
    let mut out = pipe()?;
    let SelfCall::Task { env, index } = SelfCall::receive()? else {
        return Err(wrong_request(SelfCall::TASK));
    };
    let workload = env.install()?;
    let rec = execute(&*workload, index);
    let _ = std::io::stdout().flush();
    out.write_all(rec.to_line().as_bytes())
        .map_err(|e| Error::io("writing the task report", e))
}
