//! Judging and recording a run: [`classify`] decides how it ended (ok, failed, crashed, timed
//! out, interrupted) and why, [`convert`] turns what the parent saw and the child reported
//! into the run line.

use std::time::Duration;

use crate::analysis::results::{RunResult, RunStatus};
use crate::measure::slack::{Slack, ThreadTimers};
use crate::measure::wakeups::Wakeups;
use crate::plan::{CellKind, CellPlan};
use crate::runner::supervise::{Ended, Kill};
use crate::workload::Nature;

/// How a run ended, and why in one line when it did not end well.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    /// The run's status.
    pub status: RunStatus,
    /// Null for a good run, else the reason.
    pub error: Option<String>,
}

/// A run line of `cell` with nothing measured: what a run that never reported looks like,
/// and the base every run line is filled in from.
pub(crate) fn template(
    cell: &CellPlan,
    rep: usize,
    status: RunStatus,
    wall_s: f64,
    error: Option<String>,
) -> RunResult {
    // What the results, the tables and the reports show of the spec: a credential in its
    // query (`?access_token=`) masked; the plan keeps the spec the tasks run.
    let mut key = cell.key.clone();
    key.workload = crate::base::secret::mask_credentials(&key.workload);
    RunResult {
        key,
        workers: cell.workers,
        parallelism: cell.parallelism,
        traits: cell.traits.clone(),
        rep,
        isolation: Default::default(),
        pid: None,
        status,
        wall_s,
        user_s: 0.0,
        sys_s: 0.0,
        max_rss_kib: 0,
        tree_pss_kib: None,
        tree_pss_all_started_kib: None,
        tree_pss_end_kib: None,
        ctx_voluntary: 0,
        ctx_involuntary: 0,
        threads_created: 0,
        processes_created: 0,
        tasks_ok: 0,
        tasks_failed: 0,
        failures: Default::default(),
        bytes: 0,
        gil_switches: 0,
        error,
        latency_us: None,
        server_peak_in_flight: None,
        conn: Default::default(),
        timeline_us: None,
        timeline_tasks: None,
        startup_s: None,
        open: None,
        rate_search: None,
        queue_wait_us: None,
        wakeups: None,
        hub: None,
    }
}

/// The run line of a run that has ended (or could not start): judged by [`classify`] and
/// built by [`convert`], or by their external programs' versions for an external cell. The
/// one ending of every run concur supervises, here or on an agent.
pub(crate) fn judge(
    cell: &CellPlan,
    rep: usize,
    ended: std::io::Result<Ended>,
    timeout: Duration,
) -> RunResult {
    match ended {
        Err(e) => not_started(cell, rep, &e),
        Ok(ended) if matches!(cell.kind, CellKind::External { .. }) => {
            let verdict = classify_external(&ended, timeout);
            convert_external(cell, rep, ended, verdict)
        }
        Ok(ended) => {
            let verdict = classify(&ended, timeout);
            convert(cell, rep, ended, verdict)
        }
    }
}

/// The run line of a child that could not be started.
pub(super) fn not_started(cell: &CellPlan, rep: usize, why: &std::io::Error) -> RunResult {
    template(
        cell,
        rep,
        RunStatus::Spawn,
        0.0,
        Some(format!("could not start the run's process: {why}")),
    )
}

/// Decides how a run ended. The parent's own verdict (it killed the run) comes first; then the
/// child's report (its tasks failed or not); a child that never reported crashed, and the
/// reason is how it exited plus the last thing it said on stderr.
pub(crate) fn classify(ended: &Ended, timeout: Duration) -> Verdict {
    let usage = match &ended.waited {
        Ok(u) => u,
        Err(e) => {
            return Verdict {
                status: RunStatus::Crashed,
                error: Some(format!("could not wait for the run: {e}")),
            }
        }
    };
    let (status, error) = match (ended.killed_for, &ended.report) {
        (Some(Kill::Timeout), _) => (
            RunStatus::Timeout,
            Some(format!(
                "timed out after {}",
                crate::base::units::fmt_secs(timeout.as_secs_f64())
            )),
        ),
        (Some(Kill::Interrupt), _) => (RunStatus::Interrupted, Some("interrupted".to_string())),
        (None, Some(r)) => match &r.error {
            None => (RunStatus::Ok, None),
            Some(e) => (RunStatus::Failed, Some(e.clone())),
        },
        (None, None) => (
            RunStatus::Crashed,
            Some(crash_reason(crate::measure::describe_exit(usage), ended)),
        ),
    };
    Verdict { status, error }
}

