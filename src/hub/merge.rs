//! The hosts' runs of one cell into one run line. Latency is merged exactly: each host sends
//! its HDR histogram whole (one configuration everywhere) with the exact count, min, max and
//! sum, and the merged row's percentiles are those of one histogram of every task. The rest
//! is summed or maximised as its meaning requires:
//!
//! - summed: tasks, failures, bytes, CPU (user, system), context switches, threads and
//!   processes created, the peak PSS of the process trees (each host's own peak: the hosts
//!   together never used more), connections opened and reused, open runs' asked and achieved
//!   rates and each interval's counts;
//! - maximised: wall time (the last host to finish), the largest process's RSS, start-up,
//!   HTTP/2's peak streams per connection;
//! - the worst host's (by p99): connect and TLS handshake times, an open run's service,
//!   queue and dispatcher-lag percentiles (these travel as percentiles only).
//!
//! An answer is outside input (`check_ended`): before anything of it is summed, every
//! figure is checked to be one an honest run of its share could report (finite, not negative,
//! within what the share's tasks and the host's cores and time allow, its counts adding up to
//! the share, its histograms those of this recorder's configuration), so that no sum can
//! overflow to infinity (which the results file writes as `null`) and no host can answer for
//! more or less than it was given.

use crate::analysis::results::{HostPart, HubRun, PartFigures, PartStatus, RunResult, RunStatus};
use crate::measure::latency::{LatencyRecorder, LatencySummary, LatencyWire};
use crate::measure::open::{OpenStats, KEPT_UP};

use super::work::PartEnded;

/// The most bytes of one answer the study reads from the hub (an honest one, its timeline and
/// open series included, is a few hundred KB at most).
pub const ANSWER_MAX_BYTES: usize = 16 << 20;

/// How many lines of a share's stderr an answer keeps (the agent's own runner keeps 20).
pub const STDERR_TAIL_LINES: usize = 20;

/// How many characters of each such line, or of any other text of an answer, are kept.
pub const TEXT_MAX_CHARS: usize = 1000;

/// The most memory, KiB, any one figure of an answer may say (1 PiB).
const KIB_MAX: u64 = 1 << 40;

/// The most any counter of an answer may say (context switches, threads, connections).
const COUNT_MAX: u64 = 1 << 48;

/// The most bytes a share may say its tasks produced (1 PiB).
const BYTES_MAX: u64 = 1 << 50;

/// What a share was: what its answer is checked against.
#[derive(Debug, Clone, Copy)]
pub struct ShareBounds {
    /// Its tasks (a closed cell) or arrivals (an open one).
    pub tasks: usize,
    /// The cores its agent said it has.
    pub cores: usize,
    /// The longest its run may have taken on the agent, seconds (the study's wait).
    pub wall_max_s: f64,
}

/// `text` cut to [`TEXT_MAX_CHARS`] characters.
fn clip(text: &mut String) {
    if let Some((at, _)) = text.char_indices().nth(TEXT_MAX_CHARS) {
        text.truncate(at);
        text.push('…');
    }
}

/// A figure that must be a finite, non-negative number of at most `max`.
fn seconds(what: &str, v: f64, max: f64) -> Result<(), String> {
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(())
    } else {
        Err(format!("{what} {} (allowed: 0 to {})", num(v), num(max)))
    }
}

