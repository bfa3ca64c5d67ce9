//! The `trace` format: the runs' task timelines as one Trace Event Format file
//! (`{"traceEvents": [...], "displayTimeUnit": "ms"}`), which Perfetto's UI
//! (ui.perfetto.dev) and `chrome://tracing` open. A process per run that kept a timeline
//! (a cell's first counted run; per host of a run over several hosts), a thread per lane
//! (`worker 3`, `thread 3`, `process 3`, `slot 3`), a complete event (`ph:"X"`) per task in
//! the timeline with its phases as complete events inside it (or beside it: a process's start
//! and exit, a job's wait in the queue and acknowledgement), and counters (`ph:"C"`) of the
//! timeline's tasks in flight and, where tasks had a scheduled time, of each one's wait from
//! it to its start. The process's labels say the sampling and the phases' bound. Times are µs
//! from the run's start (for hosts, the common start), each run on its own.
//!
//! A results file from before lanes were recorded (its runs have `timeline_us` but no
//! `timeline_tasks`) still makes a trace: its spans are named by their position and given
//! slots by interval colouring, as a model without workers would be.

use serde_json::{json, Value};

use super::timeline;
use super::{Exporter, FormatEntry, Report};
use crate::analysis::results::RunResult;
use crate::base::units::thousands;

/// The `trace` format.
pub(super) const FORMAT: FormatEntry = FormatEntry {
    name: "trace",
    help: "the task timelines as a Trace Event Format file for Perfetto or chrome://tracing (--trace FILE)",
    stdout: true,
    exporter: &TraceExporter,
};

struct TraceExporter;

impl Exporter for TraceExporter {
    fn render(&self, r: &Report) -> String {
        let mut events: Vec<Value> = Vec::new();
        let traced = r.runs.iter().filter(|run| run.timeline_us.is_some());
        // Process ids from 1: some viewers treat pid 0 as the idle process.
        let mut pid = 1;
        for run in traced {
            pid = run_events(run, pid, &mut events);
        }
        let doc = json!({ "traceEvents": events, "displayTimeUnit": "ms" });
        // Serializing plain data cannot fail; an empty document would say so if it did.
        let text = serde_json::to_string(&doc).unwrap_or_default();
        // The same values, with no raw C1 control or bidirectional override (a workload's
        // spec is in the names) for a terminal it may be written to (`--format trace`).
        crate::os::terminal::escape_json_controls(&text).into_owned() + "\n"
    }
}

/// What the trace says of a run's sampling and its phases' bound.
fn sampling(t: &timeline::RunTimeline, run: &RunResult) -> Vec<String> {
    let mut labels = Vec::new();
    let kept = t.spans.len();
    let cap = run.timeline_tasks.as_ref().and_then(|k| k.cap);
    if kept < t.tasks {
        labels.push(format!(
            "{} of {} tasks, sampled evenly",
            thousands(kept as u64),
            thousands(t.tasks as u64)
        ));
    } else {
        labels.push(format!("all {} tasks", thousands(t.tasks as u64)));
    }
    if let Some(cap) = cap {
        labels.push(format!("--trace-tasks {}", thousands(cap as u64)));
    }
    if let Some((per_task, dropped)) = t.phases_per_task {
        let mut s = format!("phases: at most {per_task} a task");
        if dropped > 0 {
            s.push_str(&format!(", {} more not kept", thousands(dropped)));
        }
        labels.push(s);
    }
    labels
}

/// One run's events from process id `pid` on (a process per host for a run over several
/// hosts): their process and thread names, a slice per task with its phases inside, the
/// counters. The next free process id.
fn run_events(run: &RunResult, pid: u64, out: &mut Vec<Value>) -> u64 {
    let Some(t) = timeline::read(run) else {
        return pid;
    };
    let mut name = format!(
        "{} run {} · {}",
        run.key.label(),
        run.rep + 1,
        run.key.workload
    );
    if run.key.gil {
        name.push_str(" · gil");
    }
    if let Some(kept) = &run.timeline_tasks {
        if kept.kept < kept.tasks {
            name.push_str(&format!(
                " · {} of {} tasks, sampled evenly",
                kept.kept, kept.tasks
            ));
        }
    }
    let labels = sampling(&t, run).join(" · ");
    // The hosts of a run over several: each its own process, named by its agent.
    let mut hosts: Vec<Option<u32>> = t.spans.iter().map(|s| s.host).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let open = run.open.is_some();
    let mut next = pid;
    for host in hosts {
        let pid = next;
        next += 1;
        let spans: Vec<&timeline::TaskSpan> = t.spans.iter().filter(|s| s.host == host).collect();
        let meta = |what: &str, tid: u64, args: Value| json!({ "ph": "M", "name": what, "ts": 0, "pid": pid, "tid": tid, "args": args });
        let pname = match host {
            Some(h) => format!("{name} · host {}", t.host_name(h)),
            None => name.clone(),
        };
        out.push(meta("process_name", 0, json!({ "name": pname })));
        out.push(meta("process_labels", 0, json!({ "labels": labels })));
        out.push(meta("process_sort_index", 0, json!({ "sort_index": pid })));
        let mut seen: Vec<u32> = spans.iter().map(|s| s.lane).collect();
        seen.sort_unstable();
        seen.dedup();
        for lane in seen {
            let tid = u64::from(lane);
            let label = format!("{} {lane}", t.lanes.word());
            out.push(meta("thread_name", tid, json!({ "name": label })));
            out.push(meta(
                "thread_sort_index",
                tid,
                json!({ "sort_index": lane }),
            ));
        }
        for (i, span) in spans.iter().enumerate() {
            task_events(span, i, pid, out);
        }
        let bounds: Vec<[u64; 2]> = spans.iter().map(|s| [s.start, s.end]).collect();
        out.extend(in_flight(&bounds, pid));
        out.extend(lag(&spans, pid, open));
    }
    next
}