/// Why a run crashed: how its process ended, and the last line it wrote on stderr.
fn crash_reason(how: String, ended: &Ended) -> String {
    match ended
        .stderr_tail
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
    {
        Some(l) => format!("{how}: {l}"),
        None => how,
    }
}

/// Fills in what the parent measured of the child (rusage from the wait, the tree's PSS);
/// false when there was no wait status, so nothing was measured.
fn parent_measured(run: &mut RunResult, ended: &Ended) -> bool {
    let Ok(usage) = &ended.waited else {
        return false;
    };
    run.user_s = usage.user_s;
    run.sys_s = usage.sys_s;
    run.max_rss_kib = usage.max_rss_kib;
    run.tree_pss_kib = ended.pss.peak_kib;
    run.tree_pss_all_started_kib = ended.pss.all_started_kib;
    run.tree_pss_end_kib = ended.pss.end_kib;
    run.ctx_voluntary = usage.ctx_voluntary;
    run.ctx_involuntary = usage.ctx_involuntary;
    true
}

/// Builds the run line from what the parent measured (rusage, PSS, its own wall) and, for a
/// run that measured, what the child reported (its own wall, tasks, bytes, latency).
pub(crate) fn convert(cell: &CellPlan, rep: usize, ended: Ended, verdict: Verdict) -> RunResult {
    let mut run = template(cell, rep, verdict.status, ended.wall_s, verdict.error);
    // Without a wait status there is no rusage either: the line stays as the template.
    if !parent_measured(&mut run, &ended) {
        return run;
    }
    match ended.report {
        Some(r) if verdict.status.measured() => {
            run.wall_s = r.wall_s;
            run.tasks_ok = r.tasks_ok;
            run.tasks_failed = r.tasks_failed;
            run.failures = r.failures;
            run.bytes = r.bytes;
            run.latency_us = r.latency_us;
            run.queue_wait_us = r.queue_wait_us;
            run.wakeups = r.wakeups;
            if let Some(c) = r.connections {
                run.conn = c;
            }
            run.threads_created = r.threads_created;
            run.processes_created = r.processes_created;
            run.gil_switches = r.gil_switches;
            run.pid = Some(r.pid);
            run.open = r.open;
            // One representative run per cell keeps its timeline: the results file stays small.
            if rep == 0 {
                run.timeline_us = r.timeline_us;
                run.timeline_tasks = r.timeline_tasks.map(Box::new);
            }
        }
        _ => run.tasks_failed = cell.key.tasks,
    }
    run
}

/// What an external program may report on its `CONCUR {json}` line. Other keys are the
/// program's own, for its other readers (`bench/` reads the classic crawl.py's `import_s` and
/// `peak_rss_kib`): they are ignored, never refused.
#[derive(Debug, Clone, serde::Deserialize)]
struct PeerReport {
    /// The work's own wall time, seconds.
    wall_s: f64,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(default)]
    tasks_ok: Option<usize>,
    #[serde(default)]
    tasks_failed: Option<usize>,
    /// A waiting program's own start of every task and wake-ups' lateness (the `tasks`
    /// study's programs), checked like any figure from outside.
    #[serde(default)]
    wakeups: Option<crate::measure::wakeups::Wakeups>,
}

fn peer_report(ended: &Ended) -> Option<Result<PeerReport, String>> {
    let text = ended.concur_line.as_ref()?;
    // Its figures are held to what a results line may hold, so the run line made of them
    // reads back (a `wall_s` of 1e308 would be refused by `concur report`).
    if let Err(why) = serde_json::from_str::<serde_json::Value>(text)
        .map_err(|e| e.to_string())
        .and_then(|v| crate::analysis::results::check_figures(&v))
    {
        return Some(Err(format!("its CONCUR line: {why}")));
    }
    Some(
        serde_json::from_str::<PeerReport>(text)
            .ok()
            .filter(|r| r.wall_s.is_finite() && r.wall_s >= 0.0)
            .ok_or_else(|| format!("its CONCUR line is not {{\"wall_s\": SECONDS, …}}: {text}"))
            // A slack is concur's to compute ([`program_slack`]), never the program's to say.
            .map(|r| PeerReport {
                wakeups: r.wakeups.map(|w| Wakeups { slack: None, ..w }),
                ..r
            })
            .and_then(|r| match r.wakeups.map(|w| w.check()) {
                Some(Err(why)) => Err(format!("its CONCUR line's wakeups: {why}")),
                _ => Ok(r),
            }),
    )
}

