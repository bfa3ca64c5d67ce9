//! Nothing outlives a study, and no run request shows on a command line: a `concur run` killed
//! with SIGKILL, interrupted with SIGINT (Ctrl-C), or whose run passes its `--timeout`, takes
//! its `__run` child and every process that child forked, spawned, started as a queue worker
//! or ran as a `cmd:` command with it; and those children's argv holds no part of the request.

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

/// How the tests end a study.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// SIGKILL to `concur run`: nothing of it can clean up.
    Kill,
    /// SIGINT to `concur run` alone (Ctrl-C): it stops the run and exits 130.
    Interrupt,
    /// `--timeout 2s`: the run is killed and recorded as timed out; the study exits 1.
    Timeout,
}

/// The `--timeout` of [`Ending::Timeout`]: long enough to see the whole tree start on a busy
/// machine, short enough to keep the test quick.
const TIMEOUT: &str = "2s";

/// `concur run` of `tasks` tasks of `workload` under `model`, its output discarded.
fn start_study(
    workload: &str,
    model: &str,
    tasks: usize,
    ending: Ending,
    results: &std::path::Path,
) -> Child {
    let exe: PathBuf = assert_cmd::cargo::cargo_bin("concur");
    let mut c = Command::new(exe);
    c.args(["run", "-w", workload, "-m", model, "-r", "1"])
        .args(["-n", &tasks.to_string()])
        .args(["--warmup", "0", "-q", "--json"])
        .arg(results);
    if let Ending::Timeout = ending {
        c.args(["--timeout", TIMEOUT]);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("concur starts")
}

/// Waits for `child` to exit, at most `limit`; its exit code.
fn exit_code(child: &mut Child, limit: Duration) -> Option<i32> {
    let mut status = None;
    wait_for("the study to exit", limit, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.and_then(|s| s.code())
}

/// Starts a study of `tasks` tasks of `workload` under `model`, waits until the runner has
/// `expect` descendants (the `__run` child and what it started), checks their command lines,
/// ends the study as `ending` says and waits until every one of them is gone (a zombie is
/// gone: it has ended and only its parent's wait is missing).
fn ended_study_leaves_nothing(
    workload: &str,
    model: &str,
    tasks: usize,
    expect: usize,
    ending: Ending,
) {
    let what = format!("{workload} under {model} ({ending:?})");
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results.jsonl");
    let mut runner = start_study(workload, model, tasks, ending, &results);
    let root = runner.id() as i32;
    let mut tree = Vec::new();
    wait_for(
        &format!("{expect} processes under the runner of {what}"),
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
            "{what}: the request shows on a command line: {line}"
        );
    }
    match ending {
        Ending::Kill => {
            // SAFETY: signalling the child this test started.
            unsafe { libc::kill(root, libc::SIGKILL) };
            runner.wait().expect("reap the runner");
        }
        Ending::Interrupt => {
            // SAFETY: signalling the child this test started.
            unsafe { libc::kill(root, libc::SIGINT) };
            let code = exit_code(&mut runner, Duration::from_secs(30));
            assert_eq!(code, Some(130), "{what}: interrupted");
        }
        Ending::Timeout => {
            let code = exit_code(&mut runner, Duration::from_secs(60));
            assert_eq!(code, Some(1), "{what}: a timed-out run fails the study");
            let lines = common::read_lines(&results);
            let runs = common::of_type(&lines, "run");
            assert_eq!(runs.len(), 1, "{what}: {runs:?}");
            assert_eq!(runs[0]["status"], "timeout", "{what}: {}", runs[0]);
        }
    }
    wait_for(
        &format!("the processes of {what} to die with their study"),
        Duration::from_secs(30),
        || tree.iter().all(|&(pid, start)| !alive(pid, start)),
    );
}

fn killed_runner_leaves_nothing(model: &str, expect: usize) {
    ended_study_leaves_nothing("sleep:60s", model, 3, expect, Ending::Kill);
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

/// The studies that start processes of their own, with the processes each has at once:
/// the built-in workload under the models that start processes (3 tasks), and a command
/// (2 tasks) under models that run it from a thread, a task, a fork, a spawned task or a
/// queue worker process.
const BUILT_IN_TREES: &[(&str, &str, usize, usize)] = &[
    // __run and its 3 forks; its 3 __task children; its 2 `__worker` processes.
    ("sleep:60s", "fork", 3, 4),
    ("sleep:60s", "spawn", 3, 4),
    ("sleep:60s", "jobs-procs:2", 3, 3),
];
const CMD_TREES: &[(&str, &str, usize, usize)] = &[
    // __run and one command at a time; __run and 2 commands; __run, 2 forks or __task
    // children or workers, and the command each started.
    ("cmd:sleep 60", "seq", 2, 2),
    ("cmd:sleep 60", "pool:2", 2, 3),
    ("cmd:sleep 60", "async:2", 2, 3),
    ("cmd:sleep 60", "fork", 2, 5),
    ("cmd:sleep 60", "spawn", 2, 5),
    ("cmd:sleep 60", "jobs-procs:2", 2, 5),
];

fn every_tree_ends_clean(trees: &[(&str, &str, usize, usize)], ending: Ending) {
    for &(workload, model, tasks, expect) in trees {
        ended_study_leaves_nothing(workload, model, tasks, expect, ending);
    }
}

#[test]
fn ctrl_c_leaves_no_process_of_models_that_start_processes() {
    every_tree_ends_clean(BUILT_IN_TREES, Ending::Interrupt);
}

#[test]
fn ctrl_c_leaves_no_command_running_under_any_model() {
    every_tree_ends_clean(CMD_TREES, Ending::Interrupt);
}

#[test]
fn a_timeout_leaves_no_process_of_models_that_start_processes() {
    every_tree_ends_clean(BUILT_IN_TREES, Ending::Timeout);
}

#[test]
fn a_timeout_leaves_no_command_running_under_any_model() {
    every_tree_ends_clean(CMD_TREES, Ending::Timeout);
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
