//! `--trace FILE`: every model that runs without outside services writes a Trace Event
//! Format file whose slices are exactly the run's tasks, on lanes that match the model's
//! rule (docs/output.md, "The schedule as a trace"). Asserts on what is recorded, never on
//! timing.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{concur, read_lines, results_path, run_study_to, without_timeline_tasks};
use serde_json::Value;

/// Each model, the word its lanes are named with, and the most lanes it may use.
const MODELS: &[(&str, &str, usize)] = &[
    ("seq", "worker", 1),
    ("thread", "thread", 12),
    ("fork", "process", 12),
    ("spawn", "process", 12),
    ("pool:3", "worker", 3),
    ("rayon:2", "worker", 2),
    ("async:4", "slot", 4),
    ("async-local:4", "slot", 4),
    ("green:4", "slot", 4),
    ("actor:3", "worker", 3),
    ("jobs-memory:3", "worker", 3),
    ("jobs:2", "worker", 2),
    ("jobs-procs:2", "worker", 2),
];

/// The trace's events grouped by process, keyed by the process's name.
fn processes(trace: &Value) -> BTreeMap<String, Vec<Value>> {
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    for e in events {
        for key in ["ph", "ts", "pid", "tid"] {
            assert!(e.get(key).is_some(), "an event without {key}: {e}");
        }
        if e["ph"] == "M" && e["name"] == "process_name" {
            let name = e["args"]["name"].as_str().unwrap().to_string();
            names.insert(e["pid"].as_u64().unwrap(), name);
        }
    }
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in events {
        let name = names[&e["pid"].as_u64().unwrap()].clone();
        out.entry(name).or_default().push(e.clone());
    }
    out
}