/// The slack the kernel gives one wait of an external cell's program, when the cell knows
/// its primitive (a traced `--classic` program) and its wait; never what the program says.
/// The program inherited this thread's timer settings from the runner that spawned it.
fn program_slack(cell: &CellPlan) -> Option<Slack> {
    let (
        CellKind::External {
            wait_primitive: Some(p),
            ..
        },
        Nature::Delay(wait),
    ) = (&cell.kind, cell.traits.nature)
    else {
        return None;
    };
    Some(Slack::of(*p, wait, ThreadTimers::current()))
}

/// The bytes each task of an external cell produces, when the cell knows them (a classic
/// program's): its runs must count their tasks and report those bytes.
fn bytes_per_task(cell: &CellPlan) -> Option<u64> {
    match cell.kind {
        CellKind::External { bytes_per_task, .. } => bytes_per_task,
        CellKind::Concur { .. } => None,
    }
}

/// The tasks ok and failed of an external run's `CONCUR` line, held to its cell, or why they
/// are a bad line rather than a measurement (the reason names the counts): they must account
/// for every task of the cell (a line of 7 tasks ok out of 4 was found by the concur_line
/// fuzz target), and where the cell knows the bytes each task produces (a classic program),
/// the line must count its tasks ok itself and report their bytes, summed.
fn counted(r: &PeerReport, cell: &CellPlan) -> Result<(usize, usize), String> {
    let n = cell.key.tasks;
    let failed = r.tasks_failed.unwrap_or(0);
    let ok = r.tasks_ok.unwrap_or(n.saturating_sub(failed));
    if ok.checked_add(failed) != Some(n) {
        return Err(format!(
            "its CONCUR line counts {ok} tasks ok and {failed} failed, not the cell's {n}"
        ));
    }
    let Some(each) = bytes_per_task(cell) else {
        return Ok((ok, failed));
    };
    if r.tasks_ok.is_none() {
        return Err(format!(
            "its CONCUR line does not count its tasks ok (tasks_ok) of the cell's {n}"
        ));
    }
    let expected = each.saturating_mul(ok as u64);
    match r.bytes {
        Some(bytes) if bytes == expected => Ok((ok, failed)),
        got => Err(format!(
            "its CONCUR line counts {ok} tasks ok and {}, not the {expected} bytes of {ok} tasks of {each} bytes each",
            got.map_or("no bytes".to_string(), |b| format!("{b} bytes"))
        )),
    }
}

/// Decides how an external program's run ended: killed by the parent, a bad exit (its last
/// stderr line as the reason), a bad `CONCUR` line, failed tasks it reported, or ok.
pub(crate) fn classify_external(ended: &Ended, timeout: Duration) -> Verdict {
    let usage = match &ended.waited {
        Ok(u) => u,
        Err(e) => {
            return Verdict {
                status: RunStatus::Crashed,
                error: Some(format!("could not wait for the program: {e}")),
            }
        }
    };
    let (status, error) = match ended.killed_for {
        Some(Kill::Timeout) => (
            RunStatus::Timeout,
            Some(format!(
                "timed out after {}",
                crate::base::units::fmt_secs(timeout.as_secs_f64())
            )),
        ),
        Some(Kill::Interrupt) => (RunStatus::Interrupted, Some("interrupted".to_string())),
        None if usage.exit_code == Some(0) => match peer_report(ended) {
            Some(Err(why)) => (RunStatus::Failed, Some(why)),
            Some(Ok(PeerReport {
                tasks_failed: Some(k),
                ..
            })) if k > 0 => (
                RunStatus::Failed,
                Some(format!("{k} tasks failed (its CONCUR line)")),
            ),
            _ => (RunStatus::Ok, None),
        },
        None => {
            let how = match (usage.exit_code, usage.signal) {
                (_, Some(sig)) => format!("killed by {}", crate::measure::rusage::signal_name(sig)),
                (Some(code), _) => format!("exited with code {code}"),
                _ => "ended without a status".into(),
            };
            (RunStatus::Crashed, Some(crash_reason(how, ended)))
        }
    };
    Verdict { status, error }
}

