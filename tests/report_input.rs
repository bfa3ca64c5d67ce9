//! `concur report` (and `--baseline`) on files that are not what they claim: devices, folders
//! and FIFOs are refused at once, a line without end is refused at the bound, and a results
//! file whose last line was cut (a study killed while writing) renders the lines before it.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

/// Long enough for a loaded machine to start the binary; a read of `/dev/zero` or a FIFO
/// that blocks would not end at all.
const LIMIT: Duration = Duration::from_secs(30);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/base.jsonl")
}

/// `concur report ARGS`, killed at [`LIMIT`]: its exit code and stderr.
fn report(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let started = Instant::now();
    let out = concur()
        .arg("report")
        .args(args)
        .timeout(LIMIT)
        .output()
        .expect("concur runs");
    assert!(
        started.elapsed() < LIMIT,
        "concur report {args:?} did not end within {LIMIT:?}"
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Refused with exit 2 and one line naming `path` and `why`.
fn assert_refused(path: &Path, why: &str) {
    let (code, stdout, err) = report(&[path.as_os_str()]);
    assert_eq!(code, Some(2), "{}: {err}", path.display());
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(
        err.contains(&path.display().to_string()) && err.contains(why),
        "{err}"
    );
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn devices_folders_and_fifos_are_refused_at_once() {
    assert_refused(Path::new("/dev/zero"), "character device");
    let dir = tempfile::tempdir().unwrap();
    assert_refused(dir.path(), "a directory");
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // Nothing ever writes to it: opening it to read would block for ever.
    assert_refused(&fifo, "a FIFO");
}

#[test]
fn a_baseline_is_read_by_the_same_rules() {
    // A device is not taken for a baseline file (nor a name), and said so in one line.
    let (code, _, err) = report(&[
        fixture().as_os_str(),
        "--baseline".as_ref(),
        "/dev/zero".as_ref(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(err.contains("/dev/zero"), "{err}");
    // A baseline whose last line is cut is compared with all the same, with the warning.
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read_to_string(fixture()).unwrap();
    let n = whole.lines().count();
    let path = dir.path().join("cut.jsonl");
    std::fs::write(&path, &whole[..whole.len() - 40]).unwrap();
    let (code, stdout, err) = report(&[
        fixture().as_os_str(),
        "--baseline".as_ref(),
        path.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning:") && err.contains(&format!("line {n} is cut short")),
        "{err}"
    );
    assert!(!stdout.is_empty());
}

#[test]
fn a_line_longer_than_the_bound_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl");
    let mut text = std::fs::read(fixture()).unwrap();
    // 17 MiB without a line end, then more: line 17 is over the 16 MiB bound.
    text.resize(text.len() + (17 << 20), b' ');
    text.extend_from_slice(b"\n");
    std::fs::write(&path, &text).unwrap();
    let (code, _, err) = report(&[path.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(err.contains("line 17") && err.contains("16 MiB"), "{err}");
}

#[test]
fn a_cut_last_line_is_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read_to_string(fixture()).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    // The last run line, cut in the middle as a study killed while writing leaves it.
    let last = lines[lines.len() - 1];
    let cut = format!(
        "{}\n{}",
        lines[..lines.len() - 1].join("\n"),
        &last[..last.len() / 2]
    );
    let path = dir.path().join("cut.jsonl");
    std::fs::write(&path, cut).unwrap();
    let (code, stdout, err) = report(&[path.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning:") && err.contains(&format!("line {}", lines.len())),
        "{err}"
    );
    // The rendering is the one of the lines before it.
    let before = dir.path().join("before.jsonl");
    std::fs::write(&before, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
    let (_, expected, _) = report(&[before.as_os_str()]);
    assert!(!expected.is_empty());
    assert_eq!(stdout, expected);

    // -q silences it, as it does report's other warnings.
    let (code, _, err) = report(&[path.as_os_str(), "-q".as_ref()]);
    assert_eq!((code, err.as_str()), (Some(0), ""));

    // Cut in the middle of the file, it is still an error naming the line.
    let middle = format!("{}\n{}\n", &last[..last.len() / 2], lines.join("\n"));
    let middle = format!("{}\n{}", lines[0], middle);
    std::fs::write(&path, middle).unwrap();
    let (code, _, err) = report(&[path.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line 2:"), "{err}");
}
