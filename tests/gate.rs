//! `--fail-on-regression` cannot pass blind (issue 30): a comparison whose sizes can never reach
//! p < 0.05 (3 runs against 3, the default of the tour, the mailer and `--quick`), or whose
//! baseline has no cell of the study, is refused before any run (exit 2, one line naming the
//! `--repeat` that can); a cell its own failed runs leave without enough measured runs fails the
//! gate (exit 1); a real regression is still caught at the least repeat that can catch it.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// Each run of the cells the refusals plan: were one made, it would take this long.
const SLOW: &str = "sleep:10s";
const SLOW_S: Duration = Duration::from_secs(10);

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The lines of a synthetic results file (`tests/data/`).
fn lines_of(name: &str) -> Vec<Value> {
    read_lines(&data(name))
}

fn write_lines(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// `name` in `dir`: the synthetic file `from`, its runs kept when `keep(run)` says so.
fn cut(dir: &Path, name: &str, from: &str, keep: impl Fn(&Value) -> bool) -> PathBuf {
    let path = dir.join(name);
    let lines: Vec<Value> = lines_of(from)
        .into_iter()
        .filter(|l| l["type"] != "run" || keep(l))
        .collect();
    write_lines(&path, &lines);
    path
}

/// A baseline of `runs` runs of `workload` × `seq` × 1 task (study `custom`), 10 ms each,
/// made from the synthetic file's meta line and first run line.
fn baseline_of(dir: &Path, workload: &str, runs: usize) -> PathBuf {
    let lines = lines_of("base.jsonl");
    let template = of_type(&lines, "run")[0].clone();
    let mut out = vec![lines[0].clone()];
    for rep in 0..runs {
        let mut r = template.clone();
        r["workload"] = workload.into();
        r["model"] = "seq".into();
        r["tasks"] = 1.into();
        r["rep"] = rep.into();
        r["wall_s"] = (0.010 + 0.001 * rep as f64).into();
        out.push(r);
    }
    let path = dir.join(format!("base-{runs}.jsonl"));
    write_lines(&path, &out);
    path
}

/// `concur ARGS` in `dir`: its exit code, stdout and stderr, and how long it took.
fn concur_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let out = concur().current_dir(dir).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
        started.elapsed(),
    )
}

const THREE_AGAINST_THREE: &str = "concur: --fail-on-regression cannot fail with --repeat 3 against a baseline of 3 runs a cell: Mann-Whitney's smallest p is 0.100 ≥ 0.05; use --repeat 5 or more against this baseline (or 4 or more on both sides)";

#[test]
fn three_runs_against_three_are_refused_before_any_run_naming_the_repeat_that_can() {
    let dir = tempfile::tempdir().unwrap();
    let base = baseline_of(dir.path(), SLOW, 3);
    let results = dir.path().join("r.jsonl");
    let args = |repeat: &'static str| {
        vec![
            "run",
            "-w",
            SLOW,
            "-m",
            "seq",
            "-n",
            "1",
            "-r",
            repeat,
            "--warmup",
            "0",
            "--baseline",
            base.to_str().unwrap(),
            "--fail-on-regression",
            "--json",
            results.to_str().unwrap(),
        ]
    };
    let started = Instant::now();
    let err = refused_before_any_run(&args("3"));
    // One run would take SLOW_S: the refusal came before any.
    assert!(started.elapsed() < SLOW_S, "{:?}", started.elapsed());
    assert_eq!(err.trim(), THREE_AGAINST_THREE);
    assert!(!results.exists(), "a results file was written");
    // 4 against 3 cannot either (2/35 = 0.057); 5 against 3 could (2/56), so it is not
    // refused: its runs are made (here each stopped by a failing --prepare hook at once).
    let err = refused_before_any_run(&args("4"));
    assert!(
        err.contains("with --repeat 4 against a baseline of 3 runs a cell: Mann-Whitney's smallest p is 0.057"),
        "{err}"
    );
    let (hook, marker) = prepare_marker(dir.path());
    let hook = format!("{hook}; exit 1");
    let mut five = args("5");
    five.extend(["-i", "--prepare", &hook]);
    let (code, _, err, _) = concur_in(dir.path(), &five);
    assert!(marker.exists(), "{code:?}: {err}");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("has 0 measured runs of 5, the others 5 hook, against 3 in the baseline"),
        "{err}"
    );
}

