//! Careless and hostile input on the command line (issue 20): arguments that are not UTF-8,
//! output targets that cannot be written, inputs that are not what they claim, `-q` on a failed
//! run, clap's own errors, and the temporary files concur makes on its own.

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::time::Duration;

use common::*;

fn not_utf8(name: &[u8]) -> OsString {
    OsString::from_vec(name.to_vec())
}

/// One `concur:` line on stderr and exit 2.
fn one_line_exit_2(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("concur: "), "{err}");
    err
}

#[test]
fn paths_that_are_not_utf8_are_written_where_asked() {
    let dir = tempfile::tempdir().unwrap();
    let name = |ext: &str| {
        let mut b = b"x\xff\xfe.".to_vec();
        b.extend_from_slice(ext.as_bytes());
        not_utf8(&b)
    };
    let mut export = b"markdown=".to_vec();
    export.extend_from_slice(name("export.md").as_bytes());
    let out = concur()
        .current_dir(dir.path())
        .args([
            "run",
            "-w",
            "cmd:echo hi",
            "-m",
            "seq",
            "-n",
            "1",
            "-r",
            "1",
        ])
        .args(["--warmup", "0", "-q"])
        .arg("--json")
        .arg(name("jsonl"))
        .arg("--html")
        .arg(name("html"))
        .arg("--csv")
        .arg(name("csv"))
        .arg("--markdown")
        .arg(name("md"))
        .arg("--export")
        .arg(not_utf8(&export))
        .arg("--cmd-output")
        .arg(name("out"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ext in ["jsonl", "html", "csv", "md", "export.md"] {
        let p = dir.path().join(name(ext));
        assert!(
            std::fs::metadata(&p).is_ok_and(|m| m.len() > 0),
            "{ext} missing"
        );
    }
    // The command's output is kept under the folder named in bytes, which the run's process
    // received whole.
    let kept = dir.path().join(name("out"));
    let mut found = Vec::new();
    let mut stack = vec![kept.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                found.push(std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
    }
    assert!(
        found.iter().any(|t| t.contains("hi")),
        "{found:?} in {kept:?}"
    );
}

#[test]
fn a_flag_that_takes_text_names_itself_when_given_bytes() {
    let out = concur()
        .args(["run", "--url"])
        .arg(not_utf8(b"http://x\xff/"))
        .output()
        .unwrap();
    let err = one_line_exit_2(&out);
    assert!(
        err.contains("--url") && err.contains("not valid UTF-8"),
        "{err}"
    );
}

#[test]
fn clap_errors_are_one_concur_line_with_the_value() {
    for (args, needle) in [
        (&["run", "-n", "-1"][..], "'-1'"),
        (&["run", "-n", "1,2,,3"], "two commas"),
        (&["run", "--bogus"], "'--bogus'"),
        (&["run", "--repeat", "x"], "'x'"),
        (&["jobs", "enqueue"], "-n <N>"),
        (&["serve", "--addr", "nope"], "'nope'"),
        (&["frob"], "'frob'"),
    ] {
        let out = concur().args(args).output().unwrap();
        let err = one_line_exit_2(&out);
        assert!(err.contains(needle), "{args:?}: {err}");
        // clap's tip would make '-1' the study's name.
        assert!(!err.contains("'-- "), "{args:?}: {err}");
    }
    // Help and version still print as clap prints them, exit 0.
    let out = concur().args(["run", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"));
}

#[test]
fn quiet_never_silences_why_the_exit_status_is_not_0() {
    let (_dir, path) = results_path();
    let out = concur()
        .args(["run", "-w", "cmd:false", "-m", "seq", "-n", "1", "-r", "1"])
        .args(["--warmup", "0", "-q", "--format", "json", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("1 of 1 runs failed") && err.contains("exited with code 1"),
        "{err}"
    );
}

#[test]
fn every_output_flag_checks_its_target_alike_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/folder");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let base = ["run", "-w", "fib:1", "-m", "seq", "-n", "1"];
    let cases: Vec<(Vec<OsString>, &str)> = vec![
        (
            vec!["--json".into(), missing.join("x.jsonl").into()],
            "--json",
        ),
        (vec!["--csv".into(), missing.join("x.csv").into()], "--csv"),
        (
            vec!["--html".into(), missing.join("x.html").into()],
            "--html",
        ),
        (
            vec!["--markdown".into(), missing.join("x.md").into()],
            "--markdown",
        ),
        (
            vec![
                "--export".into(),
                format!("html={}", missing.join("x.html").display()).into(),
            ],
            "--export",
        ),
        (
            vec!["--cmd-output".into(), missing.join("out").into()],
            "--cmd-output",
        ),
        (vec!["--json".into(), dir.path().into()], "is a folder"),
        (vec!["--csv".into(), dir.path().into()], "is a folder"),
        (
            vec!["--cmd-output".into(), file.clone().into()],
            "is not a folder",
        ),
    ];
    for (extra, needle) in cases {
        let mut args: Vec<OsString> = base.iter().map(OsString::from).collect();
        args.extend(extra.iter().cloned());
        let (hook, marker) = prepare_marker(dir.path());
        let out = concur()
            .current_dir(dir.path())
            .args(&args)
            .args(["--prepare", &hook])
            .output()
            .unwrap();
        let err = one_line_exit_2(&out);
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!marker.exists(), "{extra:?}: a run happened");
        assert!(!dir.path().join("no").exists(), "{extra:?}: folders made");
        assert!(!dir.path().join("concur-results").exists(), "{extra:?}");
    }
    // A results file that fails on its first write names its flag.
    let out = concur()
        .current_dir(dir.path())
        .args(base)
        .args(["-q", "--json", "/proc/self/mem"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("--json '/proc/self/mem'"), "{err}");
}

#[test]
fn html_is_not_offered_for_stdout_and_is_refused_there_with_the_alternatives() {
    let help = concur().args(["report", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let format = help
        .lines()
        .find(|l| l.trim_start().starts_with("--format"))
        .unwrap();
    assert!(!format.contains("html"), "{format}");
    let out = concur()
        .args([
            "run", "-w", "fib:1", "-m", "seq", "-n", "1", "--format", "html",
        ])
        .output()
        .unwrap();
    let err = one_line_exit_2(&out);
    assert!(
        err.contains("--format html") && err.contains("table"),
        "{err}"
    );
}

#[test]
fn read_of_a_folder_or_a_fifo_is_refused_by_the_plan_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    for path in [dir.path(), fifo.as_path()] {
        let mut child = concur_process()
            .args(["run", "-m", "seq", "-n", "1", "-w"])
            .arg(format!("read:{}", path.display()))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut status = None;
        wait_for("concur to refuse the path", Duration::from_secs(20), || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(status.and_then(|s| s.code()), Some(2), "{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
}

#[test]
fn a_queue_is_never_opened_on_a_device() {
    let journal = Path::new("/dev/null-journal");
    let had_journal = journal.exists();
    let out = concur()
        .args([
            "jobs",
            "enqueue",
            "--noop",
            "-n",
            "1",
            "--jobs-backend",
            "sqlite:/dev/null",
        ])
        .output()
        .unwrap();
    let err = one_line_exit_2(&out);
    assert!(err.contains("not a regular file"), "{err}");
    if !had_journal {
        assert!(!journal.exists(), "a journal was made beside /dev/null");
    }
}

#[test]
fn the_files_concur_makes_for_a_run_live_in_private_folders_and_go_with_it() {
    // The queues of jobs (SQLite) and jobs-procs (and the workers' records), and curl's CA file.
    let tmp = tempfile::tempdir().unwrap();
    let serve_tmp = tempfile::tempdir().unwrap();
    let server = Serve::tls_self_signed(&[], &[("TMPDIR", serve_tmp.path())]);
    let ca = tmp.path().join("given-ca.pem");
    std::fs::copy(server.cert_path(), &ca).unwrap();
    let out = concur()
        .env("TMPDIR", tmp.path())
        .args([
            "run",
            "-w",
            "sleep:1ms",
            "-m",
            "jobs:2",
            "-m",
            "jobs-procs:2",
        ])
        .args([
            "-n", "4", "-r", "1", "--warmup", "0", "-q", "--format", "json",
        ])
        .arg("--json")
        .arg(tmp.path().join("jobs.jsonl"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = concur()
        .env("TMPDIR", tmp.path())
        .args([
            "run", "-m", "curl:2", "-n", "2", "-r", "1", "--warmup", "0", "-q",
        ])
        .args(["--format", "json", "-w"])
        .arg(format!("http:{}/add", server.url))
        .arg("--cacert")
        .arg(&ca)
        .arg("--json")
        .arg(tmp.path().join("curl.jsonl"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(server);
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("concur-"))
        .collect();
    assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
}

/// Review row 9: a `concur-results/` folder planted by someone else, or links planted where
/// concur writes, made a run overwrite a file its user did not name. The default folder is
/// refused when it is a link or everybody may write to it (another user's is refused alike,
/// by owner), and a named output that is a symbolic link is not followed: the file it points
/// at is left as it was.
#[test]
fn planted_results_folders_and_links_are_refused_and_their_targets_left_alone() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let run = |cwd: &std::path::Path, extra: &[&std::ffi::OsStr]| {
        concur()
            .current_dir(cwd)
            .args(["run", "-w", "fib:5", "-m", "seq", "-n", "1", "-r", "1"])
            .args(["--warmup", "0", "-q"])
            .args(extra)
            .output()
            .unwrap()
    };
    // The folder is a link to one elsewhere.
    let shared = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    symlink(elsewhere.path(), shared.path().join("concur-results")).unwrap();
    let out = run(shared.path(), &[]);
    let err = one_line_exit_2(&out);
    assert!(
        err.contains("concur-results") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    // The folder is writable by everybody.
    let shared = tempfile::tempdir().unwrap();
    let dir = shared.path().join("concur-results");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(shared.path(), &[]);
    let err = one_line_exit_2(&out);
    assert!(err.contains("everybody may write"), "{err}");
    // A named output that is a link to a file of the user's: not followed, not truncated.
    let shared = tempfile::tempdir().unwrap();
    let victim = shared.path().join("precious");
    std::fs::write(&victim, "keep me").unwrap();
    let link = shared.path().join("out.jsonl");
    symlink(&victim, &link).unwrap();
    let out = run(shared.path(), &["--json".as_ref(), link.as_os_str()]);
    let err = one_line_exit_2(&out);
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    // An honest folder still works.
    let fresh = tempfile::tempdir().unwrap();
    let out = run(fresh.path(), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(fresh.path().join("concur-results"))
            .unwrap()
            .count(),
        1
    );
}
