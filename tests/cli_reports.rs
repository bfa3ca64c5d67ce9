//! The results file follows its schema, and every rendering can be made again from it.

mod common;

use common::*;

const RUN_FIELDS: &[&str] = &[
    "type",
    "study",
    "workload",
    "model",
    "workers",
    "tasks",
    "gil",
    "rep",
    "wall_s",
    "user_s",
    "sys_s",
    "max_rss_kib",
    "tree_pss_kib",
    "ctx_voluntary",
    "ctx_involuntary",
    "tasks_ok",
    "tasks_failed",
    "bytes",
    "error",
    "latency_us",
    "status",
    "threads_created",
    "processes_created",
];
const CELL_FIELDS: &[&str] = &[
    "type",
    "study",
    "workload",
    "model",
    "workers",
    "tasks",
    "gil",
    "wall_median_s",
    "wall_ci95_s",
    "speedup",
    "efficiency",
    "effective_cores",
    "ideal_s",
    "vs_ideal",
];

fn small_study() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, path) = results_path();
    concur()
        .args([
            "run", "-w", "fib:20", "-m", "seq", "-m", "pool:2", "-n", "4", "-r", "3", "--warmup",
            "0", "-q", "--json",
        ])
        .arg(&path)
        .assert()
        .success();
    (dir, path)
}

#[test]
fn results_file_follows_the_schema() {
    let (_dir, path) = small_study();
    let lines = read_lines(&path);
    let meta = &lines[0];
    assert_eq!(meta["type"], "meta");
    assert_eq!(meta["schema"], 1);
    for k in ["cpu", "cores", "kernel", "load1"] {
        assert!(!meta["machine"][k].is_null(), "machine.{k}");
    }
    assert!(meta["started"].as_str().unwrap().ends_with('Z'));
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 6);
    for r in &runs {
        for f in RUN_FIELDS {
            assert!(r.get(*f).is_some(), "run line lacks {f}: {r}");
        }
        for p in ["p50", "p90", "p99", "p999", "max"] {
            assert!(r["latency_us"][p].as_u64().is_some());
        }
    }
    let cells = of_type(&lines, "cell");
    assert_eq!(cells.len(), 2);
    for c in &cells {
        for f in CELL_FIELDS {
            assert!(c.get(*f).is_some(), "cell line lacks {f}: {c}");
        }
        let [lo, hi] = [
            c["wall_ci95_s"][0].as_f64().unwrap(),
            c["wall_ci95_s"][1].as_f64().unwrap(),
        ];
        let m = c["wall_median_s"].as_f64().unwrap();
        assert!(lo <= m && m <= hi);
    }
    let seq = cells.iter().find(|c| c["model"] == "seq").unwrap();
    assert_eq!(seq["speedup"], 1.0);
    // Lines come in order: meta, runs (as they finish), cells.
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"meta"));
    assert_eq!(types.last(), Some(&"cell"));
}

#[test]
fn report_renders_every_format_again_and_stably() {
    let (dir, path) = small_study();
    let table = concur().arg("report").arg(&path).output().unwrap();
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("custom · fib:20 · no interpreter lock"),
        "{text}"
    );
    assert!(text.contains("pool:2") && text.contains("speedup"));
    let again = concur().arg("report").arg(&path).output().unwrap();
    assert_eq!(table.stdout, again.stdout, "rendering is deterministic");

    let ruby = concur()
        .args(["report", "--format", "ruby"])
        .arg(&path)
        .output()
        .unwrap();
    let ruby = String::from_utf8_lossy(&ruby.stdout);
    assert!(
        ruby.contains("user     system      total        real"),
        "{ruby}"
    );
    assert!(
        ruby.lines()
            .any(|l| l.starts_with("pool:2 ×4") && l.ends_with(')')),
        "{ruby}"
    );

    let md = dir.path().join("out.md");
    let csv = dir.path().join("out.csv");
    concur()
        .arg("report")
        .arg(&path)
        .arg("--markdown")
        .arg(&md)
        .arg("--csv")
        .arg(&csv)
        .assert()
        .success();
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("| model | tasks | wall |"), "{md}");
    let csv = std::fs::read_to_string(csv).unwrap();
    assert!(csv.starts_with("study,workload,model,workers,tasks,gil,"));
    assert_eq!(csv.lines().count(), 3);
}

#[test]
fn mail_sink_stdout_prints_every_mail() {
    let (_dir, path) = results_path();
    let out = concur()
        .args([
            "run",
            "-w",
            "mail:5",
            "-m",
            "seq",
            "-m",
            "fork",
            "-m",
            "spawn",
            "-n",
            "3",
            "-r",
            "1",
            "--warmup",
            "0",
            "-q",
            "--mail-sink",
            "stdout",
            "--json",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("From: concur@example.com").count(),
        9,
        "{text}"
    );
}

#[test]
fn list_names_every_workload_and_model() {
    let out = concur().arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "fib:N",
        "spin:N",
        "read[",
        "sleep:DURATION",
        "mail[",
        "seq",
        "thread",
        "spawn",
        "fork",
        "pool:W",
        "rayon:W",
        "async:W",
        "async-local:W",
        "gil",
        "mailer",
    ] {
        assert!(text.contains(name), "{name}");
    }
}
