//! The other runtimes of `--classic`. The tasks study: the same waiting tasks in Go, Node.js,
//! Java, Elixir, CPython and MRI, and the bare tokio floor, as rows beside concur's own
//! models, each with its own start, wake-ups and task count (its checksum) from its `CONCUR`
//! line; and without those toolchains, notes naming the packages and an exit of 0. The crawl
//! and gil studies: Go's, Java's and Node.js's rows.
//! The tests with the toolchains are in the full tier (`.ci/run` installs them); the one
//! without needs nothing. The studies make 10,000 threads, so each test holds
//! `common::alone()`.

mod common;

use common::*;
use serde_json::Value;

/// Every row of the quick study's runtimes, and the task counts it runs them at (the
/// thread-per-task programs stop at 10,000; --quick's largest count is 10,000).
const ROWS: &[&str] = &[
    "rust:tokio-bare",
    "go:goroutines",
    "node:promises",
    "java:threads",
    "elixir:processes",
    "py:asyncio",
    "py:threads",
    "rb:threads",
];
const COUNTS: &[u64] = &[1, 1_000, 10_000];

/// Checks one run line of a waiting cell: it ran every task and says how late they woke.
fn assert_waited(r: &Value) {
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["tasks_ok"], r["tasks"], "{r}");
    assert_eq!(r["tasks_failed"], 0, "{r}");
    assert_eq!(r["bytes"], 0, "{r}");
    // The work's own wall: at least the 1 s wait, and not much more at these counts.
    let wall = r["wall_s"].as_f64().expect("wall");
    assert!((1.0..10.0).contains(&wall), "{r}");
    let w = &r["wakeups"];
    let start_all = w["start_all_s"].as_f64().expect("start_all_s");
    assert!((0.0..wall).contains(&start_all), "{r}");
    let late = &w["late_us"];
    let (p50, max) = (late["p50"].as_u64(), late["max"].as_u64());
    assert!(p50.is_some() && max >= p50, "{r}");
}

#[test]
#[ignore = "full tier: needs Go, Node.js, a JDK, Elixir, python3 and ruby"]
fn classic_tasks_runs_every_runtime_beside_concur() {
    require(&[Need::Runtimes, Need::Ruby]);
    let _alone = alone();
    let (out, lines) = run_study(&["tasks", "--quick", "--classic", "-r", "1"]);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for row in ROWS {
        let runs = runs_of(&lines, row);
        let counts: Vec<u64> = runs.iter().filter_map(|r| r["tasks"].as_u64()).collect();
        assert_eq!(counts, COUNTS, "{row}: {notes} {stderr}");
        for r in runs {
            assert_eq!(r["external"], true, "{r}");
            assert_waited(r);
        }
    }
    // Each toolchain's version is on the meta line.
    for version in [
        "go version go",
        "node:promises: v",
        ": javac ",
        "Elixir ",
        "Python 3",
        "ruby 3",
    ] {
        assert!(notes.contains(version), "{version}: {notes}");
    }
    // Java's virtual threads: a row with a JDK of 21 or later, otherwise a note saying so.
    assert!(
        !runs_of(&lines, "java:virtual").is_empty() || notes.contains("java:virtual left out"),
        "{notes}"
    );
    // concur's own rows carry the same columns.
    for model in [
        "async:1000",
        "async-local:10000",
        "green:1000",
        "actor:1000",
        "thread",
    ] {
        for r in runs_of(&lines, model) {
            assert_waited(r);
        }
    }
    // Memory per task is taken against each row's own 1-task cell.
    let cell = of_type(&lines, "cell")
        .into_iter()
        .find(|c| c["model"] == "go:goroutines" && c["tasks"] == 10_000)
        .expect("the go cell");
    assert!(cell["pss_per_task_b"].as_f64().is_some(), "{cell}");
}

