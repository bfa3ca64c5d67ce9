//! The parent side of a run: start a fresh child process of our own binary (`__run`), sample
//! its process tree's memory, reap it with `wait4` for its rusage, enforce the timeout, and
//! turn all of it into a run line. A child that crashes, times out or cannot start becomes a
//! run with that status and reason; the study goes on.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::analysis::results::{RunResult, RunStatus};
use crate::interrupt::interrupted;
use crate::measure::memory::TreeSampler;
use crate::measure::rusage::{self, ChildUsage};
use crate::model::TaskEnv;
use crate::process;
use crate::server::Stats;
use crate::study::child::{ChildReport, RunRequest};
use crate::study::plan::{CellPlan, Plan};
use crate::workload::{MailSink, Nature};

/// The last lines a child wrote on stderr, for crash reasons.
const STDERR_TAIL: usize = 20;

fn nature_fields(n: Nature) -> (&'static str, Option<f64>) {
    match n {
        Nature::Cpu => ("cpu", None),
        Nature::BlockingIo => ("io", None),
        Nature::Delay(d) => ("delay", Some(d.as_secs_f64())),
        Nature::Network => ("net", None),
    }
}

fn blank(cell: &CellPlan, rep: usize, status: RunStatus, wall_s: f64, error: String) -> RunResult {
    let (nature, delay_s) = nature_fields(cell.nature);
    RunResult {
        key: cell.key.clone(),
        workers: cell.workers,
        parallelism: cell.parallelism,
        nature: nature.into(),
        delay_s,
        rep,
        status,
        wall_s,
        user_s: 0.0,
        sys_s: 0.0,
        max_rss_kib: 0,
        tree_pss_kib: None,
        ctx_voluntary: 0,
        ctx_involuntary: 0,
        threads_created: 0,
        processes_created: 0,
        tasks_ok: 0,
        tasks_failed: 0,
        failures: Default::default(),
        bytes: 0,
        gil_switches: 0,
        error: Some(error),
        latency_us: None,
        server_peak_in_flight: None,
        timeline_us: None,
    }
}

/// Runs repetition `rep` of `cell` in a fresh child of `exe` and returns its run line. With
/// the in-process server's counters, the run records the server's peak in-flight.
pub fn run_once(
    exe: &Path,
    plan: &Plan,
    cell: &CellPlan,
    rep: usize,
    server: Option<&Stats>,
) -> RunResult {
    if let Some(s) = server {
        s.reset();
    }
    let mut run = run_child(exe, plan, cell, rep);
    run.server_peak_in_flight = server.map(|s| s.snapshot().peak_in_flight);
    run
}

fn run_child(exe: &Path, plan: &Plan, cell: &CellPlan, rep: usize) -> RunResult {
    let request = RunRequest {
        env: TaskEnv {
            workload: cell.key.workload.clone(),
            options: plan.options.clone(),
            gil: cell.key.gil,
            switch_interval_us: plan.switch_interval.as_micros() as u64,
            jobs_backend: plan.jobs_backend.clone(),
        },
        model: cell.key.model.clone(),
        tasks: cell.key.tasks,
        stack_size: plan.stack_size,
    };
    let started = Instant::now();
    let json = match serde_json::to_string(&request) {
        Ok(j) => j,
        Err(e) => return blank(cell, rep, RunStatus::Spawn, 0.0, e.to_string()),
    };
    let mut cmd = Command::new(exe);
    cmd.arg("__run")
        .arg(json)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(if plan.options.mail_sink == MailSink::Stdout {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
    // SAFETY: setpgid is async-signal-safe; a group of its own lets us kill the run's whole
    // tree (forked and spawned tasks included) on timeout, and keeps Ctrl-C ours to handle.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (mut child, mut report_pipe) = match process::spawn_with_report(&mut cmd) {
        Ok(pair) => pair,
        Err(e) => {
            return blank(
                cell,
                rep,
                RunStatus::Spawn,
                0.0,
                format!("could not start the run's process: {e}"),
            )
        }
    };
    let pid = child.id() as i32;
    let sampler = TreeSampler::start(pid);
    let stderr = child.stderr.take();
    let stderr_reader = std::thread::spawn(move || {
        let mut tail: std::collections::VecDeque<String> = Default::default();
        if let Some(s) = stderr {
            for line in BufReader::new(s).lines().map_while(|l| l.ok()) {
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        tail
    });
    let report_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = report_pipe.read_to_string(&mut text);
        text
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(rusage::wait_child(pid));
    });
    let deadline = started + plan.timeout;
    let mut killed_for: Option<RunStatus> = None;
    let waited: std::io::Result<ChildUsage> = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => break r,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(std::io::Error::other("the waiting thread died"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let why = if interrupted() {
                    Some(RunStatus::Interrupted)
                } else if Instant::now() >= deadline {
                    Some(RunStatus::Timeout)
                } else {
                    None
                };
                if let (Some(status), None) = (why, killed_for) {
                    killed_for = Some(status);
                    // SAFETY: signalling our own child's process group.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                }
            }
        }
    };
    let parent_wall = started.elapsed().as_secs_f64();
    // Whatever the run left behind in its group goes with it.
    // SAFETY: as above; ESRCH when the group is already empty is fine.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let tree_pss_kib = sampler.finish();
    let tail = stderr_reader.join().unwrap_or_default();
    let report_text = report_reader.join().unwrap_or_default();
    let usage = match waited {
        Ok(u) => u,
        Err(e) => {
            return blank(
                cell,
                rep,
                RunStatus::Crashed,
                parent_wall,
                format!("could not wait for the run: {e}"),
            )
        }
    };
    let report: Option<ChildReport> = serde_json::from_str(report_text.trim()).ok();
    let last_err = tail.iter().rev().find(|l| !l.trim().is_empty()).cloned();
    let (status, error) = match (killed_for, &report) {
        (Some(RunStatus::Timeout), _) => (
            RunStatus::Timeout,
            Some(format!(
                "timed out after {}",
                crate::units::fmt_secs(plan.timeout.as_secs_f64())
            )),
        ),
        (Some(s), _) => (s, Some("interrupted".to_string())),
        (None, Some(r)) => match &r.error {
            None => (RunStatus::Ok, None),
            Some(e) => (RunStatus::Failed, Some(e.clone())),
        },
        (None, None) => {
            let how = crate::measure::describe_exit(&usage);
            (
                RunStatus::Crashed,
                Some(match last_err {
                    Some(l) => format!("{how}: {l}"),
                    None => how,
                }),
            )
        }
    };
    let mut run = blank(cell, rep, status, parent_wall, String::new());
    run.error = error;
    run.user_s = usage.user_s;
    run.sys_s = usage.sys_s;
    run.max_rss_kib = usage.max_rss_kib;
    run.tree_pss_kib = tree_pss_kib;
    run.ctx_voluntary = usage.ctx_voluntary;
    run.ctx_involuntary = usage.ctx_involuntary;
    if let (Some(r), true) = (report, status.measured()) {
        run.wall_s = r.wall_s;
        run.tasks_ok = r.tasks_ok;
        run.tasks_failed = r.tasks_failed;
        run.failures = r.failures;
        run.bytes = r.bytes;
        run.latency_us = r.latency_us;
        run.threads_created = r.threads_created;
        run.processes_created = r.processes_created;
        run.gil_switches = r.gil_switches;
        // One representative run per cell keeps its timeline: the results file stays small.
        if rep == 0 {
            run.timeline_us = r.timeline_us;
        }
    } else {
        run.tasks_failed = cell.key.tasks;
    }
    run
}