#[test]
fn advise_at_its_default_repeat_is_refused_before_any_run() {
    // advise runs each cell 3 times unless told: the gate could never fail there.
    let dir = tempfile::tempdir().unwrap();
    let base = baseline_of(dir.path(), SLOW, 3);
    let (code, stdout, err, took) = concur_in(
        dir.path(),
        &[
            "advise",
            "-w",
            SLOW,
            "-n",
            "1",
            "--baseline",
            base.to_str().unwrap(),
            "--fail-on-regression",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim(), THREE_AGAINST_THREE);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(took < SLOW_S, "{took:?}");
    assert!(!dir.path().join("concur-results").exists());
}

#[test]
fn a_baseline_with_no_planned_cell_is_refused_before_any_run() {
    let base = data("base.jsonl");
    let err = refused_before_any_run(&[
        "run",
        "-w",
        SLOW,
        "-m",
        "seq",
        "-n",
        "1",
        "-r",
        "5",
        "--baseline",
        base.to_str().unwrap(),
        "--fail-on-regression",
    ]);
    assert_eq!(
        err.trim(),
        format!(
            "concur: --fail-on-regression: no cell of this study is in baseline '{}', so the gate could never fail (cells here 1: custom · sleep:10s · seq ×1; in the baseline 3: custom · spin:1000000 · seq ×4, custom · spin:1000000 · thread ×4, …)",
            base.display()
        )
    );
}

#[test]
fn report_refuses_a_blind_gate_before_printing_or_writing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let three = |r: &Value| r["rep"].as_u64().unwrap() < 3;
    let new3 = cut(dir.path(), "new3.jsonl", "new.jsonl", three);
    let base3 = cut(dir.path(), "base3.jsonl", "base.jsonl", three);
    let md = dir.path().join("summary.md");
    let export = format!("markdown={}", md.display());
    let report = |file: &Path, base: &Path, extra: &[&str]| {
        let mut args = vec![
            "report",
            file.to_str().unwrap(),
            "--baseline",
            base.to_str().unwrap(),
            "--export",
            &export,
        ];
        args.extend(extra);
        concur_in(dir.path(), &args)
    };
    let (code, stdout, err, _) = report(&new3, &base3, &["--fail-on-regression"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "concur: --fail-on-regression cannot fail with 3 runs a cell in '{}' against a baseline of 3 runs a cell: Mann-Whitney's smallest p is 0.100 ≥ 0.05; use --repeat 5 or more against this baseline (or 4 or more on both sides)",
            new3.display()
        )
    );
    assert!(stdout.is_empty(), "{stdout}");
    assert!(!md.exists(), "the Markdown was written");
    // No cell in common: refused the same way.
    let other = baseline_of(dir.path(), SLOW, 5);
    let (code, stdout, err, _) = report(&data("new.jsonl"), &other, &["--fail-on-regression"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.trim().lines().count() == 1
            && err.starts_with(&format!(
                "concur: --fail-on-regression: no cell of '{}' is in baseline '{}'",
                data("new.jsonl").display(),
                other.display()
            )),
        "{err}"
    );
    assert!(stdout.is_empty() && !md.exists(), "{stdout}");
    // Without the gate the same comparison is shown, each cell `~`, with the warning.
    let (code, stdout, err, _) = report(&new3, &base3, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        stdout.contains("0 improved, 0 regressed, 3 unchanged"),
        "{stdout}"
    );
    assert!(
        err.contains("warning: 3 of the cells in both cannot be judged: too few measured runs for the test ever to reach p < 0.05"),
        "{err}"
    );
    assert!(md.exists());
}

#[test]
fn failed_runs_that_leave_a_cell_unjudgeable_fail_the_gate_of_a_report() {
    // pool:2 regressed by 30% (tests/data), but 3 of its 5 runs crashed: the 2 left can never
    // reach p < 0.05 against 5 (2/21 = 0.095), so the gate cannot say it did not regress.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crashed.jsonl");
    let lines: Vec<Value> = lines_of("new.jsonl")
        .into_iter()
        .map(|mut l| {
            if l["model"] == "pool:2" && l["rep"].as_u64().unwrap() < 3 {
                l["status"] = "crashed".into();
                l["error"] = "killed by signal 11".into();
            }
            l
        })
        .collect();
    write_lines(&path, &lines);
    let base = data("base.jsonl");
    let args = [
        "report",
        path.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
        "--fail-on-regression",
        "-q",
    ];
    let (code, stdout, err, _) = concur_in(dir.path(), &args);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "error: 1 of 3 cells in both could not be judged against baseline '{}': custom · spin:1000000 · pool:2 ×4 has 2 measured runs of 5, the others 3 crashed, against 5 in the baseline, and Mann-Whitney's smallest p for those is 0.095 ≥ 0.05; exit status 1 (--fail-on-regression)",
            base.display()
        )
    );
    // Everything was shown first.
    assert!(stdout.contains("geometric mean of 3 cells"), "{stdout}");
    // Without the gate, a report accepts failed runs: 0.
    let (code, _, err, _) = concur_in(dir.path(), &args[..4]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn failed_runs_that_leave_a_cell_unjudgeable_fail_the_gate_of_a_run() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.jsonl");
    let study = ["run", "-w", "sleep:1ms", "-m", "seq", "-n", "1", "-r", "5"];
    let mut args: Vec<&str> = study.to_vec();
    args.extend(["--warmup", "0", "-q", "--json", base.to_str().unwrap()]);
    let (code, _, err, _) = concur_in(dir.path(), &args);
    assert_eq!(code, Some(0), "{err}");
    // The same study, -i, whose --prepare hook fails before its first 3 runs (status `hook`).
    let count = dir.path().join("count");
    let hook = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n + 1)) > '{c}'; [ \"$n\" -ge 3 ]",
        c = count.display()
    );
    let now = dir.path().join("now.jsonl");
    let mut args: Vec<&str> = study.to_vec();
    args.extend(["--warmup", "0", "-q", "-i", "--prepare", &hook]);
    args.extend(["--json", now.to_str().unwrap()]);
    args.extend(["--baseline", base.to_str().unwrap(), "--fail-on-regression"]);
    let (code, _, err, _) = concur_in(dir.path(), &args);
    let statuses: Vec<String> = of_type(&read_lines(&now), "run")
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(statuses, ["hook", "hook", "hook", "ok", "ok"], "{err}");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "error: 1 of 1 cells in both could not be judged against baseline '{}': custom · sleep:1ms · seq ×1 has 2 measured runs of 5, the others 3 hook, against 5 in the baseline",
            base.display()
        )),
        "{err}"
    );
}