/// Fast tier (about 25 s here: the quick study's own cells): it needs nothing installed.
#[test]
fn without_the_toolchains_the_rows_are_notes_and_the_study_succeeds() {
    let _alone = alone();
    // A PATH with only a shell on it (external cells run under `sh -c`).
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink("/bin/sh", bin.path().join("sh")).expect("sh");
    let (_dir, path) = results_path();
    let out = concur()
        .env("PATH", bin.path())
        .env("CONCUR_CLASSIC_HOME", bin.path().join("no-classic-home"))
        .args([
            "run",
            "tasks",
            "--quick",
            "--classic",
            "-r",
            "1",
            "-q",
            "--json",
        ])
        .arg(&path)
        .output()
        .expect("concur runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = read_lines(&path);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    for package in [
        "apt-get install golang-go",
        "apt-get install nodejs",
        "apt-get install openjdk-17-jdk-headless",
        "apt-get install elixir",
        "apt-get install python3",
        "apt-get install ruby",
    ] {
        assert!(notes.contains(package), "{package}: {notes}");
    }
    for row in ROWS.iter().filter(|r| **r != "rust:tokio-bare") {
        assert!(
            runs_of(&lines, row).is_empty(),
            "{row} ran without its toolchain"
        );
    }
    // The floor of concur's own runtime needs nothing but concur.
    let floor = runs_of(&lines, "rust:tokio-bare");
    assert_eq!(floor.len(), COUNTS.len(), "{notes}");
    floor.iter().for_each(|r| assert_waited(r));
}

/// The crawl and gil studies with `--classic`: Go's, Java's and Node.js's rows beside
/// CPython's and concur's, each request fetched (10 bytes each) and each CPU task done (8
/// bytes each, as concur's `spin`).
#[test]
#[ignore = "full tier: needs Go, Node.js and a JDK"]
fn classic_crawl_and_gil_run_go_java_and_node() {
    require(&[Need::Runtimes]);
    let _alone = alone();
    let (_, lines) = run_study(&["crawl", "--quick", "--classic", "-r", "1"]);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    for row in ["go:goroutines:100", "java:httpclient:100", "node:fetch:100"] {
        let runs = runs_of(&lines, row);
        assert_eq!(runs.len(), 1, "{row}: {notes}");
        let r = runs[0];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["tasks_ok"], 200, "{r}");
        assert_eq!(r["bytes"], 2000, "{r}");
        // 200 requests of 100 ms, 100 at a time: at least two delays.
        assert!(r["wall_s"].as_f64().expect("wall") >= 0.2, "{r}");
    }
    let (_, lines) = run_study(&["gil", "--quick", "--classic", "-r", "1"]);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    for row in [
        "go:plain",
        "go:goroutines",
        "java:plain",
        "java:threads",
        "node:plain",
        "node:workers",
    ] {
        let runs = runs_of(&lines, row);
        let ks: Vec<u64> = runs.iter().filter_map(|r| r["tasks"].as_u64()).collect();
        assert_eq!(ks, [1, 2, 6, 10], "{row}: {notes}");
        for r in runs {
            assert_eq!(r["status"], "ok", "{r}");
            assert_eq!(r["gil"], false, "{r}");
            assert_eq!(r["bytes"], 8 * r["tasks"].as_u64().expect("tasks"), "{r}");
        }
    }
    assert!(notes.contains("iterations of its 32-bit loop"), "{notes}");
}

/// Bad sizes for the floor program and flags the tasks study cannot take are usage errors:
/// exit 2 and one line naming the value.
#[test]
fn the_tasks_studys_bad_input_exits_2_with_one_line() {
    for (args, said) in [
        (
            &["classic", "tokio-tasks", "--tasks", "0"][..],
            "--tasks 0 is out of range: 1 to 10000000",
        ),
        (
            &["classic", "tokio-tasks", "--wait-ms", "3600001"][..],
            "--wait-ms 3600001 is out of range",
        ),
        (&["run", "tasks", "--gil"][..], "drop --gil"),
        (
            &["run", "tasks", "--stress"][..],
            "the tasks study has none",
        ),
    ] {
        let out = concur().args(args).output().expect("concur runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}
