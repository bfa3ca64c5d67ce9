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
        // A comma inside a spec lists worker counts, so several models are one -m each.
        (
            &["run", "-w", "fib:30", "-m", "seq,thread,pool:4"],
            "bad model 'seq,thread,pool:4': -m takes one model per flag: -m seq -m thread -m pool:4",
        ),
        (
            &["run", "-w", "fib:30", "-m", "pool:4,thread"],
            "-m takes one model per flag: -m pool:4 -m thread",
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

/// A meta line as concur writes it (schema 1, a machine): a file that starts with it gets past
/// the meta check, so what is refused after it is refused for its own line.
const META: &str = r#"{"type":"meta","schema":1,"concur":"0.1.0","started":"2026-01-01T00:00:00Z","machine":{"cpu":"x","cores":2,"kernel":"6","load1":0.0,"governor":null,"mem_total_kib":null},"command":["concur"],"notes":[]}"#;

#[test]
fn bad_results_files_are_refused() {
    let out = concur()
        .args(["report", "/nonexistent.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.jsonl"));
    let dir = tempfile::tempdir().unwrap();
    // The meta line alone is a valid (empty) results file: what follows is what is tested.
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, format!("{META}\n")).unwrap();
    let out = concur().arg("report").arg(&good).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A line that is not JSON, with its line end (so not a last line cut short), whether more
    // lines follow it or not: refused, naming the file, that line and why.
    for (name, text) in [
        ("middle.jsonl", format!("{META}\nnot json\n{META}\n")),
        ("last.jsonl", format!("{META}\nnot json\n")),
    ] {
        let junk = dir.path().join(name);
        std::fs::write(&junk, text).unwrap();
        let out = concur().arg("report").arg(&junk).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        let named = format!("'{}' line 2: not a concur results line (", junk.display());
        assert!(err.contains(&named), "{name}: wanted {named:?} in: {err}");
        assert!(out.stdout.is_empty(), "{name}: a report was rendered");
    }
    // The same line without its line end is a study cut while writing: left out, named in a
    // warning, and the report renders.
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, format!("{META}\nnot json")).unwrap();
    let out = concur().arg("report").arg(&cut).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("'{}' line 2 is cut short", cut.display())),
        "{err}"
    );
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
