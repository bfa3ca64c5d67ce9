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
use crate::measure::wakeups::Wakeups;

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
    for (name, pss) in [
        ("tree_pss_kib", e.tree_pss_kib),
        ("tree_pss_all_started_kib", e.tree_pss_all_started_kib),
        ("tree_pss_end_kib", e.tree_pss_end_kib),
    ] {
        if let Some(pss) = pss {
            count(name, pss, KIB_MAX)?;
        }
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
    // A timeline holds at most one span per task of the share, and its tasks' columns one
    // entry per span.
    let spans_max = (share.tasks.min(crate::measure::TRACE_TASKS_MAX)) as u64;
    if let Some(t) = &r.timeline_us {
        count("timeline_us's length", t.len() as u64, spans_max)?;
    }
    if let Some(t) = &r.timeline_tasks {
        check_timeline_tasks(t, spans_max)?;
    }
    if let Some(c) = &r.connections {
        count(
            "connections opened",
            c.connections_opened.unwrap_or(0),
            COUNT_MAX,
        )?;
        count(
            "connections reused",
            c.connections_reused.unwrap_or(0),
            COUNT_MAX,
        )?;
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

/// The tasks behind a share's timeline: columns of at most `spans_max` entries, kinds of at
/// most 200 bytes, phases within their bound per task and naming spans that exist.
fn check_timeline_tasks(
    t: &crate::measure::lanes::TimelineTasks,
    spans_max: u64,
) -> Result<(), String> {
    use crate::measure::lanes::PHASES_PER_TASK_MAX;
    let longest = [
        t.index.len(),
        t.worker.len(),
        t.bytes.len(),
        t.error.len(),
        t.sched_us.len(),
        t.host.len(),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    count("timeline_tasks's length", longest as u64, spans_max)?;
    if t.error.iter().flatten().any(|k| k.len() > 200) {
        return Err(
            "a kind in timeline_tasks longer than 200 bytes (allowed: kinds of at most 200 bytes)"
                .into(),
        );
    }
    if let Some(p) = &t.phases {
        count(
            "phases per task",
            p.per_task as u64,
            PHASES_PER_TASK_MAX as u64,
        )?;
        let most = spans_max.saturating_mul(p.per_task as u64);
        let longest = p.span.len().max(p.kind.len()).max(p.us.len());
        count("phases' length", longest as u64, most)?;
        if p.span.iter().any(|&s| s as u64 >= spans_max) {
            return Err(format!(
                "a phase of a span past the timeline (allowed: spans below {spans_max})"
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
    let mut timelines: Vec<(usize, usize, &RunResult)> = Vec::new();
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
        timelines.push((rows.len() - 1, p.share, r));
        add_wire(&mut latency, p.latency.as_ref());
        add_wire(&mut queue_wait, p.queue_wait.as_ref());
    }
    let (spans, tasks) = merge_timelines(&timelines, hosts, whole);
    (base.timeline_us, base.timeline_tasks) = (spans, tasks.map(Box::new));
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

/// The hosts' timelines as one, each span with its host (a position in the run's parts) and
/// its task's index in the whole cell, ordered by start: every host's spans are on the
/// common start's clock. A host whose answer has spans but not their tasks (an older agent)
/// makes the merged timeline spans alone, as before hosts were told apart.
fn merge_timelines(
    parts: &[(usize, usize, &RunResult)],
    hosts: usize,
    whole: usize,
) -> (
    Option<Vec<[u64; 2]>>,
    Option<crate::measure::lanes::TimelineTasks>,
) {
    use crate::measure::lanes::{Phases, TimelineTasks};
    let with_spans: Vec<_> = parts
        .iter()
        .filter(|(_, _, r)| r.timeline_us.is_some())
        .collect();
    if with_spans.is_empty() {
        return (None, None);
    }
    let all_tasks = with_spans.iter().all(|(_, _, r)| {
        r.timeline_tasks
            .as_ref()
            .is_some_and(|t| t.index.len() == r.timeline_us.as_ref().map_or(0, Vec::len))
    });
    if !all_tasks {
        let spans = with_spans
            .iter()
            .flat_map(|(_, _, r)| r.timeline_us.iter().flatten().copied())
            .collect();
        return (Some(spans), None);
    }
    // (start, end, host row, share, the span's position in its host's timeline, its run)
    let mut order: Vec<([u64; 2], usize, usize, usize, &RunResult)> = Vec::new();
    for (row, share, r) in &with_spans {
        for (j, span) in r.timeline_us.iter().flatten().enumerate() {
            order.push((*span, *row, *share, j, r));
        }
    }
    order.sort_by_key(|&(span, row, _, j, _)| (span, row, j));
    let first = with_spans[0].2.timeline_tasks.as_ref();
    let mut m = TimelineTasks {
        tasks: whole,
        kept: order.len(),
        cap: first.and_then(|t| t.cap),
        lanes: first.map(|t| t.lanes).unwrap_or_default(),
        ..Default::default()
    };
    let failed = order.iter().any(|&(_, _, _, j, r)| {
        r.timeline_tasks
            .as_ref()
            .is_some_and(|t| t.error.get(j).is_some_and(Option::is_some))
    });
    let scheduled = order.iter().all(|&(_, _, _, j, r)| {
        r.timeline_tasks
            .as_ref()
            .is_some_and(|t| t.sched_us.get(j).is_some())
    });
    let mut phases: Option<Phases> = None;
    let mut spans = Vec::with_capacity(order.len());
    for (at, &(span, row, share, j, r)) in order.iter().enumerate() {
        let Some(t) = r.timeline_tasks.as_ref() else {
            continue;
        };
        let segment = crate::measure::schedule::Segment {
            index: share,
            of: hosts,
            whole_tasks: whole,
        };
        spans.push(span);
        m.index.push(segment.global(t.index[j]));
        m.worker.push(t.worker.get(j).copied().unwrap_or(0));
        m.bytes.push(t.bytes.get(j).copied().unwrap_or(0));
        m.host.push(row as u32);
        if failed {
            m.error.push(t.error.get(j).cloned().flatten());
        }
        if scheduled {
            m.sched_us
                .push(t.sched_us.get(j).copied().unwrap_or(span[0]));
        }
        if let Some(p) = &t.phases {
            let mine = phases.get_or_insert_with(|| Phases {
                per_task: p.per_task,
                ..Default::default()
            });
            mine.per_task = mine.per_task.max(p.per_task);
            // Phases are grouped by span in span order: this span's are one run of them.
            let lo = p.span.partition_point(|&s| (s as usize) < j);
            let hi = p.span.partition_point(|&s| (s as usize) <= j);
            for k in lo..hi {
                if let (Some(&kind), Some(&us)) = (p.kind.get(k), p.us.get(k)) {
                    mine.span.push(at as u32);
                    mine.kind.push(kind);
                    mine.us.push(us);
                }
            }
        }
    }
    if let Some(p) = phases.as_mut() {
        p.dropped = with_spans
            .iter()
            .filter_map(|(_, _, r)| r.timeline_tasks.as_ref()?.phases.as_ref())
            .map(|p| p.dropped)
            .sum();
    }
    m.phases = phases;
    (Some(spans), Some(m))
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
    // A moment's sum means the whole cell's tree only when every host sampled it.
    let both = |a: Option<u64>, b: Option<u64>| if first { b } else { Some(a? + b?) };
    m.tree_pss_all_started_kib = both(m.tree_pss_all_started_kib, r.tree_pss_all_started_kib);
    m.tree_pss_end_kib = both(m.tree_pss_end_kib, r.tree_pss_end_kib);
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
    m.wakeups = Wakeups::worst(m.wakeups, r.wakeups);
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
    // Like the lag it explains: the worst host's.
    a.releaser_runnable_us = match (a.releaser_runnable_us, b.releaser_runnable_us) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    a.lock_holders_runnable_us = match (a.lock_holders_runnable_us, b.lock_holders_runnable_us) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
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

/// A run line as `convert::template` makes it for `fib:5` under `seq` ×8 over 2 hosts, with
/// `status` and `error`: what the merge starts from (this file's tests and the executor's).
#[cfg(test)]
pub(crate) fn two_host_template(status: RunStatus, error: Option<&str>) -> RunResult {
    let req = crate::plan::presets::CellRequest {
        study: "s".into(),
        workload: "fib:5".into(),
        model: "seq".into(),
        tasks: 8,
        gil: false,
        http2: false,
        http3: false,
        expected_failure: false,
    };
    let mut cell = crate::plan::cell(&req, &Default::default()).unwrap();
    cell.key.hosts = Some(2);
    crate::runner::convert::template(&cell, 0, status, 0.0, error.map(String::from))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::analysis::results::Connections;
    use crate::hub::clock::ClockOffset;
    use crate::hub::sign::{self, HubKey};
    use crate::hub::work::PartDone;
    use crate::measure::conn::HttpVersion;
    use crate::measure::rusage::ChildUsage;
    use crate::measure::series::SeriesPoint;
    use crate::measure::TRACE_TASKS_DEFAULT as TIMELINE_CAP;
    use crate::runner::child::ChildReport;

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
            tree_pss_all_started_kib: None,
            tree_pss_end_kib: None,
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

    /// The issue's answer: `user_s` 1.5e308, which two hosts summed to infinity (`null` in the
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
                        releaser_runnable_us: None,
                        lock_holders_runnable_us: None,
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

    /// Sets one counter of an answer.
    type Set = fn(&mut PartEnded, u64);

    /// The report's connection counts, made present.
    fn conn(e: &mut PartEnded) -> &mut Connections {
        let r = e.report.as_mut().unwrap();
        r.connections.get_or_insert_with(Default::default)
    }

    /// Each counter passes at its bound (memory 1 PiB, bytes 1 PiB, other counts 2^48, the
    /// timeline the share's tasks) and is refused one above it, the refusal naming both.
    #[test]
    fn counters_pass_at_their_bound_and_are_refused_one_above() {
        let counters: Vec<(&str, Set, u64)> = vec![
            (
                "max_rss_kib",
                |e, v| e.waited.as_mut().unwrap().max_rss_kib = v,
                1 << 40,
            ),
            (
                "ctx_voluntary",
                |e, v| e.waited.as_mut().unwrap().ctx_voluntary = v,
                1 << 48,
            ),
            (
                "ctx_involuntary",
                |e, v| e.waited.as_mut().unwrap().ctx_involuntary = v,
                1 << 48,
            ),
            ("tree_pss_kib", |e, v| e.tree_pss_kib = Some(v), 1 << 40),
            (
                "bytes",
                |e, v| e.report.as_mut().unwrap().bytes = v,
                1 << 50,
            ),
            (
                "threads_created",
                |e, v| e.report.as_mut().unwrap().threads_created = v as usize,
                1 << 48,
            ),
            (
                "processes_created",
                |e, v| e.report.as_mut().unwrap().processes_created = v as usize,
                1 << 48,
            ),
            (
                "gil_switches",
                |e, v| e.report.as_mut().unwrap().gil_switches = v,
                1 << 48,
            ),
            (
                "connections opened",
                |e, v| conn(e).connections_opened = Some(v),
                1 << 48,
            ),
            (
                "connections reused",
                |e, v| conn(e).connections_reused = Some(v),
                1 << 48,
            ),
            (
                "timeline_us's length",
                |e, v| e.report.as_mut().unwrap().timeline_us = Some(vec![[0, 1]; v as usize]),
                SHARE.tasks as u64,
            ),
        ];
        for (what, set, max) in counters {
            let mut e = honest();
            set(&mut e, max);
            assert_eq!(check_ended(&mut e, SHARE), Ok(()), "{what} at {max}");
            set(&mut e, max + 1);
            assert_eq!(
                check_ended(&mut e, SHARE),
                Err(format!("{what} {} (allowed: at most {max})", max + 1))
            );
        }
    }

    /// An answer's CPU time is bounded by twice its cores over the agent's wall plus a second
    /// (no cores said counts as one); the report's wall by the agent's plus a second.
    #[test]
    fn cpu_and_the_reports_wall_are_bounded_by_the_agents_wall() {
        let at = |cores: usize, user_s: f64, sys_s: f64, report_wall_s: f64| {
            let mut e = honest();
            e.wall_s = 1.5;
            let u = e.waited.as_mut().unwrap();
            u.user_s = user_s;
            u.sys_s = sys_s;
            e.report.as_mut().unwrap().wall_s = report_wall_s;
            check_ended(&mut e, ShareBounds { cores, ..SHARE })
        };
        // 1.5 s × 2 cores × 2 + 1 s = 7 s of each; the report's wall at most 2.5 s.
        assert_eq!(at(2, 7.0, 7.0, 2.5), Ok(()));
        let over = "user_s 7.25 (allowed: 0 to 7)";
        assert_eq!(at(2, 7.25, 0.0, 1.0), Err(over.into()));
        let over = "sys_s 7.25 (allowed: 0 to 7)";
        assert_eq!(at(2, 0.0, 7.25, 1.0), Err(over.into()));
        let over = "the report's wall_s 2.75 (allowed: 0 to 2.5)";
        assert_eq!(at(2, 0.0, 0.0, 2.75), Err(over.into()));
        // 1.5 s × 1 core × 2 + 1 s.
        assert_eq!(at(0, 4.0, 0.0, 1.0), Ok(()));
        let over = "user_s 4.25 (allowed: 0 to 4)";
        assert_eq!(at(0, 4.25, 0.0, 1.0), Err(over.into()));
    }

    /// A refusal writes its figures short: in exponent form only outside 1e-6 to 1e9.
    #[test]
    fn refusals_write_their_figures_short() {
        for (v, shown) in [
            (1.5e308, "1.5e308"),
            (7.0, "7"),
            (0.25, "0.25"),
            (0.0, "0"),
            (-1.0, "-1"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (999_999_999.5, "999999999.5"),
            (1e9, "1e9"),
            (-2.5e9, "-2.5e9"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(num(v), shown);
        }
        let mut e = honest();
        e.wall_s = 1.5;
        e.waited.as_mut().unwrap().user_s = 1.5e308;
        let why = "user_s 1.5e308 (allowed: 0 to 7)";
        assert_eq!(check_ended(&mut e, SHARE), Err(why.into()));
    }

    /// Failures by kind add up to `tasks_failed`, each kind named in at most 200 bytes.
    #[test]
    fn failures_add_up_under_kinds_of_at_most_200_bytes() {
        let with = |kind: String, n: usize| {
            let mut e = honest();
            let r = e.report.as_mut().unwrap();
            r.tasks_ok = 3;
            r.tasks_failed = 1;
            r.failures.insert(kind, n);
            check_ended(&mut e, SHARE)
        };
        assert_eq!(with("k".repeat(200), 1), Ok(()));
        let why = "failures by kind add up to 1 for tasks_failed 1 (allowed: the same number, kinds of at most 200 bytes)";
        assert_eq!(with("k".repeat(201), 1), Err(why.into()));
        let why = "failures by kind add up to 2 for tasks_failed 1 (allowed: the same number, kinds of at most 200 bytes)";
        assert_eq!(with("timeout".into(), 2), Err(why.into()));
    }

    /// A share's first task starts within the study's wait of the common start, either side.
    #[test]
    fn a_first_task_within_the_wait_of_the_common_start_passes() {
        let at = |ns: i64| {
            let mut e = honest();
            e.report.as_mut().unwrap().first_task_ns = Some(ns);
            check_ended(&mut e, SHARE)
        };
        for ns in [0, 12_000_000_000, -12_000_000_000] {
            assert_eq!(at(ns), Ok(()), "{ns}");
        }
        for ns in [12_000_000_001, -12_000_000_001] {
            let why =
                format!("first_task_ns {ns} (allowed: within ±12000000000 of the common start)");
            assert_eq!(at(ns), Err(why));
        }
    }

    /// An open run's measures with no series.
    fn open(rate_asked: f64, rate_achieved: Option<f64>) -> OpenStats {
        OpenStats {
            rate_asked,
            rate_ramp: None,
            rate_achieved,
            behind: false,
            service_us: None,
            queue_us: None,
            lag_us: None,
            grain_us: None,
            releaser_runnable_us: None,
            lock_holders_runnable_us: None,
            series: vec![],
        }
    }

    /// One interval of an open run.
    fn point(t_s: f64, [done, errors, in_flight]: [u64; 3], rate_asked: f64) -> SeriesPoint {
        SeriesPoint {
            t_s,
            done,
            errors,
            in_flight,
            p50_us: None,
            p99_us: None,
            rate_asked,
        }
    }

    /// An open run's rates stay within what a clock can release (a task a nanosecond) and its
    /// series' counts within the share.
    #[test]
    fn an_open_runs_rates_and_series_are_bounded_by_the_clock_and_the_share() {
        let at = |forge: &dyn Fn(&mut OpenStats)| {
            let mut o = open(100.0, Some(99.5));
            o.rate_ramp = Some([50.0, 150.0]);
            o.series = vec![point(1.0, [3, 1, 0], 100.0), point(2.0, [0, 0, 4], 1e9)];
            forge(&mut o);
            let mut e = honest();
            e.report.as_mut().unwrap().open = Some(o);
            check_ended(&mut e, SHARE)
        };
        assert_eq!(at(&|_| {}), Ok(()));
        assert_eq!(at(&|o| o.rate_asked = 1e9), Ok(()));
        type Edit<'a> = &'a dyn Fn(&mut OpenStats);
        let refused: [(Edit, &str); 8] = [
            (
                &|o| o.rate_asked = 1.5e9,
                "rate_asked 1.5e9 (allowed: 0 to 1e9)",
            ),
            (
                &|o| o.rate_ramp = Some([0.0, -1.0]),
                "rate_ramp -1 (allowed: 0 to 1e9)",
            ),
            (
                &|o| o.rate_achieved = Some(f64::NAN),
                "rate_achieved NaN (allowed: 0 to 1e9)",
            ),
            (
                &|o| o.series[1].t_s = f64::NAN,
                "a series point at t_s NaN (allowed: finite)",
            ),
            (
                &|o| o.series[0].rate_asked = -1.0,
                "a series point's rate_asked -1 (allowed: 0 to 1e9)",
            ),
            (
                &|o| o.series[0].done = 5,
                "a series point's done 5 (allowed: at most 4)",
            ),
            (
                &|o| o.series[0].errors = 5,
                "a series point's errors 5 (allowed: at most 4)",
            ),
            (
                &|o| o.series[1].in_flight = 5,
                "a series point's in_flight 5 (allowed: at most 4)",
            ),
        ];
        for (forge, why) in refused {
            assert_eq!(at(forge), Err(why.into()));
        }
    }

    /// The largest answer an honest agent sends (its 20 stderr lines of 1000 four-byte
    /// characters, a full timeline and its tasks, two histograms spread over the whole range, an hour's
    /// series of an open run), sealed with a hub key, is read whole.
    #[test]
    fn the_largest_honest_answer_fits_in_answer_max_bytes() {
        let mut wide = LatencyRecorder::new();
        let mut us = 1;
        while us < 3_600_000_000 {
            wide.record_us(us);
            us += us / 1000 + 1;
        }
        let tasks = wide.exact().unwrap().count;
        let mut o = open(1e6, Some(1e6));
        o.series = vec![point(f64::MAX, [tasks; 3], 1e9); 3600];
        let mut e = honest();
        e.stderr_tail = vec!["😀".repeat(TEXT_MAX_CHARS); STDERR_TAIL_LINES];
        let r = e.report.as_mut().unwrap();
        r.tasks_ok = tasks as usize;
        r.timeline_us = Some(vec![[u64::MAX; 2]; TIMELINE_CAP]);
        r.timeline_tasks = Some(crate::measure::lanes::TimelineTasks {
            tasks: usize::MAX,
            kept: TIMELINE_CAP,
            cap: Some(TIMELINE_CAP),
            lanes: crate::measure::lanes::Lanes::Worker,
            index: vec![usize::MAX; TIMELINE_CAP],
            worker: vec![u32::MAX; TIMELINE_CAP],
            bytes: vec![u64::MAX; TIMELINE_CAP],
            error: vec![Some("😀".repeat(50)); TIMELINE_CAP],
            sched_us: vec![u64::MAX; TIMELINE_CAP],
            // An HTTP task's five phases and the lock's first sixteen hand-offs, each task
            // a run's length (an hour, in µs) from the start.
            phases: Some(crate::measure::lanes::Phases {
                per_task: 21,
                dropped: u64::MAX,
                span: (0..TIMELINE_CAP as u32)
                    .flat_map(|s| std::iter::repeat_n(s, 21))
                    .collect(),
                kind: vec![crate::measure::phases::PhaseKind::ProcessStart; 21 * TIMELINE_CAP],
                us: vec![[3_600_000_000; 2]; 21 * TIMELINE_CAP],
            }),
            host: Vec::new(),
        });
        r.latency_hdr = wide.to_wire();
        r.queue_wait_hdr = wide.to_wire();
        r.open = Some(o);
        let share = ShareBounds {
            tasks: tasks as usize,
            ..SHARE
        };
        assert_eq!(check_ended(&mut e, share), Ok(()));
        let done = PartDone {
            run: "r".repeat(64),
            part: 0,
            agent: "a".repeat(64),
            refused: None,
            ended: Some(e),
            clock: ClockOffset::default(),
            resent: false,
        };
        let key = HubKey::new(&"k".repeat(64)).unwrap();
        let body = serde_json::to_string(&done).unwrap();
        let sealed = sign::seal(Some(&key), "study", &done.run, u64::MAX, body);
        assert!(sealed.len() <= ANSWER_MAX_BYTES, "{} bytes", sealed.len());
    }

    /// The cell's run line before any host's figures.
    fn template() -> RunResult {
        two_host_template(RunStatus::Ok, None)
    }

    /// Share `share` of `tasks` tasks, answered with `run`.
    fn part(share: usize, tasks: usize, run: RunResult) -> PartOutcome {
        PartOutcome {
            host: format!("a{share}"),
            share,
            tasks,
            run: Some(run),
            lost: None,
            latency: None,
            queue_wait: None,
            clock: ClockOffset::default(),
            first_task_ns: None,
        }
    }

    /// Two hosts' timelines become one ordered by start, each span with its host and the
    /// whole cell's task (share s of 2: task i is the cell's s + 2i), its phases following it.
    #[test]
    fn hosts_timelines_merge_with_their_host_and_the_cells_task_indexes() {
        use crate::measure::lanes::{Lanes, Phases, TimelineTasks};
        use crate::measure::phases::PhaseKind;
        let host = |spans: Vec<[u64; 2]>, phase_span: u32| {
            let mut r = template();
            r.tasks_ok = 4;
            r.timeline_tasks = Some(Box::new(TimelineTasks {
                tasks: 4,
                kept: spans.len(),
                cap: Some(10),
                lanes: Lanes::Worker,
                index: (0..spans.len()).collect(),
                worker: vec![0; spans.len()],
                bytes: vec![1; spans.len()],
                phases: Some(Phases {
                    per_task: 16,
                    dropped: 1,
                    span: vec![phase_span],
                    kind: vec![PhaseKind::LockHeld],
                    us: vec![spans[phase_span as usize]],
                }),
                ..Default::default()
            }));
            r.timeline_us = Some(spans);
            r
        };
        let m = merge(
            template(),
            vec![
                part(0, 4, host(vec![[0, 10], [20, 30]], 1)),
                part(1, 4, host(vec![[5, 15]], 0)),
            ],
            0.0,
        );
        assert_eq!(m.timeline_us, Some(vec![[0, 10], [5, 15], [20, 30]]));
        let t = m.timeline_tasks.unwrap();
        assert_eq!((t.tasks, t.kept), (8, 3));
        assert_eq!(t.host, vec![0, 1, 0]);
        assert_eq!(t.index, vec![0, 1, 2]);
        let p = t.phases.unwrap();
        assert_eq!(
            (p.span, p.us, p.dropped),
            (vec![1, 2], vec![[5, 15], [20, 30]], 2)
        );
    }

    /// Share `share` of `tasks` tasks, lost.
    fn lost(share: usize, tasks: usize) -> PartOutcome {
        PartOutcome {
            run: None,
            lost: Some((PartStatus::Lost, "stopped beating".into())),
            ..part(share, tasks, template())
        }
    }

    /// A recorder of `us`.
    fn recorder(us: &[u64]) -> LatencyRecorder {
        let mut r = LatencyRecorder::new();
        for &u in us {
            r.record_us(u);
        }
        r
    }

    /// Percentiles with a median and a tail.
    fn summary(p50: u64, p99: u64) -> LatencySummary {
        LatencySummary {
            p50,
            p90: p99,
            p99,
            p999: p99,
            max: p99,
        }
    }

    /// Two hosts' run lines as one: counts, CPU and memory summed, wall, RSS, start-up and
    /// streams the largest, connect and TLS the worse host's by p99, the latency that of one
    /// histogram of every task, the timeline both hosts' tasks; a host that failed some tasks
    /// still counts (the row fails, naming it); each host's start after the common one.
    #[test]
    fn two_hosts_merge_into_sums_maxima_the_worst_tail_and_one_histogram() {
        let mut r0 = template();
        r0.wall_s = 3.0;
        r0.user_s = 1.0;
        r0.sys_s = 0.25;
        r0.max_rss_kib = 300;
        r0.tree_pss_kib = Some(1000);
        (r0.ctx_voluntary, r0.ctx_involuntary) = (10, 3);
        (r0.threads_created, r0.processes_created) = (2, 1);
        r0.tasks_ok = 4;
        r0.bytes = 500;
        r0.gil_switches = 7;
        r0.startup_s = Some(0.5);
        r0.conn = Connections {
            connections_opened: Some(2),
            connections_reused: Some(5),
            connect_us: Some(summary(40, 100)),
            tls_us: Some(summary(100, 300)),
            http_version: Some(HttpVersion::Http2),
            peak_streams_per_connection: Some(6),
            server_max_concurrent_streams: Some(100),
        };
        r0.timeline_us = Some(vec![[0, 10], [5, 20]]);
        let mut r1 = template();
        r1.status = RunStatus::Failed;
        r1.error = Some("1 task failed".into());
        r1.wall_s = 2.0;
        r1.user_s = 2.0;
        r1.sys_s = 0.5;
        r1.max_rss_kib = 200;
        r1.tree_pss_kib = Some(2000);
        (r1.ctx_voluntary, r1.ctx_involuntary) = (20, 4);
        (r1.threads_created, r1.processes_created) = (3, 2);
        (r1.tasks_ok, r1.tasks_failed) = (3, 1);
        r1.failures.insert("timeout".into(), 1);
        r1.bytes = 700;
        r1.gil_switches = 8;
        r1.startup_s = Some(0.75);
        r1.conn = Connections {
            connections_opened: Some(3),
            connections_reused: Some(6),
            connect_us: Some(summary(90, 90)),
            tls_us: Some(summary(200, 400)),
            http_version: Some(HttpVersion::Http2),
            peak_streams_per_connection: Some(4),
            server_max_concurrent_streams: Some(100),
        };
        r1.timeline_us = Some(vec![[1, 30]]);
        let (l0, l1) = (
            recorder(&[100, 200, 300, 400]),
            recorder(&[1000, 2000, 4000]),
        );
        let q1 = recorder(&[7, 9]);
        let p0 = PartOutcome {
            latency: l0.to_wire(),
            first_task_ns: Some(2_500_000),
            ..part(0, 4, r0)
        };
        let p1 = PartOutcome {
            latency: l1.to_wire(),
            queue_wait: q1.to_wire(),
            first_task_ns: Some(-500_000),
            clock: ClockOffset {
                offset_ns: -7,
                uncertainty_ns: 3,
                mono_offset_ns: 0,
            },
            ..part(1, 4, r1)
        };
        let m = merge(template(), vec![p0, p1], 0.2);
        assert_eq!(m.status, RunStatus::Failed);
        assert_eq!(m.error.as_deref(), Some("host 'a1': 1 task failed"));
        assert_eq!((m.wall_s, m.user_s, m.sys_s), (3.0, 3.0, 0.75));
        assert_eq!((m.max_rss_kib, m.tree_pss_kib), (300, Some(3000)));
        assert_eq!((m.ctx_voluntary, m.ctx_involuntary), (30, 7));
        assert_eq!((m.threads_created, m.processes_created), (5, 3));
        assert_eq!((m.tasks_ok, m.tasks_failed), (7, 1));
        assert_eq!(m.failures, BTreeMap::from([("timeout".into(), 1)]));
        assert_eq!(
            (m.bytes, m.gil_switches, m.startup_s),
            (1200, 15, Some(0.75))
        );
        let conn = Connections {
            connections_opened: Some(5),
            connections_reused: Some(11),
            connect_us: Some(summary(40, 100)),
            tls_us: Some(summary(200, 400)),
            http_version: Some(HttpVersion::Http2),
            peak_streams_per_connection: Some(6),
            server_max_concurrent_streams: Some(100),
        };
        assert_eq!(m.conn, conn);
        assert_eq!(m.timeline_us, Some(vec![[0, 10], [5, 20], [1, 30]]));
        let all = recorder(&[100, 200, 300, 400, 1000, 2000, 4000]);
        assert_eq!(m.latency_us, all.summary());
        assert_eq!(m.queue_wait_us, q1.summary());
        let hub = m.hub.unwrap();
        assert_eq!(hub.latency_hdr, all.to_wire());
        assert_eq!((hub.hosts, hub.covered, hub.lost_tasks), (2, 1.0, 0));
        assert_eq!(hub.start_spread_ms, Some(3.0));
        // The lead to the common start, then the last host's first task 2.5 ms after it.
        assert!(
            (hub.coordination_s.unwrap() - 0.2025).abs() < 1e-12,
            "{hub:?}"
        );
        let [h0, h1] = &hub.parts[..] else {
            panic!("{:?}", hub.parts)
        };
        assert_eq!((h0.status, h0.error.as_deref()), (PartStatus::Ok, None));
        assert_eq!(
            (h1.status, h1.error.as_deref()),
            (PartStatus::Failed, Some("1 task failed"))
        );
        assert_eq!(
            (h0.first_task_ms, h1.first_task_ms),
            (Some(2.5), Some(-0.5))
        );
        assert_eq!((h1.clock_offset_ns, h1.clock_uncertainty_ns), (-7, 3));
        assert_eq!(
            (&h0.latency_hdr, &h1.latency_hdr),
            (&l0.to_wire(), &l1.to_wire())
        );
        let f1 = h1.run.as_ref().unwrap();
        assert_eq!(
            (f1.status, f1.wall_s, f1.tasks_failed),
            (RunStatus::Failed, 2.0, 1)
        );
    }

    /// The tasks of a share that did not run (lost, or its run timed out or crashed) count as
    /// failed, of kind "lost"; the row says which hosts and how much of the work it covers; a
    /// row no host measured takes the first unmeasured status, or crashed when all were lost.
    #[test]
    fn shares_not_performed_count_as_lost_tasks_and_the_row_says_what_it_covers() {
        let mut ok = template();
        ok.wall_s = 1.0;
        ok.tasks_ok = 4;
        let timed_out = || {
            let mut r = template();
            r.status = RunStatus::Timeout;
            r.error = Some("timed out".into());
            r.wall_s = 30.0;
            r.tasks_ok = 2;
            r
        };
        let m = merge(
            template(),
            vec![part(0, 4, ok), lost(1, 4), part(2, 4, timed_out())],
            0.0,
        );
        assert_eq!(m.status, RunStatus::Failed);
        assert_eq!((m.wall_s, m.tasks_ok, m.tasks_failed), (1.0, 4, 8));
        assert_eq!(m.failures, BTreeMap::from([("lost".into(), 8)]));
        let why = "host 'a1' stopped beating; host 'a2': timed out; 8 of 12 tasks not performed: the row covers 33.3% of the work";
        assert_eq!(m.error.as_deref(), Some(why));
        let hub = m.hub.unwrap();
        assert_eq!((hub.hosts, hub.covered, hub.lost_tasks), (3, 4.0 / 12.0, 8));
        let statuses: Vec<_> = hub.parts.iter().map(|p| p.status).collect();
        let want = [PartStatus::Ok, PartStatus::Lost, PartStatus::Failed];
        assert_eq!(statuses, want);
        let figures = hub.parts[2].run.as_ref().unwrap();
        assert_eq!((figures.status, figures.tasks_ok), (RunStatus::Timeout, 2));
        assert_eq!(hub.parts[1].error.as_deref(), Some("stopped beating"));
        assert_eq!((hub.start_spread_ms, hub.coordination_s), (None, None));

        let mut crashed = template();
        crashed.status = RunStatus::Crashed;
        let m = merge(
            template(),
            vec![lost(0, 4), part(1, 4, timed_out()), part(2, 4, crashed)],
            0.0,
        );
        assert_eq!(m.status, RunStatus::Timeout);
        assert_eq!((m.tasks_ok, m.tasks_failed, m.wall_s), (0, 12, 0.0));
        assert_eq!(m.hub.unwrap().covered, 0.0);
        let m = merge(template(), vec![lost(0, 4), lost(1, 4)], 0.0);
        assert_eq!(m.status, RunStatus::Crashed);
    }

    /// Open runs' rates and each interval's counts are summed, their service, queue and lag
    /// the worse host's by p99; the cell is behind when a host was, or when the hosts together
    /// achieved less than `KEPT_UP` of the rate asked of them all (a host that completed too
    /// few tasks for a rate of its own adds none).
    #[test]
    fn open_runs_add_their_rates_and_series_and_fall_behind_together() {
        let mut o0 = open(100.0, Some(99.5));
        o0.rate_ramp = Some([50.0, 150.0]);
        o0.service_us = Some(summary(5, 10));
        o0.queue_us = Some(summary(30, 50));
        o0.lag_us = Some(summary(1, 2));
        o0.grain_us = Some(1000);
        o0.series = vec![point(1.0, [40, 1, 2], 100.0), point(2.0, [50, 0, 3], 100.0)];
        (o0.series[0].p50_us, o0.series[0].p99_us) = (Some(10), Some(20));
        let mut o1 = open(60.0, Some(59.5));
        o1.rate_ramp = Some([20.0, 100.0]);
        o1.service_us = Some(summary(8, 20));
        o1.queue_us = Some(summary(9, 30));
        o1.lag_us = Some(summary(3, 4));
        o1.series = vec![
            point(1.0, [30, 2, 5], 60.0),
            point(2.0, [31, 1, 1], 60.0),
            point(3.0, [29, 0, 0], 60.0),
        ];
        (o1.series[0].p50_us, o1.series[0].p99_us) = (Some(15), Some(18));
        let merged = |o0: &OpenStats, o1: &OpenStats| {
            let on = |o: &OpenStats| RunResult {
                open: Some(o.clone()),
                ..template()
            };
            let parts = vec![part(0, 100, on(o0)), part(1, 60, on(o1))];
            merge(template(), parts, 0.0).open.unwrap()
        };
        let o = merged(&o0, &o1);
        assert_eq!((o.rate_asked, o.rate_ramp), (160.0, Some([70.0, 250.0])));
        assert_eq!((o.rate_achieved, o.behind), (Some(159.0), false));
        assert_eq!((o.service_us, o.queue_us), (o1.service_us, o0.queue_us));
        assert_eq!((o.lag_us, o.grain_us), (o1.lag_us, Some(1000)));
        let mut series = vec![
            point(1.0, [70, 3, 7], 160.0),
            point(2.0, [81, 1, 4], 160.0),
            point(3.0, [29, 0, 0], 60.0),
        ];
        (series[0].p50_us, series[0].p99_us) = (Some(15), Some(20));
        assert_eq!(o.series, series);

        let (mut slow, mut fast) = (o0.clone(), o1.clone());
        (slow.rate_achieved, slow.behind) = (Some(97.0), true);
        fast.rate_achieved = Some(62.0);
        let o = merged(&slow, &fast);
        assert_eq!((o.rate_achieved, o.behind), (Some(159.0), true));
        let mut none = o1.clone();
        none.rate_achieved = None;
        let o = merged(&o0, &none);
        assert_eq!((o.rate_achieved, o.behind), (Some(99.5), true));
        // Exactly `KEPT_UP` of the rate asked kept up.
        let at = RunResult {
            open: Some(open(100.0, Some(KEPT_UP * 100.0))),
            ..template()
        };
        let m = merge(template(), vec![part(0, 100, at)], 0.0);
        assert!(!m.open.unwrap().behind);
    }

    /// Figures each within its bound may sum to an infinity, which a results file cannot hold
    /// (it writes `null`): the row fails saying so, with its times zeroed and no open measures.
    #[test]
    fn sums_that_overflow_to_infinity_are_not_written() {
        let big = |share| {
            let mut r = template();
            r.wall_s = 1.0;
            r.user_s = 1.5e308;
            r.sys_s = 0.5;
            r.tasks_ok = 4;
            r.open = Some(open(100.0, Some(100.0)));
            part(share, 4, r)
        };
        let m = merge(template(), vec![big(0), big(1)], 0.0);
        assert_eq!(m.status, RunStatus::Failed);
        let why = "the hosts' user_s adds up to inf: not written";
        assert_eq!(m.error.as_deref(), Some(why));
        assert_eq!(
            (m.wall_s, m.user_s, m.sys_s, &m.open),
            (0.0, 0.0, 0.0, &None)
        );
        let m = merge(template(), vec![big(0), big(1), lost(2, 4)], 0.0);
        let why = "host 'a2' stopped beating; 4 of 12 tasks not performed: the row covers 66.7% of the work; the hosts' user_s adds up to inf: not written";
        assert_eq!(m.error.as_deref(), Some(why));
    }
}