#[test]
fn a_real_regression_is_caught_at_four_runs_against_four() {
    // The least repeat that can reach p < 0.05 on both sides: 4 (2/70 = 0.029).
    let dir = tempfile::tempdir().unwrap();
    let four = |r: &Value| r["rep"].as_u64().unwrap() < 4;
    let new4 = cut(dir.path(), "new4.jsonl", "new.jsonl", four);
    let base4 = cut(dir.path(), "base4.jsonl", "base.jsonl", four);
    let (code, _, err, _) = concur_in(
        dir.path(),
        &[
            "report",
            new4.to_str().unwrap(),
            "--baseline",
            base4.to_str().unwrap(),
            "--fail-on-regression",
            "-q",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "error: 1 of 3 cells regressed against baseline '{}': custom · spin:1000000 · pool:2 ×4 (+30.0%); exit status 1 (--fail-on-regression)",
            base4.display()
        )
    );
    // And in real runs: a command 25× slower (far apart, so a loaded machine cannot blur them).
    let _alone = alone();
    let run = |secs: &str, extra: &[&str]| {
        let out = concur()
            .current_dir(dir.path())
            .env("CONCUR_TEST_SLEEP", secs)
            .args([
                "run",
                "-w",
                "cmd:sleep $CONCUR_TEST_SLEEP",
                "--shell",
                "-m",
                "seq",
            ])
            .args([
                "-n", "1", "-r", "4", "--warmup", "0", "-q", "--json", "r.jsonl",
            ])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, err) = run("0.01", &["--save-baseline", "fast"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = run("0.25", &["--baseline", "fast", "--fail-on-regression"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("error: 1 of 1 cells regressed against baseline 'fast': custom · cmd:sleep $CONCUR_TEST_SLEEP · seq ×1"),
        "{err}"
    );
}
