//! Bad input gets a one-line error naming the value and what is allowed, exit code 2, and
//! nothing written.

mod common;

use common::*;

fn refused(args: &[&str], needle: &str) {
    let (dir, path) = results_path();
    let out = concur()
        .current_dir(dir.path())
        .args(args)
        .arg("--json")
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
    assert_eq!(
        err.trim().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(!path.exists(), "{args:?}: a results file was written");
    assert!(!dir.path().join("concur-results").exists());
}

#[test]
fn bad_specs_and_flags_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "-w", "nope", "-m", "seq"],
            "unknown workload 'nope'",
        ),
        (&["run", "-w", "fib:abc", "-m", "seq"], "'abc'"),
        (&["run", "-w", "fib:30", "-m", "pool:0"], "'0'"),
        (
            &["run", "-w", "fib:30", "-m", "warp:3"],
            "unknown model 'warp'",
        ),
        (&["run", "-w", "sleep:-1", "-m", "seq"], "'-1'"),
        (
            &["run", "-w", "read:/nonexistent:1x1", "-m", "seq"],
            "/nonexistent",
        ),
        (
            &["run", "-w", "fib:30", "-m", "seq", "-n", "0"],
            "tasks '0'",
        ),
        (&["run", "gil", "-w", "fib:1"], "use one or the other"),
        (&["run", "nope"], "unknown study 'nope'"),
        (&["run", "gil", "--repeat", "0"], "--repeat '0'"),
        (&["run", "gil", "--gil"], "drop --gil"),
        (
            &["run", "-w", "fib:1"],
            "needs at least one --workload and one --model",
        ),
        (
            &[
                "run",
                "-w",
                "fib:1",
                "-m",
                "seq",
                "--csv",
                "-",
                "--markdown",
                "-",
            ],
            "only one output can go to stdout",
        ),
    ];
    for (args, needle) in cases {
        refused(args, needle);
    }
}

#[test]
fn clap_level_errors_also_exit_2() {
    let out = concur()
        .args(["run", "--timeout", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'soon'"));
}

#[test]
fn bad_results_files_are_refused() {
    let out = concur()
        .args(["report", "/nonexistent.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.jsonl"));
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, "{\"type\":\"meta\"}\nnot json\n").unwrap();
    let out = concur().arg("report").arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1"));
}

#[test]
fn hidden_commands_refuse_to_run_by_hand() {
    let out = concur().args(["__run", "{}"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not by hand"));
}

#[test]
fn a_queue_worker_is_only_started_by_concur() {
    // jobs-procs' workers get their whole request (backend, workload options) on fd 4, as
    // runs and tasks do; typed by hand, the hidden command refuses in one line.
    let out = concur().arg("__worker").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not by hand"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn what_the_plan_and_the_bind_step_refuse_exits_2_before_any_run() {
    for (args, needle) in [
        // The plan: --classic belongs to the built-in studies (the study registry says which).
        (
            &["run", "-w", "fib:1", "-m", "seq", "--classic"][..],
            "--classic adds the classic programs to these studies: tour, gil, crawl, mailer",
        ),
        // The bind step: a Redis that does not answer is refused before any run.
        (
            &[
                "run",
                "-w",
                "fib:1",
                "-m",
                "jobs-redis:2",
                "--jobs-backend",
                "redis://127.0.0.1:1/0",
            ][..],
            "--jobs-backend",
        ),
    ] {
        let err = refused_before_any_run(args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