/// A number as a refusal shows it: 1.5e308, not its 309 digits.
fn num(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A count of at most `max`.
fn count(what: &str, v: u64, max: u64) -> Result<(), String> {
    if v <= max {
        Ok(())
    } else {
        Err(format!("{what} {v} (allowed: at most {max})"))
    }
}

/// Checks what an agent said of its share against what the share was, and trims its texts
/// (stderr lines, error messages) to their bounds; the first figure no honest run of the share
/// could report is the error.
pub(crate) fn check_ended(e: &mut PartEnded, share: ShareBounds) -> Result<(), String> {
    e.stderr_tail = std::mem::take(&mut e.stderr_tail)
        .into_iter()
        .rev()
        .take(STDERR_TAIL_LINES)
        .rev()
        .map(|mut l| {
            clip(&mut l);
            l
        })
        .collect();
    let tasks = share.tasks as u64;
    seconds("wall_s", e.wall_s, share.wall_max_s)?;
    match &mut e.waited {
        Ok(u) => {
            // A host cannot use more CPU than its cores over the wall (twice that, for
            // rusage's ticks and a cores count taken under a CPU quota), plus a second.
            let cpu_max = e.wall_s * share.cores.max(1) as f64 * 2.0 + 1.0;
            seconds("user_s", u.user_s, cpu_max)?;
            seconds("sys_s", u.sys_s, cpu_max)?;
            count("max_rss_kib", u.max_rss_kib, KIB_MAX)?;
            count("ctx_voluntary", u.ctx_voluntary, COUNT_MAX)?;
            count("ctx_involuntary", u.ctx_involuntary, COUNT_MAX)?;
        }
        Err(why) => clip(why),
    }
    if let Some(pss) = e.tree_pss_kib {
        count("tree_pss_kib", pss, KIB_MAX)?;
    }
    let Some(r) = &mut e.report else {
        return Ok(());
    };
    if let Some(why) = &mut r.error {
        clip(why);
    }
    seconds("the report's wall_s", r.wall_s, e.wall_s + 1.0)?;
    let performed = (r.tasks_ok as u64).saturating_add(r.tasks_failed as u64);
    let adds_up = if r.error.is_none() {
        performed == tasks
    } else {
        performed <= tasks
    };
    if !adds_up {
        return Err(format!(
            "tasks_ok {} + tasks_failed {} for a share of {tasks} tasks (allowed: {} {tasks})",
            r.tasks_ok,
            r.tasks_failed,
            if r.error.is_none() {
                "exactly"
            } else {
                "at most"
            }
        ));
    }
    let kinds = r
        .failures
        .values()
        .try_fold(0u64, |a, &n| a.checked_add(n as u64));
    if kinds != Some(r.tasks_failed as u64) || r.failures.keys().any(|k| k.len() > 200) {
        return Err(format!(
            "failures by kind add up to {} for tasks_failed {} (allowed: the same number, kinds of at most 200 bytes)",
            kinds.map_or("more than 2^64".into(), |n| n.to_string()),
            r.tasks_failed
        ));
    }
    count("bytes", r.bytes, BYTES_MAX)?;
    count("threads_created", r.threads_created as u64, COUNT_MAX)?;
    count("processes_created", r.processes_created as u64, COUNT_MAX)?;
    count("gil_switches", r.gil_switches, COUNT_MAX)?;
    if let Some(t) = &r.timeline_us {
        count(
            "timeline_us's length",
            t.len() as u64,
            crate::measure::TIMELINE_CAP as u64,
        )?;
    }
    if let Some(c) = &r.connections {
        count("connections opened", c.opened, COUNT_MAX)?;
        count("connections reused", c.reused, COUNT_MAX)?;
    }
    if let Some(o) = &r.open {
        check_open(o, tasks)?;
    }
    for (what, w) in [
        ("latency_hdr", &r.latency_hdr),
        ("queue_wait_hdr", &r.queue_wait_hdr),
    ] {
        if let Some(w) = w {
            LatencyRecorder::from_wire(w).map_err(|e| format!("{what}: {e}"))?;
            count(&format!("{what}'s count"), w.exact.count, performed)?;
        }
    }
    if let Some(ns) = r.first_task_ns {
        let max_ns = share.wall_max_s * 1e9;
        if (ns as f64).abs() > max_ns {
            return Err(format!(
                "first_task_ns {ns} (allowed: within ±{max_ns:.0} of the common start)"
            ));
        }
    }
    Ok(())
}

/// An open run's rates and series: finite, not negative, its counts within the share.
fn check_open(o: &OpenStats, tasks: u64) -> Result<(), String> {
    // A rate no clock could release: a task every nanosecond.
    let rate_max = 1e9;
    seconds("rate_asked", o.rate_asked, rate_max)?;
    if let Some([a, b]) = o.rate_ramp {
        seconds("rate_ramp", a, rate_max)?;
        seconds("rate_ramp", b, rate_max)?;
    }
    if let Some(a) = o.rate_achieved {
        seconds("rate_achieved", a, rate_max)?;
    }
    for p in &o.series {
        if !p.t_s.is_finite() {
            return Err(format!("a series point at t_s {} (allowed: finite)", p.t_s));
        }
        seconds("a series point's rate_asked", p.rate_asked, rate_max)?;
        count("a series point's done", p.done, tasks)?;
        count("a series point's errors", p.errors, tasks)?;
        count("a series point's in_flight", p.in_flight, tasks)?;
    }
    Ok(())
}

/// The first figure of a merged run line that is not a finite number, if any.
fn not_finite(r: &RunResult) -> Option<(&'static str, f64)> {
    let mut figures = vec![
        ("wall_s", r.wall_s),
        ("user_s", r.user_s),
        ("sys_s", r.sys_s),
    ];
    if let Some(o) = &r.open {
        figures.push(("rate_asked", o.rate_asked));
        figures.extend(o.rate_achieved.map(|a| ("rate_achieved", a)));
    }
    figures.into_iter().find(|(_, v)| !v.is_finite())
}

/// One host's share as the study saw it end.
pub struct PartOutcome {
    /// The agent.
    pub host: String,
    /// Which share.
    pub share: usize,
    /// Its tasks.
    pub tasks: usize,
    /// Its run line (absent when the part was lost or refused).
    pub run: Option<RunResult>,
    /// Why it was lost or refused.
    pub lost: Option<(PartStatus, String)>,
    /// Its latency histogram.
    pub latency: Option<LatencyWire>,
    /// A queue model's enqueue-to-start histogram.
    pub queue_wait: Option<LatencyWire>,
    /// The agent's clock.
    pub clock: super::clock::ClockOffset,
    /// Its first task's start after the common start, ns.
    pub first_task_ns: Option<i64>,
}

/// The "worse" of two percentile summaries: the one with the larger p99.
fn worst(a: Option<LatencySummary>, b: Option<LatencySummary>) -> Option<LatencySummary> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.p99 > x.p99 { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// Merges the parts of one run into `base` (the cell's run line template: key, workers and
/// parallelism of the whole cell, K hosts together); `lead_s` is from sending the work to the
/// announced common start.
pub fn merge(mut base: RunResult, parts: Vec<PartOutcome>, lead_s: f64) -> RunResult {
    let hosts = parts.len();
    let whole: usize = parts.iter().map(|p| p.tasks).sum();
    let mut latency: Option<LatencyRecorder> = None;
    let mut queue_wait: Option<LatencyRecorder> = None;
    let mut problems: Vec<String> = Vec::new();
    let mut lost_tasks = 0usize;
    let mut rows = Vec::with_capacity(hosts);
    let mut measured = 0usize;
    let mut worst_status: Option<RunStatus> = None;
    for p in &parts {
        let mut row = HostPart {
            host: p.host.clone(),
            share: p.share,
            tasks: p.tasks,
            status: PartStatus::Ok,
            error: None,
            run: None,
            clock_offset_ns: p.clock.offset_ns,
            clock_uncertainty_ns: p.clock.uncertainty_ns,
            first_task_ms: p.first_task_ns.map(|n| n as f64 / 1e6),
            latency_hdr: p.latency.clone(),
        };
        if let Some((status, why)) = &p.lost {
            row.status = *status;
            row.error = Some(why.clone());
            lost_tasks += p.tasks;
            problems.push(format!("host '{}' {why}", p.host));
            rows.push(row);
            continue;
        }
        let Some(r) = &p.run else {
            rows.push(row);
            continue;
        };
        if r.status != RunStatus::Ok {
            row.status = PartStatus::Failed;
            row.error = r.error.clone();
            problems.push(format!(
                "host '{}': {}",
                p.host,
                r.error.as_deref().unwrap_or("failed")
            ));
            if !r.status.measured() {
                lost_tasks += p.tasks;
                worst_status.get_or_insert(r.status);
            }
        }
        row.run = Some(PartFigures {
            status: r.status,
            wall_s: r.wall_s,
            user_s: r.user_s,
            sys_s: r.sys_s,
            tree_pss_kib: r.tree_pss_kib,
            tasks_ok: r.tasks_ok,
            tasks_failed: r.tasks_failed,
            latency_us: r.latency_us,
            queue_wait_us: r.queue_wait_us,
            behind: r.open.as_ref().map(|o| o.behind),
            rate_achieved: r.open.as_ref().and_then(|o| o.rate_achieved),
        });
        rows.push(row);
        if !r.status.measured() {
            continue;
        }
        measured += 1;
        add_run(&mut base, r, measured == 1);
        add_wire(&mut latency, p.latency.as_ref());
        add_wire(&mut queue_wait, p.queue_wait.as_ref());
    }
    if let Some(o) = &mut base.open {
        o.behind = o.behind || o.rate_achieved.is_some_and(|a| a < KEPT_UP * o.rate_asked);
    }
    base.latency_us = latency.as_ref().and_then(|l| l.summary());
    base.queue_wait_us = queue_wait.as_ref().and_then(|l| l.summary());
    // Not every share ran: the tasks it did not perform count as failed.
    base.tasks_failed += lost_tasks;
    if lost_tasks > 0 {
        *base.failures.entry("lost".into()).or_default() += lost_tasks;
    }
    base.status = match (measured, problems.is_empty()) {
        (0, _) => worst_status.unwrap_or(RunStatus::Crashed),
        (_, true) => RunStatus::Ok,
        (_, false) => RunStatus::Failed,
    };
    let covered = if whole == 0 {
        1.0
    } else {
        (whole - lost_tasks.min(whole)) as f64 / whole as f64
    };
    if !problems.is_empty() {
        let mut why = problems.join("; ");
        if lost_tasks > 0 {
            why.push_str(&format!(
                "; {lost_tasks} of {whole} tasks not performed: the row covers {:.1}% of the work",
                covered * 100.0
            ));
        }
        base.error = Some(why);
    }
    let starts: Vec<f64> = rows.iter().filter_map(|r| r.first_task_ms).collect();
    let spread = (starts.len() >= 2).then(|| {
        let max = starts.iter().cloned().fold(f64::MIN, f64::max);
        let min = starts.iter().cloned().fold(f64::MAX, f64::min);
        max - min
    });
    let last_first = starts.iter().cloned().fold(f64::MIN, f64::max);
    // Each host's figures were checked; their sums are too, as no results file can hold
    // an infinity.
    if let Some((what, v)) = not_finite(&base) {
        base.status = RunStatus::Failed;
        let why = format!("the hosts' {what} adds up to {v}: not written");
        base.error = Some(match base.error.take() {
            Some(e) => format!("{e}; {why}"),
            None => why,
        });
        base.wall_s = 0.0;
        base.user_s = 0.0;
        base.sys_s = 0.0;
        base.open = None;
    }
    base.hub = Some(HubRun {
        hosts,
        covered,
        lost_tasks,
        start_spread_ms: spread,
        coordination_s: (!starts.is_empty()).then(|| lead_s + last_first.max(0.0) / 1e3),
        latency_hdr: latency.as_ref().and_then(|l| l.to_wire()),
        server_host: None,
        server_cpu_s: None,
        parts: rows,
    });
    base
}

/// Adds a host's histogram, as it travelled, into `all`.
fn add_wire(all: &mut Option<LatencyRecorder>, wire: Option<&LatencyWire>) {
    let Some(rec) = wire.and_then(|w| LatencyRecorder::from_wire(w).ok()) else {
        return;
    };
    match all {
        Some(a) => a.add(&rec),
        None => *all = Some(rec),
    }
}

/// Adds one host's measured run line into the merged one.
fn add_run(m: &mut RunResult, r: &RunResult, first: bool) {
    m.wall_s = if first {
        r.wall_s
    } else {
        m.wall_s.max(r.wall_s)
    };
    m.user_s += r.user_s;
    m.sys_s += r.sys_s;
    m.max_rss_kib = m.max_rss_kib.max(r.max_rss_kib);
    m.tree_pss_kib = match (m.tree_pss_kib, r.tree_pss_kib) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    m.ctx_voluntary += r.ctx_voluntary;
    m.ctx_involuntary += r.ctx_involuntary;
    m.threads_created += r.threads_created;
    m.processes_created += r.processes_created;
    m.tasks_ok += r.tasks_ok;
    m.tasks_failed += r.tasks_failed;
    for (k, v) in &r.failures {
        *m.failures.entry(k.clone()).or_default() += v;
    }
    m.bytes += r.bytes;
    m.gil_switches += r.gil_switches;
    m.startup_s = match (m.startup_s, r.startup_s) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let (c, h) = (&mut m.conn, &r.conn);
    let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    };
    c.connections_opened = sum(c.connections_opened, h.connections_opened);
    c.connections_reused = sum(c.connections_reused, h.connections_reused);
    c.connect_us = worst(c.connect_us, h.connect_us);
    c.tls_us = worst(c.tls_us, h.tls_us);
    c.http_version = c.http_version.or(h.http_version);
    c.peak_streams_per_connection = c
        .peak_streams_per_connection
        .max(h.peak_streams_per_connection);
    c.server_max_concurrent_streams = c
        .server_max_concurrent_streams
        .or(h.server_max_concurrent_streams);
    if let Some(t) = &r.timeline_us {
        let mine = m.timeline_us.get_or_insert_with(Vec::new);
        let room = crate::measure::TIMELINE_CAP.saturating_sub(mine.len());
        mine.extend(t.iter().take(room));
    }
    m.open = match (m.open.take(), &r.open) {
        (None, Some(o)) => Some(o.clone()),
        (Some(a), Some(b)) => Some(add_open(a, b)),
        (a, None) => a,
    };
}

/// Two hosts' open-run measures as one: rates and counts summed, the rest the worse host's.
fn add_open(mut a: OpenStats, b: &OpenStats) -> OpenStats {
    a.rate_asked += b.rate_asked;
    a.rate_ramp = match (a.rate_ramp, b.rate_ramp) {
        (Some([x0, x1]), Some([y0, y1])) => Some([x0 + y0, x1 + y1]),
        (x, y) => x.or(y),
    };
    a.rate_achieved = match (a.rate_achieved, b.rate_achieved) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    };
    a.behind = a.behind || b.behind;
    a.service_us = worst(a.service_us, b.service_us);
    a.queue_us = worst(a.queue_us, b.queue_us);
    a.lag_us = worst(a.lag_us, b.lag_us);
    a.grain_us = a.grain_us.or(b.grain_us);
    for (i, q) in b.series.iter().enumerate() {
        match a.series.get_mut(i) {
            Some(p) => {
                p.done += q.done;
                p.errors += q.errors;
                p.in_flight += q.in_flight;
                p.rate_asked += q.rate_asked;
                p.p50_us = p.p50_us.max(q.p50_us);
                p.p99_us = p.p99_us.max(q.p99_us);
            }
            None => a.series.push(*q),
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::rusage::ChildUsage;
    use crate::study::child::ChildReport;

    const SHARE: ShareBounds = ShareBounds {
        tasks: 4,
        cores: 2,
        wall_max_s: 12.0,
    };

    /// What an honest agent answers for a share of 4 tasks that all succeeded.
    fn honest() -> PartEnded {
        let mut latency = LatencyRecorder::new();
        for us in [100, 200, 300, 400] {
            latency.record_us(us);
        }
        PartEnded {
            waited: Ok(ChildUsage {
                exit_code: Some(0),
                user_s: 0.5,
                sys_s: 0.1,
                max_rss_kib: 8000,
                ..Default::default()
            }),
            killed_for: None,
            wall_s: 1.2,
            tree_pss_kib: Some(9000),
            report: Some(ChildReport {
                wall_s: 1.0,
                tasks_ok: 4,
                latency_hdr: latency.to_wire(),
                ..Default::default()
            }),
            stderr_tail: vec![],
        }
    }

    #[test]
    fn an_honest_answer_passes_and_its_texts_are_trimmed() {
        let mut e = honest();
        e.stderr_tail = (0..100)
            .map(|i| format!("{i}{}", "x".repeat(5000)))
            .collect();
        check_ended(&mut e, SHARE).unwrap();
        assert_eq!(e.stderr_tail.len(), STDERR_TAIL_LINES);
        assert!(e.stderr_tail[0].starts_with("80x"));
        assert!(e
            .stderr_tail
            .iter()
            .all(|l| l.chars().count() == TEXT_MAX_CHARS + 1));
    }

    /// The answer: `user_s` 1.5e308, which two hosts summed to infinity (`null` in the
    /// results file); and every other figure no run of the share could report.
    #[test]
    fn figures_no_honest_run_could_report_are_refused() {
        type Forge = fn(&mut PartEnded);
        let cases: Vec<(Forge, &str)> = vec![
            (|e| e.waited.as_mut().unwrap().user_s = 1.5e308, "user_s"),
            (|e| e.waited.as_mut().unwrap().sys_s = f64::NAN, "sys_s"),
            (|e| e.waited.as_mut().unwrap().user_s = -1.0, "user_s"),
            (|e| e.wall_s = f64::INFINITY, "wall_s"),
            (|e| e.wall_s = 1e6, "wall_s"),
            (|e| e.tree_pss_kib = Some(u64::MAX), "tree_pss_kib"),
            (|e| e.report.as_mut().unwrap().tasks_ok = 3, "tasks_ok 3"),
            (
                |e| e.report.as_mut().unwrap().tasks_ok = 400,
                "tasks_ok 400",
            ),
            (
                |e| e.report.as_mut().unwrap().tasks_failed = usize::MAX,
                "tasks_failed",
            ),
            (|e| e.report.as_mut().unwrap().bytes = u64::MAX, "bytes"),
            (|e| e.report.as_mut().unwrap().wall_s = 5.0, "wall_s"),
            (
                |e| {
                    let r = e.report.as_mut().unwrap();
                    r.tasks_ok = 3;
                    r.tasks_failed = 1;
                },
                "failures by kind",
            ),
            (
                |e| {
                    let w = e.report.as_mut().unwrap().latency_hdr.as_mut().unwrap();
                    w.hdr_v2 = "HIST".into();
                },
                "latency_hdr",
            ),
            (
                |e| {
                    let w = e.report.as_mut().unwrap().latency_hdr.as_mut().unwrap();
                    w.exact.count = 5;
                },
                "latency_hdr",
            ),
            (
                |e| {
                    e.report.as_mut().unwrap().open = Some(OpenStats {
                        rate_asked: f64::INFINITY,
                        rate_ramp: None,
                        rate_achieved: None,
                        behind: false,
                        service_us: None,
                        queue_us: None,
                        lag_us: None,
                        grain_us: None,
                        series: vec![],
                    })
                },
                "rate_asked",
            ),
        ];
        for (forge, says) in cases {
            let mut e = honest();
            forge(&mut e);
            let why = check_ended(&mut e, SHARE).unwrap_err();
            assert!(why.contains(says), "{says}: {why}");
            assert!(why.contains("allowed"), "{why}");
        }
        // A run that failed may have performed fewer tasks than its share, never more.
        let mut e = honest();
        let r = e.report.as_mut().unwrap();
        r.error = Some("e".repeat(10_000));
        r.tasks_ok = 2;
        r.latency_hdr = None;
        check_ended(&mut e, SHARE).unwrap();
        assert!(e.report.unwrap().error.unwrap().chars().count() <= TEXT_MAX_CHARS + 1);
    }
}