/// Builds an external program's run line: the parent's rusage and PSS, and as wall the work's
/// own wall from its `CONCUR` line (the rest of the process's wall is its start-up) or, without
/// one, the whole process's wall.
pub(crate) fn convert_external(
    cell: &CellPlan,
    rep: usize,
    ended: Ended,
    verdict: Verdict,
) -> RunResult {
    let mut run = template(
        cell,
        rep,
        verdict.status,
        ended.wall_s,
        verdict.error.clone(),
    );
    if !parent_measured(&mut run, &ended) {
        return run;
    }
    run.processes_created = 1;
    if !verdict.status.measured() {
        run.tasks_failed = cell.key.tasks;
        return run;
    }
    let n = cell.key.tasks;
    match peer_report(&ended) {
        Some(Ok(r)) => {
            let (ok, failed) = match counted(&r, cell) {
                Ok(counts) => counts,
                Err(why) => {
                    run.status = RunStatus::Failed;
                    run.error = Some(why);
                    run.tasks_failed = n;
                    return run;
                }
            };
            run.wall_s = r.wall_s;
            run.startup_s = Some((ended.wall_s - r.wall_s).max(0.0));
            run.bytes = r.bytes.unwrap_or(0);
            run.wakeups = r.wakeups.map(|w| Wakeups {
                slack: program_slack(cell),
                ..w
            });
            run.tasks_failed = failed;
            run.tasks_ok = ok;
            if run.tasks_failed > 0 {
                run.failures.insert("external".into(), run.tasks_failed);
            }
        }
        None if verdict.status == RunStatus::Ok && bytes_per_task(cell).is_some() => {
            run.status = RunStatus::Failed;
            run.error = Some(format!(
                "it printed no CONCUR line to count its tasks ok of the cell's {n}"
            ));
            run.tasks_failed = n;
        }
        _ => {
            run.tasks_ok = if verdict.status == RunStatus::Ok {
                n
            } else {
                0
            };
            run.tasks_failed = n - run.tasks_ok;
        }
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::memory::TreePss;

    fn ended_with(line: &str) -> Ended {
        Ended {
            waited: Err(std::io::Error::other("not waited for")),
            killed_for: None,
            wall_s: 1.0,
            pss: TreePss::default(),
            report: None,
            concur_line: Some(line.into()),
            stderr_tail: vec![],
        }
    }

    #[test]
    fn a_concur_line_may_carry_keys_of_its_own_but_needs_wall_s() {
        let line = r#"{"wall_s": 0.5, "bytes": 10, "tasks_ok": 1, "tasks_failed": 0, "import_s": 0.2, "peak_rss_kib": 30000}"#;
        let r = peer_report(&ended_with(line)).unwrap().unwrap();
        assert_eq!(
            (r.wall_s, r.bytes, r.tasks_ok, r.tasks_failed),
            (0.5, Some(10), Some(1), Some(0))
        );
        let e = peer_report(&ended_with(r#"{"bytes": 10}"#))
            .unwrap()
            .unwrap_err();
        assert!(e.contains("wall_s"), "{e}");
    }

    /// An external cell of 4 tasks (`fib:5`'s table), expecting `each` bytes a task or not.
    fn external_cell(each: Option<u64>) -> CellPlan {
        let opts = crate::plan::StudyOptions {
            workloads: vec!["fib:5".into()],
            models: vec!["seq".into()],
            tasks: vec![4],
            peers: crate::plan::options::PeerOptions {
                peers: vec!["prog=true".into()],
                ..Default::default()
            },
            ..Default::default()
        };
        let plan = crate::plan::build(&opts).expect("plan");
        let mut cell = plan
            .cells
            .into_iter()
            .find(|c| !c.is_concur())
            .expect("the external cell");
        cell.kind = CellKind::External {
            command: "true".into(),
            bytes_per_task: each,
            wait_primitive: None,
        };
        cell
    }

    fn report(line: &str) -> PeerReport {
        peer_report(&ended_with(line)).unwrap().unwrap()
    }

    #[test]
    fn counts_must_account_for_every_task_of_the_cell() {
        let cell = external_cell(None);
        let ok = |line: &str| counted(&report(line), &cell);
        assert_eq!(ok(r#"{"wall_s": 1}"#), Ok((4, 0)));
        assert_eq!(
            ok(r#"{"wall_s": 1, "tasks_ok": 3, "tasks_failed": 1}"#),
            Ok((3, 1))
        );
        // A program that finished fewer tasks than it was asked for and said nothing of the rest.
        let e = ok(r#"{"wall_s": 1, "tasks_ok": 3, "bytes": 7}"#).unwrap_err();
        assert_eq!(
            e,
            "its CONCUR line counts 3 tasks ok and 0 failed, not the cell's 4"
        );
        // Without an expectation, the bytes are the program's own.
        assert_eq!(
            ok(r#"{"wall_s": 1, "tasks_ok": 4, "bytes": 7}"#),
            Ok((4, 0))
        );
    }

    #[test]
    fn a_cell_that_knows_its_bytes_checks_the_checksum_and_the_count() {
        let cell = external_cell(Some(8));
        let ok = |line: &str| counted(&report(line), &cell);
        assert_eq!(
            ok(r#"{"wall_s": 1, "tasks_ok": 4, "bytes": 32}"#),
            Ok((4, 0))
        );
        assert_eq!(
            ok(r#"{"wall_s": 1, "tasks_ok": 3, "tasks_failed": 1, "bytes": 24}"#),
            Ok((3, 1))
        );
        assert_eq!(
            ok(r#"{"wall_s": 1, "tasks_ok": 4, "bytes": 24}"#).unwrap_err(),
            "its CONCUR line counts 4 tasks ok and 24 bytes, not the 32 bytes of 4 tasks of 8 bytes each"
        );
        let e = ok(r#"{"wall_s": 1, "tasks_ok": 4}"#).unwrap_err();
        assert!(e.contains("4 tasks ok and no bytes"), "{e}");
        let e = ok(r#"{"wall_s": 1, "bytes": 32}"#).unwrap_err();
        assert_eq!(
            e,
            "its CONCUR line does not count its tasks ok (tasks_ok) of the cell's 4"
        );
        let e = ok(r#"{"wall_s": 1, "tasks_ok": 2, "bytes": 16}"#).unwrap_err();
        assert!(
            e.contains("2 tasks ok and 0 failed, not the cell's 4"),
            "{e}"
        );
    }

    #[test]
    fn a_cell_that_knows_its_bytes_fails_a_run_without_a_concur_line() {
        let ended = |line: Option<&str>| Ended {
            waited: Ok(crate::measure::rusage::ChildUsage {
                exit_code: Some(0),
                ..Default::default()
            }),
            concur_line: line.map(str::to_string),
            ..ended_with("")
        };
        let judged = |each, line| {
            let ended = ended(line);
            let verdict = classify_external(&ended, Duration::from_secs(9));
            convert_external(&external_cell(each), 0, ended, verdict)
        };
        let run = judged(Some(0), None);
        assert_eq!(run.status, RunStatus::Failed);
        assert_eq!(
            run.error.as_deref(),
            Some("it printed no CONCUR line to count its tasks ok of the cell's 4")
        );
        assert_eq!((run.tasks_ok, run.tasks_failed), (0, 4));
        // A program of the user's own may print none: its whole process is the run.
        let run = judged(None, None);
        assert_eq!((run.status, run.tasks_ok), (RunStatus::Ok, 4));
        let run = judged(
            Some(0),
            Some(r#"{"wall_s": 0.5, "tasks_ok": 4, "bytes": 0}"#),
        );
        assert_eq!(
            (run.status, run.tasks_ok, run.wall_s),
            (RunStatus::Ok, 4, 0.5)
        );
        let run = judged(
            Some(8),
            Some(r#"{"wall_s": 0.5, "tasks_ok": 4, "bytes": 24}"#),
        );
        assert_eq!(run.status, RunStatus::Failed);
        assert!(
            run.error.as_deref().is_some_and(|e| e.contains("24 bytes")),
            "{run:?}"
        );
    }

    #[test]
    fn a_concur_lines_wakeups_are_taken_when_they_hold_together() {
        let late = r#""late_us": {"p50": 120, "p90": 300, "p99": 900, "p999": 1000, "max": 1500}"#;
        let line = format!(r#"{{"wall_s": 10.2, "wakeups": {{"start_all_s": 0.25, {late}}}}}"#);
        let r = peer_report(&ended_with(&line)).unwrap().unwrap();
        let w = r.wakeups.expect("wakeups");
        assert_eq!(
            (w.start_all_s, w.late_us.p99, w.late_us.max),
            (0.25, 900, 1500)
        );
        let bad = line.replace(r#""p50": 120"#, r#""p50": 2000"#);
        let e = peer_report(&ended_with(&bad)).unwrap().unwrap_err();
        assert!(
            e.contains("wakeups") && e.contains("increasing order"),
            "{e}"
        );
        let negative = line.replace("0.25", "-1");
        let e = peer_report(&ended_with(&negative)).unwrap().unwrap_err();
        assert!(e.contains("start_all_s -1"), "{e}");
        // A slack of the program's own, right or wrong, is not taken: concur computes it.
        let claims = line.replace(
            "\"start_all_s\": 0.25,",
            r#""start_all_s": 0.25, "slack": {"primitive": "futex", "ns": 7, "timer_slack_ns": 50000, "nice": 0, "realtime": false},"#,
        );
        assert_ne!(claims, line);
        let r = peer_report(&ended_with(&claims)).unwrap().unwrap();
        assert_eq!(r.wakeups.expect("wakeups").slack, None);
    }
}
