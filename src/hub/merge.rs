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

use crate::analysis::results::{HostPart, HubRun, PartFigures, PartStatus, RunResult, RunStatus};
use crate::measure::latency::{LatencyRecorder, LatencySummary, LatencyWire};
use crate::measure::open::{OpenStats, KEPT_UP};

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
