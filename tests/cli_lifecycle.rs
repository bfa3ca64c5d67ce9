//! Nothing outlives a study, and no run request shows on a command line: a `concur run` killed
//! with SIGKILL takes its `__run` child and every process that child forked, spawned or
//! started as a queue worker with it; and those children's argv holds no part of the request.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{descendants, stat, wait_for};

/// Whether the process `pid` that started at `start` still runs (a zombie has ended: the
/// container's init may be slow to reap the orphans it inherits).
fn alive(pid: i32, start: u64) -> bool {
    stat(pid).is_some_and(|s| s.start == start && s.state != 'Z')
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// `concur run` of 3 tasks of `sleep:60s` under `model`, its output discarded.
fn start_study(model: &str, results: &std::path::Path) -> Child {
    let exe: PathBuf = assert_cmd::cargo::cargo_bin("concur");
    Command::new(exe)
        .args(["run", "-w", "sleep:60s", "-m", model, "-n", "3", "-r", "1"])
        .args(["--warmup", "0", "-q", "--json"])
        .arg(results)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("concur starts")
}

/// Starts a study under `model`, waits until the runner has `expect` descendants (the
/// `__run` child and what it started), checks their command lines, kills the runner with
/// SIGKILL and waits until every one of them is gone.
fn killed_runner_leaves_nothing(model: &str, expect: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runner = start_study(model, &dir.path().join("results.jsonl"));
    let root = runner.id() as i32;
    let mut tree = Vec::new();
    wait_for(
        &format!("{expect} processes under the {model} runner"),
        Duration::from_secs(60),
        || {
            tree = descendants(root);
            tree.len() >= expect
        },
    );
    for &(pid, _) in &tree {
        let line = cmdline(pid);
        assert!(
            !line.contains("sleep:60s") && !line.contains('{'),
            "the request shows on a command line: {line}"
        );
    }
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(root, libc::SIGKILL) };
    runner.wait().expect("reap the runner");
    wait_for(
        &format!("the {model} run's processes to die with their runner"),
        Duration::from_secs(30),
        || tree.iter().all(|&(pid, start)| !alive(pid, start)),
    );
}

#[test]
fn fork_children_die_with_the_runner() {
    // __run and its 3 forks.
    killed_runner_leaves_nothing("fork", 4);
}

#[test]
fn spawn_children_die_with_the_runner() {
    // __run and its 3 __task children.
    killed_runner_leaves_nothing("spawn", 4);
}

#[test]
fn jobs_worker_processes_die_with_the_runner() {
    // __run and its 2 `__worker` processes.
    killed_runner_leaves_nothing("jobs-procs:2", 3);
}

#[test]
fn the_hidden_commands_refuse_to_run_by_hand() {
    for args in [
        vec!["__run"],
        vec!["__task"],
        vec!["__worker"],
        vec!["__run", r#"{"env":{"workload":"fib:1"}}"#],
        vec!["__task", "{}", "0"],
    ] {
        let out = common::concur().args(&args).output().expect("concur runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("this command is run by concur itself, not by hand"),
            "{args:?}: {err}"
        );
    }
}
