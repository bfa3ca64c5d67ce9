//! Every rendering can be made again from a results file (its schema is checked in
//! `tests/results_schema.rs`).

mod common;

use common::*;

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