#[test]
fn every_model_traces_each_task_once_on_its_own_lanes() {
    let (dir, json) = results_path();
    let trace = dir.path().join("trace.json");
    let mut args = vec!["-w", "sleep:5ms", "-n", "12", "-r", "1", "--trace"];
    let trace_arg = trace.to_str().unwrap().to_string();
    args.push(&trace_arg);
    for (m, _, _) in MODELS {
        args.extend(["-m", m]);
    }
    run_study_to(&json, &args);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(doc["displayTimeUnit"], "ms");
    let procs = processes(&doc);
    let runs: Vec<Value> = read_lines(&json)
        .into_iter()
        .filter(|l| l["type"] == "run")
        .collect();
    assert_eq!(procs.len(), MODELS.len(), "{:?}", procs.keys());
    for (model, word, most) in MODELS {
        let run = runs
            .iter()
            .find(|r| r["model"] == *model)
            .unwrap_or_else(|| panic!("no run line of {model}"));
        let tasks = run["tasks_ok"].as_u64().unwrap() + run["tasks_failed"].as_u64().unwrap();
        assert_eq!(tasks, 12, "{model}: {run}");
        assert_eq!(run["timeline_tasks"]["tasks"], 12, "{model}");
        assert_eq!(run["timeline_tasks"]["kept"], 12, "{model}");
        assert_eq!(run["timeline_tasks"]["cap"], 10_000, "{model}: the default");
        assert_eq!(run["timeline_tasks"]["lanes"], *word, "{model}");
        let name = format!("{model} ×12 run 1 · sleep:5ms");
        let events = procs
            .get(&name)
            .unwrap_or_else(|| panic!("no process {name:?} in {:?}", procs.keys()));
        let slices: Vec<&Value> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "task")
            .collect();
        assert_eq!(slices.len() as u64, tasks, "{model}: one slice per task");
        // Each task index exactly once.
        let indices: BTreeSet<u64> = slices
            .iter()
            .map(|e| e["args"]["task"].as_u64().unwrap())
            .collect();
        assert_eq!(indices, (0..12).collect(), "{model}");
        // Lanes: named with the model's word, no more than it may use, and one task at a
        // time on each (µs floors keep the order of the ns ends and starts).
        let mut lanes: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for e in &slices {
            let (ts, dur) = (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap());
            lanes
                .entry(e["tid"].as_u64().unwrap())
                .or_default()
                .push((ts, ts + dur));
        }
        assert!(lanes.len() <= *most, "{model}: {} lanes", lanes.len());
        if matches!(*model, "thread" | "fork" | "spawn") {
            assert_eq!(lanes.len(), 12, "{model}: a lane per task");
        }
        if *model == "seq" {
            assert_eq!(lanes.len(), 1, "{model}");
        }
        for (tid, spans) in &mut lanes {
            spans.sort_unstable();
            for w in spans.windows(2) {
                assert!(w[0].1 <= w[1].0, "{model}: lane {tid} overlaps: {spans:?}");
            }
        }
        let named: BTreeSet<u64> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| {
                let tid = e["tid"].as_u64().unwrap();
                assert_eq!(e["args"]["name"], format!("{word} {tid}"), "{model}");
                tid
            })
            .collect();
        assert_eq!(named, lanes.keys().copied().collect(), "{model}");
        // The in-flight counter ends at zero and never exceeds the lanes.
        let counts: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == "tasks in flight")
            .map(|e| e["args"]["tasks"].as_u64().unwrap())
            .collect();
        assert_eq!(counts.last(), Some(&0), "{model}");
        assert!(counts.iter().all(|&c| c as usize <= *most), "{model}");
        // A queue model's closed run says each job's wait in the queue, at its start (the
        // worker processes of jobs-procs do not send their jobs' enqueue times back).
        let waits = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == "queue wait, enqueued to start (µs)")
            .count();
        let queue = model.starts_with("jobs") && *model != "jobs-procs:2";
        assert_eq!(waits, if queue { 12 } else { 0 }, "{model}");
        // Phases: a process's start before each task of fork and spawn, ending where the
        // task starts, and its exit after it, from where the task ends; a job's wait in the
        // queue before each task of a queue on threads, from the run's one enqueue, and its
        // acknowledgement after it; no other model (jobs-procs's workers are processes of
        // their own) sees any of sleep's.
        let phases = assert_nested_and_in_order(events, model);
        let extents = lanes_of_tasks_with_their_phases(events, &phases, model);
        let kinds: BTreeSet<Vec<&str>> = phases
            .values()
            .map(|ps| ps.iter().map(|(k, _, _)| k.as_str()).collect())
            .collect();
        if matches!(*model, "fork" | "spawn") {
            assert_eq!(
                phases.len(),
                12,
                "{model}: a process start and exit per task"
            );
            assert_eq!(
                kinds,
                [vec!["process-start", "process-exit"]].into(),
                "{model}"
            );
            for (task, ps) in &phases {
                let slice = slice_of(events, *task);
                assert_eq!(ps[0].2, slice.0, "{model}: task {task}: {ps:?} {slice:?}");
                assert_eq!(ps[1].1, slice.1, "{model}: task {task}: {ps:?} {slice:?}");
            }
        } else if queue {
            assert_eq!(phases.len(), 12, "{model}: a wait and an ack per job");
            assert_eq!(kinds, [vec!["queued", "ack"]].into(), "{model}");
            // Each lane's first job waited from the run's one enqueue; a later job's wait is
            // drawn from where its lane's previous job ended (its whole wait is the queue-wait
            // counter above).
            let enqueued: BTreeSet<u64> = extents
                .values()
                .map(|spans| phases[&spans[0].2][0].1)
                .collect();
            assert_eq!(enqueued.len(), 1, "{model}: one enqueue: {phases:?}");
        } else {
            assert!(phases.is_empty(), "{model}: {phases:?}");
        }
    }

    // The report re-writes the same trace from the results file, through --export and
    // --format alike.
    let again = dir.path().join("again.json");
    let out = concur()
        .args(["report", json.to_str().unwrap(), "-q", "--export"])
        .arg(format!("trace={}", again.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(std::fs::read_to_string(&again).unwrap(), first);
    let out = concur()
        .args(["report", json.to_str().unwrap(), "-q", "--format", "trace"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), first);

    // A results file from before lanes were recorded still makes a trace: its spans by
    // position, coloured into slots that never overlap.
    let old = dir.path().join("old.jsonl");
    without_timeline_tasks(&json, &old);
    let out = concur()
        .args(["report", old.to_str().unwrap(), "-q", "--format", "trace"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let procs = processes(&doc);
    let pool = &procs["pool:3 ×12 run 1 · sleep:5ms"];
    let slices: Vec<&Value> = pool.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(slices.len(), 12);
    assert!(slices
        .iter()
        .all(|e| e["name"].as_str().unwrap().starts_with("span ")));
    let tids: BTreeSet<u64> = slices.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    assert!(tids.len() <= 3, "{tids:?}");
}

/// Each task's phases (`cat: "phase"`, on the task's own track): kind, start, end in µs.
fn phases_by_task(events: &[Value]) -> BTreeMap<u64, Vec<(String, u64, u64)>> {
    let mut out: BTreeMap<u64, Vec<(String, u64, u64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "phase") {
        assert_eq!(e["ph"], "X", "{e}");
        let task = e["args"]["task"].as_u64().unwrap();
        let slice = events
            .iter()
            .find(|t| t["cat"] == "task" && t["args"]["task"] == task)
            .unwrap_or_else(|| panic!("a phase of a task with no slice: {e}"));
        assert_eq!(e["tid"], slice["tid"], "a phase off its task's track: {e}");
        let ts = e["ts"].as_u64().unwrap();
        out.entry(task).or_default().push((
            e["name"].as_str().unwrap().to_string(),
            ts,
            ts + e["dur"].as_u64().unwrap(),
        ));
    }
    out
}

/// Each lane's tasks, each stretched over its phases (start, end µs, task), in time order;
/// asserts that a lane draws one thing at a time: a task with its phases before and after it
/// (a job's wait, a process's start and exit) never overlaps the lane's other tasks, as
/// Perfetto requires of the slices of one track.
fn lanes_of_tasks_with_their_phases(
    events: &[Value],
    phases: &BTreeMap<u64, Vec<(String, u64, u64)>>,
    what: &str,
) -> BTreeMap<u64, Vec<(u64, u64, u64)>> {
    let mut lanes: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "task")
    {
        let task = e["args"]["task"].as_u64().unwrap();
        let (mut a, mut z) = slice_of(events, task);
        for (_, pa, pz) in phases.get(&task).into_iter().flatten() {
            (a, z) = (a.min(*pa), z.max(*pz));
        }
        lanes
            .entry(e["tid"].as_u64().unwrap())
            .or_default()
            .push((a, z, task));
    }
    for (tid, spans) in &mut lanes {
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(
                w[0].1 <= w[1].0,
                "{what}: lane {tid}: task {} with its phases overlaps task {}: {spans:?}",
                w[0].2,
                w[1].2
            );
        }
    }
    lanes
}

/// Task `task`'s slice: start and end, µs.
fn slice_of(events: &[Value], task: u64) -> (u64, u64) {
    let e = events
        .iter()
        .find(|t| t["cat"] == "task" && t["args"]["task"] == task)
        .unwrap_or_else(|| panic!("no slice of task {task}"));
    let ts = e["ts"].as_u64().unwrap();
    (ts, ts + e["dur"].as_u64().unwrap())
}

/// Every phase lies inside its task's slice but those beside it (a process's start and a
/// job's wait in the queue end by its start, a process's exit and a job's acknowledgement
/// start from its end), and a task's phases come one after another in time (none starts
/// before the one before it ended); and that a lane draws one thing at a time
/// ([`lanes_of_tasks_with_their_phases`]).
fn assert_nested_and_in_order(
    events: &[Value],
    what: &str,
) -> BTreeMap<u64, Vec<(String, u64, u64)>> {
    let phases = phases_by_task(events);
    for (task, ps) in &phases {
        let (start, end) = slice_of(events, *task);
        for (kind, a, z) in ps {
            assert!(a <= z, "{what}: task {task}: {ps:?}");
            let placed = match kind.as_str() {
                "process-start" | "queued" => *z <= start,
                "process-exit" | "ack" => end <= *a,
                _ => start <= *a && *z <= end,
            };
            assert!(placed, "{what}: task {task} ({start}-{end}): {ps:?}");
        }
        for w in ps.windows(2) {
            assert!(w[0].2 <= w[1].1, "{what}: task {task} out of order: {ps:?}");
        }
    }
    lanes_of_tasks_with_their_phases(events, &phases, what);
    phases
}

/// Runs `concur run ARGS --json FILE --trace FILE -r 1 --warmup 0` (not quiet): its stderr,
/// the run lines and the trace's processes.
fn traced(args: &[&str]) -> (String, Vec<Value>, BTreeMap<String, Vec<Value>>) {
    let (dir, json) = results_path();
    let trace = dir.path().join("trace.json");
    let out = concur()
        .arg("run")
        .args(args)
        .args(["-r", "1", "--warmup", "0", "--json"])
        .arg(&json)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let runs = read_lines(&json)
        .into_iter()
        .filter(|l| l["type"] == "run")
        .collect();
    (err, runs, processes(&doc))
}

#[test]
fn trace_tasks_keeps_an_even_sample_by_index_and_says_so() {
    let (err, runs, procs) = traced(&[
        "-w",
        "spin:1",
        "-m",
        "pool:2",
        "-m",
        "async:2",
        "-n",
        "1000",
        "--trace-tasks",
        "100",
    ]);
    assert!(
        err.contains("trace: 100 of 1,000 tasks per run, sampled evenly (--trace-tasks)"),
        "{err}"
    );
    for model in ["pool:2", "async:2"] {
        let run = runs.iter().find(|r| r["model"] == model).unwrap();
        assert_eq!(run["tasks_ok"], 1000, "{model}");
        let t = &run["timeline_tasks"];
        assert_eq!(
            (t["tasks"].as_u64(), t["kept"].as_u64(), t["cap"].as_u64()),
            (Some(1000), Some(100), Some(100)),
            "{model}"
        );
        assert_eq!(run["timeline_us"].as_array().unwrap().len(), 100, "{model}");
        let name = format!("{model} ×1000 run 1 · spin:1 · 100 of 1000 tasks, sampled evenly");
        let events = procs
            .get(&name)
            .unwrap_or_else(|| panic!("no process {name:?} in {:?}", procs.keys()));
        let labels = events
            .iter()
            .find(|e| e["name"] == "process_labels")
            .unwrap();
        assert_eq!(
            labels["args"]["labels"], "100 of 1,000 tasks, sampled evenly · --trace-tasks 100",
            "{model}"
        );
        // Exactly tasks 0, 10, 20, … 990: each once.
        let mut tasks: Vec<u64> = events
            .iter()
            .filter(|e| e["cat"] == "task")
            .map(|e| e["args"]["task"].as_u64().unwrap())
            .collect();
        tasks.sort_unstable();
        assert_eq!(
            tasks,
            (0..100).map(|k| k * 10).collect::<Vec<_>>(),
            "{model}"
        );
    }
}

#[test]
fn a_bad_trace_tasks_is_refused_naming_the_value_and_the_range() {
    for (value, says) in [
        ("0", "--trace-tasks '0' must be from 1 to 1,000,000"),
        (
            "1000001",
            "--trace-tasks '1000001' must be from 1 to 1,000,000",
        ),
        (
            "ten",
            "'ten' is not a number of tasks (allowed: a whole number from 1 to 1,000,000)",
        ),
        (
            "-5",
            "'-5' is not a number of tasks (allowed: a whole number from 1 to 1,000,000)",
        ),
    ] {
        let err = common::refused_before_any_run(&[
            "run",
            "-w",
            "sleep:1ms",
            "-m",
            "seq",
            "-n",
            "1",
            "-r",
            "1",
            &format!("--trace-tasks={value}"),
        ]);
        assert!(err.contains(says), "{value}: {err}");
    }
    let out = concur()
        .args([
            "crawl",
            "http://127.0.0.1:9/",
            "-n",
            "1",
            "-q",
            "--trace-tasks",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--trace-tasks '0' must be from 1 to 1,000,000"),
        "{err}"
    );
}

#[test]
fn an_open_runs_trace_carries_scheduled_times_and_the_release_lag() {
    let (_err, runs, procs) = traced(&[
        "-w",
        "sleep:1ms",
        "-m",
        "pool:2",
        "-m",
        "async:2",
        "--rate",
        "400",
        "-n",
        "40",
    ]);
    for model in ["pool:2", "async:2"] {
        let run = runs.iter().find(|r| r["model"] == model).unwrap();
        assert_eq!(
            run["timeline_tasks"]["sched_us"].as_array().unwrap().len(),
            40
        );
        let name = format!("{model} ×40 run 1 · sleep:1ms");
        let events = &procs[&name];
        let mut lag_of_start: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for e in events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == "release lag, scheduled to start (µs)")
        {
            lag_of_start
                .entry(e["ts"].as_u64().unwrap())
                .or_default()
                .push(e["args"]["us"].as_u64().unwrap());
        }
        assert_eq!(
            lag_of_start.values().map(Vec::len).sum::<usize>(),
            40,
            "{model}: a lag per task"
        );
        let mut due: Vec<u64> = Vec::new();
        for e in events.iter().filter(|e| e["cat"] == "task") {
            let (ts, at) = (
                e["ts"].as_u64().unwrap(),
                e["args"]["scheduled_us"].as_u64().unwrap(),
            );
            assert!(at <= ts, "{model}: started before it was due: {e}");
            assert!(lag_of_start[&ts].contains(&(ts - at)), "{model}: {e}");
            due.push(at);
        }
        // 400/s: due 2.5 ms apart.
        due.sort_unstable();
        assert_eq!(due.len(), 40);
        for w in due.windows(2) {
            assert!((2400..=2600).contains(&(w[1] - w[0])), "{model}: {due:?}");
        }
    }
}

#[test]
fn the_lock_s_waits_and_holds_are_phases_of_their_task() {
    let (err, runs, procs) = traced(&[
        "-w",
        "spin:3000000",
        "-m",
        "thread",
        "-m",
        "pool:2",
        "-n",
        "4",
        "--gil",
        "--switch-interval",
        "1ms",
    ]);
    assert!(
        err.contains("trace: the lock's first 16 waits and holds per traced task"),
        "{err}"
    );
    for model in ["thread", "pool:2"] {
        let run = runs.iter().find(|r| r["model"] == model).unwrap();
        assert_eq!(run["timeline_tasks"]["phases"]["per_task"], 16, "{model}");
        let name = format!("{model} ×4 run 1 · spin:3000000 · gil");
        let events = &procs[&name];
        let labels = events
            .iter()
            .find(|e| e["name"] == "process_labels")
            .unwrap();
        assert!(
            labels["args"]["labels"]
                .as_str()
                .unwrap()
                .ends_with("phases: at most 16 a task"),
            "{labels}"
        );
        let phases = assert_nested_and_in_order(events, model);
        assert_eq!(
            phases.len(),
            4,
            "{model}: every task held the lock: {phases:?}"
        );
        for (task, ps) in &phases {
            assert!(ps.len() <= 16, "{model}: task {task}");
            assert!(
                ps.iter()
                    .all(|(k, _, _)| k == "lock-wait" || k == "lock-held"),
                "{ps:?}"
            );
            assert!(
                ps.iter().any(|(k, _, _)| k == "lock-held"),
                "{model}: task {task}: {ps:?}"
            );
        }
        // Two tasks never hold the lock at once.
        let mut held: Vec<(u64, u64)> = phases
            .values()
            .flatten()
            .filter(|(k, _, _)| k == "lock-held")
            .map(|(_, a, z)| (*a, *z))
            .collect();
        held.sort_unstable();
        for w in held.windows(2) {
            assert!(w[0].1 <= w[1].0, "{model}: two holders at once: {held:?}");
        }
    }
}

#[test]
fn curl_s_transfers_show_connect_tls_wait_and_read_in_order() {
    let (_err, runs, procs) =
        traced(&["-w", "http:/delay/5ms", "-m", "curl:2", "-n", "12", "--tls"]);
    let run = runs.iter().find(|r| r["model"] == "curl:2").unwrap();
    let opened = run["connections_opened"].as_u64().unwrap();
    let events = &procs["curl:2 ×12 run 1 · http:/delay/5ms"];
    let phases = assert_nested_and_in_order(events, "curl");
    assert_eq!(phases.len(), 12, "every transfer: {phases:?}");
    let mut connects = 0;
    for (task, ps) in &phases {
        let kinds: Vec<&str> = ps.iter().map(|(k, _, _)| k.as_str()).collect();
        match kinds.as_slice() {
            ["connect", "tls", "wait", "read"] => connects += 1,
            ["wait", "read"] => {}
            other => panic!("task {task}: {other:?}"),
        }
    }
    assert_eq!(connects, opened, "a connect phase per connection opened");
    assert!(opened >= 1);
}

#[test]
fn async_s_own_client_shows_connect_tls_send_wait_and_read_in_order() {
    let (_err, runs, procs) = traced(&[
        "-w",
        "http:/delay/5ms",
        "-m",
        "async:2",
        "-m",
        "async-local:2",
        "-n",
        "12",
        "--tls",
    ]);
    for model in ["async:2", "async-local:2"] {
        let run = runs.iter().find(|r| r["model"] == model).unwrap();
        let opened = run["connections_opened"].as_u64().unwrap();
        let events = &procs[&format!("{model} ×12 run 1 · http:/delay/5ms")];
        let phases = assert_nested_and_in_order(events, model);
        assert_eq!(phases.len(), 12, "{model}: every request: {phases:?}");
        let mut connects = 0;
        for (task, ps) in &phases {
            let kinds: Vec<&str> = ps.iter().map(|(k, _, _)| k.as_str()).collect();
            match kinds.as_slice() {
                ["connect", "tls", "send", "wait", "read"] => connects += 1,
                ["send", "wait", "read"] => {}
                other => panic!("{model}: task {task}: {other:?}"),
            }
        }
        assert_eq!(
            connects, opened,
            "{model}: a connect phase per connection opened"
        );
        assert!(opened >= 1, "{model}");
    }
}

/// Each task's phase kinds, and how many tasks opened a connection (began with a connect).
fn http_phases(events: &[Value], what: &str, opening: &[&str], reusing: &[&str]) -> (usize, u64) {
    let phases = assert_nested_and_in_order(events, what);
    let mut connects = 0;
    for (task, ps) in &phases {
        let kinds: Vec<&str> = ps.iter().map(|(k, _, _)| k.as_str()).collect();
        if kinds == opening {
            connects += 1;
        } else {
            assert_eq!(kinds, reusing, "{what}: task {task}");
        }
    }
    (phases.len(), connects)
}

#[test]
fn the_blocking_and_green_clients_show_connect_tls_wait_and_read_in_order() {
    let models = ["seq", "pool:2", "green:2"];
    let mut args = vec!["-w", "http:/delay/5ms", "-n", "8", "--tls"];
    for m in models {
        args.extend(["-m", m]);
    }
    let (_err, runs, procs) = traced(&args);
    for model in models {
        let run = runs.iter().find(|r| r["model"] == model).unwrap();
        let opened = run["connections_opened"].as_u64().unwrap();
        let events = &procs[&format!("{model} ×8 run 1 · http:/delay/5ms")];
        // ureq writes the request inside the call that returns the response's head: no send.
        let (opening, reusing): (&[&str], &[&str]) = if model == "green:2" {
            (
                &["connect", "tls", "send", "wait", "read"],
                &["send", "wait", "read"],
            )
        } else {
            (&["connect", "tls", "wait", "read"], &["wait", "read"])
        };
        let (tasks, connects) = http_phases(events, model, opening, reusing);
        assert_eq!(tasks, 8, "{model}: every request");
        assert_eq!(connects, opened, "{model}: a connect per connection");
        assert!(opened >= 1, "{model}");
    }
    // Over plain HTTP ureq shows no end of the TCP connect: a new connection's lies in the
    // wait, and every request has its wait and read.
    let (_err, _runs, procs) = traced(&["-w", "http:/delay/5ms", "-m", "seq", "-n", "3"]);
    let events = &procs["seq ×3 run 1 · http:/delay/5ms"];
    let (tasks, connects) = http_phases(events, "seq", &[], &["wait", "read"]);
    assert_eq!((tasks, connects), (3, 0));
}

#[test]
fn http2_requests_show_their_send_before_the_wait() {
    let (_err, runs, procs) = traced(&[
        "-w",
        "http:/delay/5ms",
        "-m",
        "async:2",
        "-n",
        "8",
        "--tls",
        "--http2",
    ]);
    let run = runs.iter().find(|r| r["model"] == "async:2").unwrap();
    let opened = run["connections_opened"].as_u64().unwrap();
    let events = &procs["async:2 h2 ×8 run 1 · http:/delay/5ms"];
    let (tasks, connects) = http_phases(
        events,
        "async:2 h2",
        &["connect", "tls", "send", "wait", "read"],
        &["send", "wait", "read"],
    );
    assert_eq!(tasks, 8, "every stream");
    assert_eq!(connects, opened, "a connect per connection");
    assert!(opened >= 1);
}

#[test]
fn processes_of_their_own_hide_their_tasks_phases_and_the_trace_line_says_so() {
    let (err, runs, procs) = traced(&[
        "-w",
        "http:/delay/2ms",
        "-m",
        "fork",
        "-m",
        "jobs-procs:2",
        "-m",
        "jobs-memory:2",
        "-n",
        "4",
    ]);
    assert!(
        err.contains("trace: phases unseen under fork, jobs-procs (tasks or workers in processes of their own: fork and spawn show only each process's start and exit)"),
        "{err}"
    );
    let kinds = |model: &str| -> BTreeSet<Vec<String>> {
        let events = &procs[&format!("{model} ×4 run 1 · http:/delay/2ms")];
        assert_nested_and_in_order(events, model)
            .into_values()
            .map(|ps| ps.into_iter().map(|(k, _, _)| k).collect())
            .collect()
    };
    assert_eq!(
        kinds("fork"),
        [vec!["process-start".to_string(), "process-exit".into()]].into()
    );
    assert!(kinds("jobs-procs:2").is_empty());
    // A queue on threads sees its jobs' HTTP phases between their wait and their ack.
    for ks in kinds("jobs-memory:2") {
        assert_eq!(ks.first().map(String::as_str), Some("queued"), "{ks:?}");
        assert_eq!(ks.last().map(String::as_str), Some("ack"), "{ks:?}");
        assert!(ks.iter().any(|k| k == "wait"), "{ks:?}");
    }
    let run = runs.iter().find(|r| r["model"] == "fork").unwrap();
    assert_eq!(run["timeline_tasks"]["phases"]["per_task"], 2);
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn a_run_over_two_hosts_traces_a_process_per_host_with_its_workers() {
    common::require(&[common::Need::Redis]);
    let mut hub = common::hub::Hub::start(None);
    let url = hub.url();
    hub.agent("t1", &[]);
    hub.agent("t2", &[]);
    common::wait_for_agents(&url, &["t1", "t2"]);
    let (_err, runs, procs) = traced(&[
        "-w",
        "sleep:5ms",
        "-m",
        "pool:2",
        "-n",
        "20",
        "--hub",
        &url,
        "--hosts",
        "2",
    ]);
    let run = runs.iter().find(|r| r["model"] == "pool:2").unwrap();
    assert_eq!(run["tasks_ok"], 20, "{run}");
    let t = &run["timeline_tasks"];
    assert_eq!(t["host"].as_array().map(Vec::len), Some(20), "{t}");
    let mut all: Vec<u64> = Vec::new();
    for host in ["t1", "t2"] {
        let name = format!("pool:2 @2 hosts ×20 run 1 · sleep:5ms · host {host}");
        let events = procs
            .get(&name)
            .unwrap_or_else(|| panic!("no process {name:?} in {:?}", procs.keys()));
        let slices: Vec<&Value> = events.iter().filter(|e| e["cat"] == "task").collect();
        assert_eq!(slices.len(), 10, "{host}: its share");
        // Its workers: at most 2, named, one task at a time each.
        let mut lanes: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for e in &slices {
            let ts = e["ts"].as_u64().unwrap();
            lanes
                .entry(e["tid"].as_u64().unwrap())
                .or_default()
                .push((ts, ts + e["dur"].as_u64().unwrap()));
            all.push(e["args"]["task"].as_u64().unwrap());
        }
        assert!(lanes.len() <= 2, "{host}: {lanes:?}");
        for spans in lanes.values_mut() {
            spans.sort_unstable();
            assert!(
                spans.windows(2).all(|w| w[0].1 <= w[1].0),
                "{host}: {spans:?}"
            );
        }
        assert!(events
            .iter()
            .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "worker 0"));
    }
    // The hosts' tasks are the cell's, each once.
    all.sort_unstable();
    assert_eq!(all, (0..20).collect::<Vec<_>>());
}

#[test]
fn a_trace_file_that_cannot_be_written_is_refused_before_any_run() {
    let out = concur()
        .args([
            "run",
            "-w",
            "sleep:1ms",
            "-m",
            "seq",
            "-n",
            "1",
            "-r",
            "1",
            "-q",
        ])
        .args(["--trace", "/nonexistent-concur-folder/t.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--trace '/nonexistent-concur-folder/t.json'"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}