/// A task's slice, named by its task (an older file's by position), and its phases as slices
/// nested in it; a process's start or a job's wait in the queue lies before the task, a
/// process's exit or a job's acknowledgement after it, on the same track.
fn task_events(span: &timeline::TaskSpan, i: usize, pid: u64, out: &mut Vec<Value>) {
    let tid = u64::from(span.lane);
    let (name, args) = match span.task {
        Some(task) => {
            let mut args = json!({
                "task": task,
                "outcome": span.error.as_deref().unwrap_or("ok"),
                "bytes": span.bytes,
            });
            if let Some(at) = span.sched {
                args["scheduled_us"] = json!(at);
            }
            (format!("task {task}"), args)
        }
        None => (format!("span {i}"), json!({ "span": i })),
    };
    out.push(json!({
        "ph": "X",
        "name": name,
        "cat": "task",
        "ts": span.start,
        "dur": span.end.saturating_sub(span.start),
        "pid": pid,
        "tid": tid,
        "args": args,
    }));
    for &(kind, a, z) in &span.phases {
        out.push(json!({
            "ph": "X",
            "name": kind.name(),
            "cat": "phase",
            "ts": a,
            "dur": z.saturating_sub(a),
            "pid": pid,
            "tid": tid,
            "args": { "task": span.task },
        }));
    }
}

/// The counter of each task's wait from its scheduled time to its start, µs, set at its
/// start: an open run's release lag, a closed queue run's wait in the queue. None for runs
/// without scheduled times.
fn lag(spans: &[&timeline::TaskSpan], pid: u64, open: bool) -> Vec<Value> {
    let mut at: Vec<(u64, u64)> = spans
        .iter()
        .filter_map(|s| Some((s.start, s.start.saturating_sub(s.sched?))))
        .collect();
    at.sort_unstable();
    let name = if open {
        "release lag, scheduled to start (µs)"
    } else {
        "queue wait, enqueued to start (µs)"
    };
    at.into_iter()
        .map(|(ts, v)| json!({ "ph": "C", "name": name, "ts": ts, "pid": pid, "tid": 0, "args": { "us": v } }))
        .collect()
}

/// The counter of tasks in flight: its value after each instant at which a task of the
/// timeline starts or ends (ends first, so back-to-back tasks do not count twice).
fn in_flight(timeline: &[[u64; 2]], pid: u64) -> Vec<Value> {
    let mut changes: Vec<(u64, i64)> = timeline
        .iter()
        .flat_map(|&[s, e]| [(s, 1), (e, -1)])
        .collect();
    changes.sort_unstable();
    let mut out = Vec::new();
    let mut now = 0i64;
    let mut i = 0;
    while i < changes.len() {
        let t = changes[i].0;
        while i < changes.len() && changes[i].0 == t {
            now += changes[i].1;
            i += 1;
        }
        out.push(json!({
            "ph": "C", "name": "tasks in flight", "ts": t, "pid": pid, "tid": 0,
            "args": { "tasks": now },
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_counts_ends_before_starts_at_one_instant() {
        let c = in_flight(&[[0, 10], [10, 20], [5, 15]], 1);
        let values: Vec<(u64, i64)> = c
            .iter()
            .map(|e| {
                (
                    e["ts"].as_u64().unwrap(),
                    e["args"]["tasks"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(values, vec![(0, 1), (5, 2), (10, 2), (15, 1), (20, 0)]);
    }

    fn span(start: u64, end: u64, task: usize, sched: u64) -> timeline::TaskSpan {
        timeline::TaskSpan {
            start,
            end,
            task: Some(task),
            lane: 1,
            bytes: Some(1),
            error: None,
            sched: Some(sched),
            host: None,
            phases: Vec::new(),
        }
    }

    /// A task's phases are slices on its track inside its slice, and an open run's lag
    /// counter is each task's start minus its scheduled time, in start order.
    #[test]
    fn phases_nest_in_their_task_and_the_lag_is_start_minus_scheduled() {
        use crate::measure::phases::PhaseKind;
        let mut a = span(20, 80, 2, 5);
        a.phases = vec![(PhaseKind::Connect, 20, 30), (PhaseKind::Read, 70, 80)];
        let b = span(10, 50, 1, 4);
        let mut out = Vec::new();
        task_events(&a, 0, 7, &mut out);
        let task = &out[0];
        assert_eq!(
            (task["cat"].as_str(), task["args"]["scheduled_us"].as_u64()),
            (Some("task"), Some(5))
        );
        assert_eq!(out.len(), 3);
        for p in &out[1..] {
            assert_eq!(
                (p["cat"].as_str(), p["pid"].as_u64(), p["tid"].as_u64()),
                (Some("phase"), Some(7), Some(1))
            );
            let ts = p["ts"].as_u64().unwrap();
            assert!(20 <= ts && ts + p["dur"].as_u64().unwrap() <= 80, "{p}");
        }
        assert_eq!(out[1]["name"], "connect");
        let lags: Vec<(u64, u64)> = lag(&[&a, &b], 7, true)
            .iter()
            .map(|e| {
                assert_eq!(e["name"], "release lag, scheduled to start (µs)");
                (e["ts"].as_u64().unwrap(), e["args"]["us"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(lags, vec![(10, 6), (20, 15)]);
        assert_eq!(
            lag(&[&a], 7, false)[0]["name"],
            "queue wait, enqueued to start (µs)"
        );
    }
}
