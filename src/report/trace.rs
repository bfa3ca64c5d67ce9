//! The `trace` format: the runs' task timelines as one Trace Event Format file
//! (`{"traceEvents": [...], "displayTimeUnit": "ms"}`), which Perfetto's UI
//! (ui.perfetto.dev) and `chrome://tracing` open. A process per run that kept a timeline
//! (a cell's first counted run), a thread per lane (`worker 3`, `thread 3`, `process 3`,
//! `slot 3`), a complete event (`ph:"X"`) per task in the timeline, and a counter (`ph:"C"`)
//! of the timeline's tasks in flight. Times are µs from the run's start, each run on its own.
//!
//! A results file from before lanes were recorded (its runs have `timeline_us` but no
//! `timeline_tasks`) still makes a trace: its spans are named by their position and given
//! slots by interval colouring, as a model without workers would be.

use serde_json::{json, Value};

use super::timeline;
use super::{Exporter, FormatEntry, Report};
use crate::analysis::results::RunResult;

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
        for (k, run) in traced.enumerate() {
            // Process ids from 1: some viewers treat pid 0 as the idle process.
            run_events(run, k as u64 + 1, &mut events);
        }
        let doc = json!({ "traceEvents": events, "displayTimeUnit": "ms" });
        // Serializing plain data cannot fail; an empty document would say so if it did.
        let text = serde_json::to_string(&doc).unwrap_or_default();
        // The same values, with no raw C1 control or bidirectional override (a workload's
        // spec is in the names) for a terminal it may be written to (`--format trace`).
        crate::os::terminal::escape_json_controls(&text).into_owned() + "\n"
    }
}

/// One run's events: its process and thread names, a slice per task, the in-flight counter.
fn run_events(run: &RunResult, pid: u64, out: &mut Vec<Value>) {
    let Some(t) = timeline::read(run) else {
        return;
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
    let meta = |what: &str, tid: u64, args: Value| json!({ "ph": "M", "name": what, "ts": 0, "pid": pid, "tid": tid, "args": args });
    out.push(meta("process_name", 0, json!({ "name": name })));
    out.push(meta("process_sort_index", 0, json!({ "sort_index": pid })));
    let mut seen: Vec<u32> = t.spans.iter().map(|s| s.lane).collect();
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
    for (i, span) in t.spans.iter().enumerate() {
        // A span whose task the run recorded is named by it; an older file's by position.
        let (name, args) = match span.task {
            Some(task) => (
                format!("task {task}"),
                json!({
                    "task": task,
                    "outcome": span.error.as_deref().unwrap_or("ok"),
                    "bytes": span.bytes,
                }),
            ),
            None => (format!("span {i}"), json!({ "span": i })),
        };
        out.push(json!({
            "ph": "X",
            "name": name,
            "cat": "task",
            "ts": span.start,
            "dur": span.end.saturating_sub(span.start),
            "pid": pid,
            "tid": u64::from(span.lane),
            "args": args,
        }));
    }
    let spans: Vec<[u64; 2]> = t.spans.iter().map(|s| [s.start, s.end]).collect();
    out.extend(in_flight(&spans, pid));
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
}
