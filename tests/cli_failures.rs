//! Runs that crash, panic, time out or are interrupted are recorded with their reason, and the
//! study goes on. (Running out of threads is in tests/thread_exhaustion.rs: 60,000 threads
//! must not run beside this file's forks and timeouts.)

mod common;

use common::*;
use std::time::{Duration, Instant};

#[test]
fn panics_fail_tasks_and_crashes_fail_runs_and_the_study_goes_on() {
    // Failed runs make the exit status 1, after every result was written.
    let (_, lines) = run_failing_study(&[
        "-w",
        "crash:panic",
        "-w",
        "crash:abort",
        "-w",
        "crash:segv",
        "-w",
        "fib:5",
        "-m",
        "seq",
        "-m",
        "pool:2",
        "-m",
        "fork",
        "-n",
        "3",
        "-r",
        "1",
    ]);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 12);
    for r in &runs {
        let (w, m) = (
            r["workload"].as_str().unwrap(),
            r["model"].as_str().unwrap(),
        );
        let err = r["error"].as_str().unwrap_or("");
        match (w, m) {
            ("fib:5", _) => assert_eq!(r["status"], "ok"),
            ("crash:panic", _) => {
                assert_eq!(r["status"], "failed", "{r}");
                assert_eq!(r["tasks_failed"], 3);
                assert_eq!(r["failures"]["panic"], 3);
                assert!(
                    err.contains("3 of 3 tasks failed") && err.contains("panicked on purpose"),
                    "{err}"
                );
            }
            // Under fork only the task's own process dies: the run records crashed tasks.
            ("crash:abort", "fork") | ("crash:segv", "fork") => {
                assert_eq!(r["status"], "failed", "{r}");
                assert_eq!(r["failures"]["crash"], 3);
                assert!(err.contains("killed by SIG"), "{err}");
            }
            ("crash:abort", _) => {
                assert_eq!(r["status"], "crashed", "{r}");
                assert!(err.contains("SIGABRT"), "{err}");
            }
            ("crash:segv", _) => {
                assert_eq!(r["status"], "crashed", "{r}");
                assert!(err.contains("SIGSEGV"), "{err}");
            }
            _ => unreachable!(),
        }
    }
    // Every cell is summarised, failed ones with their reason.
    let cells = of_type(&lines, "cell");
    assert_eq!(cells.len(), 12);
    assert!(cells
        .iter()
        .filter(|c| c["workload"] == "crash:abort" && c["model"] == "seq")
        .all(|c| c["error"].as_str().unwrap().contains("SIGABRT")));
}

#[test]
fn a_run_past_its_timeout_is_killed_and_recorded() {
    let t = Instant::now();
    let (_, lines) = run_failing_study(&[
        "-w",
        "sleep:60s",
        "-m",
        "seq",
        "-m",
        "fork",
        "-n",
        "2",
        "-r",
        "1",
        "--timeout",
        "1s",
    ]);
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the timeout did not stop the runs"
    );
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 2, "seq and fork: {runs:?}");
    for r in runs {
        assert_eq!(r["status"], "timeout", "{r}");
        assert!(r["error"].as_str().unwrap().contains("timed out after"));
    }
}

#[test]
fn ctrl_c_keeps_every_finished_run() {
    // Each run's one task sleeps, then appends a line to `finished`: an account of the runs
    // that really finished kept by the tasks themselves, not by concur.
    let (dir, path) = results_path();
    let finished = dir.path().join("finished");
    let task = format!("cmd:sleep 0.4; echo done >> '{}'", finished.display());
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("concur"))
        .args([
            "run", "-w", &task, "--shell", "-m", "seq", "-n", "1", "-r", "100",
        ])
        .args(["--warmup", "0", "-q", "--json"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let recorded = || {
        std::fs::read_to_string(&path)
            .map(|t| t.lines().filter(|l| l.contains("\"type\":\"run\"")).count())
            .unwrap_or(0)
    };
    // Interrupt just after a run was recorded: the next one is 0.4 s from finishing.
    wait_for("two runs recorded", Duration::from_secs(60), || {
        recorded() >= 2
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let lines = read_lines(&path);
    let runs = of_type(&lines, "run");
    let really = std::fs::read_to_string(&finished)
        .unwrap_or_default()
        .lines()
        .count();
    assert!((2..100).contains(&really), "{really} runs finished");
    assert_eq!(
        runs.len(),
        really,
        "runs kept in the results file against runs whose task finished: {runs:?}"
    );
    assert!(runs.iter().all(|r| r["status"] == "ok"), "{runs:?}");
    assert_eq!(
        of_type(&lines, "cell").len(),
        1,
        "the finished runs are summarised"
    );
}

#[test]
fn failed_tasks_exit_1_unless_ignored_and_the_reason_is_printed() {
    // Every task fails: the study writes everything, says why on stderr, and exits 1.
    let (out, lines) = run_failing_study(&["-w", "crash:panic", "-m", "seq", "-n", "2", "-r", "2"]);
    assert_eq!(of_type(&lines, "run").len(), 2);
    assert_eq!(of_type(&lines, "cell").len(), 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // -q silences progress and tables, never the one line saying why the status is 1.
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: 2 of 2 runs failed"), "{stderr}");
    // Without -q the reason is one line naming the first failure and the way out (-i).
    let (_dir, path) = results_path();
    let out = concur()
        .args([
            "run",
            "-w",
            "crash:panic",
            "-m",
            "seq",
            "-n",
            "2",
            "-r",
            "1",
        ])
        .args(["--warmup", "0", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("error: 1 of 1 runs failed (first: crash:panic seq ×2: 2 of 2 tasks failed")
            && stderr.contains("-i/--ignore-failures"),
        "{stderr}"
    );
    // The advice says the runs failed and why, not what bounds the workload.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("No run of crash:panic succeeded"),
        "{stdout}"
    );
    assert!(!stdout.contains("CPU-bound"), "{stdout}");
    // -i accepts the failures.
    let (_, lines) = run_study(&["-w", "crash:panic", "-m", "seq", "-n", "2", "-r", "1", "-i"]);
    assert_eq!(of_type(&lines, "run")[0]["status"], "failed");
}

#[test]
fn a_crawl_of_a_closed_port_exits_1() {
    // Nothing listens on port 1 of the loopback: every request is a connect error.
    let (code, lines) = crawl(&["http://127.0.0.1:1/x", "-n", "20", "-c", "5"]);
    assert_eq!(code, Some(1));
    let r = of_type(&lines, "run")[0];
    assert_eq!(r["failures"]["connect"], 20, "{r}");
    let (code, _) = crawl(&["http://127.0.0.1:1/x", "-n", "5", "-c", "5", "-i"]);
    assert_eq!(code, Some(0));
}

#[test]
fn advise_exits_1_when_its_runs_fail_and_0_with_i() {
    let advise = |extra: &[&str]| {
        let (_dir, path) = results_path();
        let out = concur()
            .args(["advise", "-w", "crash:panic", "-n", "2", "-r", "1", "-q"])
            .args(extra)
            .arg("--results")
            .arg(&path)
            .output()
            .unwrap();
        let lines = read_lines(&path);
        let runs = of_type(&lines, "run");
        assert!(!runs.is_empty(), "{out:?}");
        assert!(runs.iter().all(|r| r["status"] == "failed"), "{runs:?}");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (code, text) = advise(&[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("No run of crash:panic succeeded"), "{text}");
    // -i accepts the failures: the same runs and advice, exit 0.
    let (code, text) = advise(&["-i"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("No run of crash:panic succeeded"), "{text}");
}
