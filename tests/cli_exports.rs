//! The exporter seam from the command line: every registered format renders, `--export`
//! writes any format to a file, `concur advise --json` writes the advice as one JSON document,
//! a closed stdout ends quietly, and the help and completions list every registry entry.

mod common;

use common::*;
use std::io::Read;
use std::process::Stdio;

#[test]
fn every_format_renders_a_results_file_through_export() {
    let (dir, json) = results_path();
    run_study_to(
        &json,
        &[
            "-w", "fib:10", "-m", "seq", "-m", "pool:2", "-n", "2", "-r", "2",
        ],
    );
    for f in ["table", "markdown", "csv", "ruby", "json", "html"] {
        let file = dir.path().join(format!("out.{f}"));
        let out = concur()
            .args(["report", json.to_str().unwrap(), "-q", "--export"])
            .arg(format!("{f}={}", file.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("pool:2"), "{f}: {text}");
    }
    // The json document holds the cells and the advice.
    let out = concur()
        .args(["report", json.to_str().unwrap(), "-q", "--format", "json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["cells"].as_array().unwrap().len(), 2);
    assert_eq!(doc["cells"][0]["model"], "seq");
    assert_eq!(doc["cells"][0]["baseline"], true);
    assert_eq!(doc["cells"][1]["family"], "pool");
    assert_eq!(doc["advice"][0]["class"], "cpu");
    assert!(doc["meta"]["machine"]["cores"].as_u64().unwrap() >= 1);
    // Bad names and targets are refused before any work, naming the value.
    for (args, needle) in [
        (vec!["--format", "yaml"], "unknown output format 'yaml'"),
        (
            vec!["--export", "html=-"],
            "the html report needs a file name",
        ),
        (vec!["--export", "csv"], "'csv' is not FORMAT=FILE"),
    ] {
        let out = concur()
            .args(["report", json.to_str().unwrap()])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn advise_json_is_the_advice_as_one_document() {
    let (dir, results) = results_path();
    let out = concur()
        .args([
            "advise",
            "-w",
            "sleep:5ms",
            "-n",
            "4",
            "-r",
            "1",
            "-q",
            "--json",
            "-",
            "--results",
        ])
        .arg(&results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Stdout is the document alone (no table beside it).
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let advice = &doc["advice"][0];
    assert_eq!(advice["class"], "delay", "{doc}");
    assert!(advice["winner"].is_string(), "{doc}");
    assert!(
        advice["text"].as_str().unwrap().contains("mostly waits"),
        "{doc}"
    );
    let models: Vec<&str> = doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["model"].as_str().unwrap())
        .collect();
    assert_eq!(models.len(), 5, "{models:?}");
    assert!(
        models.contains(&"seq") && models.contains(&"fork"),
        "{models:?}"
    );
    assert_eq!(of_type(&read_lines(&results), "run").len(), 5);
    // To a file, with the table on stdout.
    let file = dir.path().join("advice.json");
    let out = concur()
        .args([
            "advise",
            "-w",
            "fib:5",
            "-n",
            "2",
            "-r",
            "1",
            "-q",
            "--results",
        ])
        .arg(&results)
        .arg("--json")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("advice"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["advice"][0]["class"], "cpu", "{doc}");
}

#[test]
fn a_closed_stdout_ends_quietly_with_0() {
    let (_dir, json) = results_path();
    run_study_to(
        &json,
        &[
            "-w",
            "fib:10",
            "-m",
            "seq",
            "-m",
            "pool:2",
            "-n",
            "1,2,3,4,5,6,7,8",
            "-r",
            "1",
        ],
    );
    // The reader closes its end before concur writes (as `| head -0` would).
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("concur"));
    cmd.args(["report", json.to_str().unwrap()]);
    ends_quietly_into_a_closed_pipe(cmd);
}

#[test]
fn concur_run_into_a_closed_pipe_ends_quietly_with_0() {
    // `concur run … | head -1` where head is gone before the table comes: the study still
    // writes every result, and the table's write into the closed pipe ends it with 0.
    let (dir, json) = results_path();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("concur"));
    cmd.current_dir(dir.path())
        .args([
            "run", "-w", "fib:10", "-m", "seq", "-m", "pool:2", "-n", "1,2,3,4",
        ])
        .args(["-r", "1", "--warmup", "0", "--json"])
        .arg(&json);
    ends_quietly_into_a_closed_pipe(cmd);
    let lines = read_lines(&json);
    assert_eq!(of_type(&lines, "cell").len(), 8, "every result was written");
    // The shell's own pipe, as docs/output.md writes it: the first line, exit 0 from both.
    let bin = assert_cmd::cargo::cargo_bin("concur");
    let out = std::process::Command::new("bash")
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!(
            "set -o pipefail; '{}' run -w fib:10 -m seq -m pool:2 -n 1,2,3,4 -r 1 --warmup 0 \
             --json r2.jsonl 2> err | head -1; code=$?; cat err >&2; exit $code",
            bin.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

#[test]
fn help_list_and_completions_name_every_registry_entry() {
    let help = |args: &[&str]| {
        let out = concur().args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let run_help = help(&["run", "--help"]);
    let list = help(&["list"]);
    for e in concur::model::REGISTRY {
        assert!(
            run_help.contains(&e.usage()),
            "run --help lacks {}",
            e.usage()
        );
        assert!(list.contains(&e.usage()), "list lacks {}", e.usage());
    }
    for e in concur::workload::REGISTRY {
        assert!(run_help.contains(e.usage), "run --help lacks {}", e.usage);
    }
    for name in concur::study::presets::study_names() {
        assert!(run_help.contains(name), "run --help lacks {name}");
    }
    for f in concur::report::FORMATS {
        assert!(run_help.contains(f.name), "run --help lacks {}", f.name);
        assert!(list.contains(f.name), "list lacks {}", f.name);
    }
    for shell in ["bash", "zsh", "fish"] {
        let out = concur().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        for sub in ["run", "report", "crawl", "advise", "jobs", "serve"] {
            assert!(text.contains(sub), "{shell} completions lack {sub}");
        }
        assert!(text.contains("ignore-failures"), "{shell}");
    }
    let out = concur().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Runs `cmd` with its stdout closed before it writes (as `| head -0` would): it must exit 0
/// with neither a panic nor "Broken pipe" on stderr.
fn ends_quietly_into_a_closed_pipe(mut cmd: std::process::Command) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
}
