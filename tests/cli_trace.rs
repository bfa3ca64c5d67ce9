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
        assert_eq!(run["timeline_tasks"]["lanes"], *word, "{model}");
        let name = format!("{model} ×12 run 1 · sleep:5ms");
        let events = procs
            .get(&name)
            .unwrap_or_else(|| panic!("no process {name:?} in {:?}", procs.keys()));
        let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
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
            .filter(|e| e["ph"] == "C")
            .map(|e| e["args"]["tasks"].as_u64().unwrap())
            .collect();
        assert_eq!(counts.last(), Some(&0), "{model}");
        assert!(counts.iter().all(|&c| c as usize <= *most), "{model}");
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
