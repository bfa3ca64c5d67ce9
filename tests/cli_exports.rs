//! The exporter seam from the command line: every registered format renders, `--export`
//! writes any format to a file, `concur advise --json` writes the advice as one JSON document,
//! a closed stdout ends quietly, and the help and completions list every registry entry.

mod common;

use common::*;
use std::io::Read;
use std::process::Stdio;

/// A cell as the results file's own run lines give it, computed here (not by the analysis
/// under test): medians over its runs, the seq cell's median over its own for the speedup.
#[derive(Debug)]
struct Expected {
    workload: String,
    model: String,
    tasks: u64,
    runs: usize,
    bytes: u64,
    wall_median: f64,
    wall_min: f64,
    wall_max: f64,
    wall_mean: f64,
    user_median: f64,
    sys_median: f64,
    rss_median_kib: u64,
    pss_median_kib: Option<u64>,
    speedup: f64,
}

/// The median of `xs` (the middle one, or the mean of the two middle ones).
fn median(mut xs: Vec<f64>) -> f64 {
    assert!(!xs.is_empty());
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The cells of `lines`, in the order their first run appears, from the run lines alone.
fn expected_cells(lines: &[serde_json::Value]) -> Vec<Expected> {
    let runs = of_type(lines, "run");
    let mut keys: Vec<(String, String, u64)> = Vec::new();
    for r in &runs {
        assert_eq!(r["status"], "ok", "{r}");
        let k = (
            r["workload"].as_str().unwrap().to_string(),
            r["model"].as_str().unwrap().to_string(),
            r["tasks"].as_u64().unwrap(),
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut cells: Vec<Expected> = keys
        .into_iter()
        .map(|(workload, model, tasks)| {
            let mine: Vec<&&serde_json::Value> = runs
                .iter()
                .filter(|r| r["workload"] == workload.as_str() && r["model"] == model.as_str())
                .collect();
            let f = |k: &str| -> Vec<f64> { mine.iter().map(|r| r[k].as_f64().unwrap()).collect() };
            let walls = f("wall_s");
            let pss: Vec<f64> = mine
                .iter()
                .filter_map(|r| r["tree_pss_kib"].as_f64())
                .collect();
            Expected {
                runs: mine.len(),
                bytes: mine[0]["bytes"].as_u64().unwrap(),
                wall_median: median(walls.clone()),
                wall_min: walls.iter().copied().fold(f64::INFINITY, f64::min),
                wall_max: walls.iter().copied().fold(0.0, f64::max),
                wall_mean: walls.iter().sum::<f64>() / walls.len() as f64,
                user_median: median(f("user_s")),
                sys_median: median(f("sys_s")),
                rss_median_kib: median(f("max_rss_kib")).round() as u64,
                pss_median_kib: (!pss.is_empty()).then(|| median(pss).round() as u64),
                speedup: f64::NAN,
                workload,
                model,
                tasks,
            }
        })
        .collect();
    let seq = cells
        .iter()
        .find(|c| c.model == "seq")
        .expect("a seq cell")
        .wall_median;
    for c in &mut cells {
        c.speedup = seq / c.wall_median;
    }
    cells
}

/// `a` and `b` agree to a relative `tol`.
fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs())
}

/// A duration as the tables show it (`326 µs`, `10.9 ms`, `1.234 s`) and the half unit of its
/// last digit, in seconds.
fn shown_secs(text: &str) -> (f64, f64) {
    let (n, unit) = text
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("not a duration: {text:?}"));
    let x: f64 = n.parse().unwrap_or_else(|_| panic!("{text:?}"));
    let decimals = n.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let half = 0.5 * 10f64.powi(-decimals);
    let scale = match unit {
        "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => panic!("unit of {text:?}"),
    };
    (x * scale, half * scale)
}

/// A memory size as the tables show it (`812 KiB`, `6.5 MiB`), in KiB, and its half unit.
fn shown_kib(text: &str) -> (f64, f64) {
    let (n, unit) = text.trim().split_once(' ').expect("a size");
    let x: f64 = n.parse().unwrap();
    let decimals = n.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let half = 0.5 * 10f64.powi(-decimals);
    let scale = match unit {
        "KiB" => 1.0,
        "MiB" => 1024.0,
        "GiB" => 1024.0 * 1024.0,
        _ => panic!("unit of {text:?}"),
    };
    (x * scale, half * scale)
}

/// Checks one row of a rendered cell table (terminal, Markdown, HTML: the same columns) against
/// its cell: every shown figure is the cell's, to the digits shown.
fn check_row(what: &str, row: &[String], c: &Expected) {
    let col = |name: &str| -> &str {
        let i = concur::report::HEADERS
            .iter()
            .position(|h| *h == name)
            .unwrap();
        row[i].trim()
    };
    assert_eq!(row.len(), concur::report::HEADERS.len(), "{what}: {row:?}");
    assert_eq!(col("model"), c.model, "{what}: {row:?}");
    assert_eq!(col("tasks"), c.tasks.to_string(), "{what}: {row:?}");
    for (name, want) in [
        ("wall", c.wall_median),
        ("user", c.user_median),
        ("sys", c.sys_median),
    ] {
        let (shown, half) = shown_secs(col(name));
        assert!(
            (shown - want).abs() <= half * 1.001,
            "{what} {}: {name} shown {shown}, the runs' median is {want}",
            c.model
        );
    }
    let (rss, half) = shown_kib(col("peak RSS"));
    assert!(
        (rss - c.rss_median_kib as f64).abs() <= half * 1.001,
        "{what} {}: peak RSS {rss} KiB, the runs' median {} KiB",
        c.model,
        c.rss_median_kib
    );
    match c.pss_median_kib {
        None => assert_eq!(col("tree PSS"), "-", "{what} {}", c.model),
        Some(want) => {
            let (pss, half) = shown_kib(col("tree PSS"));
            assert!(
                (pss - want as f64).abs() <= half * 1.001,
                "{what} {}: {pss}",
                c.model
            );
        }
    }
    let speedup: f64 = col("speedup")
        .strip_suffix('×')
        .expect("a speedup")
        .parse()
        .unwrap();
    assert!(
        (speedup - c.speedup).abs() <= 0.005 + 1e-9,
        "{what} {}: speedup {speedup}, the runs give {}",
        c.model,
        c.speedup
    );
    assert_eq!(col("failed"), "", "{what} {}", c.model);
}

/// The rows of the one Markdown cell table in `text`, cut at its pipes.
fn markdown_rows(text: &str) -> Vec<Vec<String>> {
    let header = format!("| {} |", concur::report::HEADERS.join(" | "));
    let mut lines = text.lines().skip_while(|l| *l != header);
    assert!(lines.next().is_some(), "no cell table in {text}");
    assert!(lines.next().unwrap().starts_with("|---|"), "{text}");
    lines
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The rows of the one terminal cell table in `text`: its columns are right-aligned and
/// separated by blanks, so a row is cut into its values by their known shapes (a value and
/// its unit, or one word).
fn table_rows(text: &str) -> Vec<Vec<String>> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("model "));
    assert!(lines.next().is_some(), "no cell table in {text}");
    assert!(lines.next().unwrap().starts_with('═'), "{text}");
    lines
        .take_while(|l| !l.starts_with('─'))
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let mut row = Vec::new();
            let mut i = 0;
            // model, tasks, wall, ±95%, user, sys, peak RSS, tree PSS, speedup, effic., vs ideal
            for width in [1, 1, 2, 1, 2, 2, 2, 2, 1, 1, 1] {
                let w = if t.get(i) == Some(&"-") { 1 } else { width };
                row.push(t[i..i + w].join(" "));
                i += w;
            }
            // failed: empty, or "N/M runs".
            row.push(t[i..].join(" "));
            row
        })
        .collect()
}

/// The rows of the HTML report's cell table (the one whose first header is `model`).
fn html_rows(page: &str) -> Vec<Vec<String>> {
    let table = page
        .split("<table>")
        .find(|t| t.starts_with("<tr><th>model</th>"))
        .expect("a cell table");
    let table = &table[..table.find("</table>").unwrap()];
    table
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("<td>")
                .skip(1)
                .map(|c| c[..c.find("</td>").unwrap()].to_string())
                .collect()
        })
        .collect()
}

#[test]
fn every_format_renders_a_results_file_through_export() {
    let (dir, json) = results_path();
    // Three runs a cell: each median is one run's figure.
    run_study_to(
        &json,
        &[
            "-w", "fib:22", "-m", "seq", "-m", "pool:2", "-n", "4", "-r", "3",
        ],
    );
    let lines = read_lines(&json);
    let cells = expected_cells(&lines);
    assert_eq!(cells.len(), 2, "{cells:?}");
    assert_eq!((cells[0].runs, cells[1].runs), (3, 3), "{cells:?}");
    let export = |f: &str| -> String {
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
        std::fs::read_to_string(&file).unwrap()
    };
    // Every registered format is checked below.
    let names: Vec<&str> = concur::report::FORMATS.iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        ["table", "markdown", "csv", "ruby", "json", "html", "trace"],
        "a new format needs its check here"
    );

    // trace: one process per cell (its first run keeps the timeline), a slice per task
    // (tests/cli_trace.rs checks every model's lanes).
    let trace: serde_json::Value = serde_json::from_str(&export("trace")).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!(count("X"), 2 * 4, "{trace}");
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["seq ×4 run 1 · fib:22", "pool:2 ×4 run 1 · fib:22"]);

    // csv: raw numbers, exactly the runs' (a median of three is one of them).
    let text = export("csv");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), cells.len(), "{text}");
    for (row, c) in rows.iter().zip(&cells) {
        let get = |k: &str| -> &str {
            let i = headers
                .iter()
                .position(|h| h == k)
                .unwrap_or_else(|| panic!("no {k}"));
            &row[i]
        };
        let num = |k: &str| -> f64 { get(k).parse().unwrap_or_else(|_| panic!("{k}: {row:?}")) };
        assert_eq!(
            (get("study"), get("workload"), get("model"), get("tasks")),
            (
                "custom",
                c.workload.as_str(),
                c.model.as_str(),
                c.tasks.to_string().as_str()
            ),
            "csv: {row:?}"
        );
        assert_eq!(get("runs"), c.runs.to_string(), "csv: {row:?}");
        assert_eq!(get("runs_failed"), "0", "csv: {row:?}");
        assert_eq!(get("bytes"), c.bytes.to_string(), "csv: {row:?}");
        assert_eq!(num("wall_median_s"), c.wall_median, "csv: {row:?}");
        assert_eq!(num("wall_min_s"), c.wall_min, "csv: {row:?}");
        assert_eq!(num("wall_max_s"), c.wall_max, "csv: {row:?}");
        assert!(
            close(num("wall_mean_s"), c.wall_mean, 1e-12),
            "csv: {row:?}"
        );
        assert_eq!(num("user_median_s"), c.user_median, "csv: {row:?}");
        assert_eq!(num("sys_median_s"), c.sys_median, "csv: {row:?}");
        assert_eq!(
            get("max_rss_kib"),
            c.rss_median_kib.to_string(),
            "csv: {row:?}"
        );
        assert!(close(num("speedup"), c.speedup, 1e-12), "csv: {row:?}");
        assert_eq!(get("error"), "", "csv: {row:?}");
    }

    // json: the cells, with the same figures.
    let doc: serde_json::Value = serde_json::from_str(&export("json")).unwrap();
    let got = doc["cells"].as_array().unwrap();
    assert_eq!(got.len(), cells.len(), "{doc}");
    for (g, c) in got.iter().zip(&cells) {
        assert_eq!(
            (&g["workload"], &g["model"], &g["tasks"], &g["runs"]),
            (
                &serde_json::json!(c.workload),
                &serde_json::json!(c.model),
                &serde_json::json!(c.tasks),
                &serde_json::json!(c.runs)
            ),
            "json: {g}"
        );
        assert_eq!(
            g["wall_median_s"].as_f64(),
            Some(c.wall_median),
            "json: {g}"
        );
        assert_eq!(
            g["user_median_s"].as_f64(),
            Some(c.user_median),
            "json: {g}"
        );
        assert_eq!(g["sys_median_s"].as_f64(), Some(c.sys_median), "json: {g}");
        assert_eq!(
            g["max_rss_kib"].as_u64(),
            Some(c.rss_median_kib),
            "json: {g}"
        );
        assert_eq!(g["bytes"].as_u64(), Some(c.bytes), "json: {g}");
        assert!(
            close(g["speedup"].as_f64().unwrap(), c.speedup, 1e-12),
            "json: {g}"
        );
    }

    // markdown, the terminal table and the HTML report: one row per cell, to the digits shown.
    for (f, rows) in [
        ("markdown", markdown_rows(&export("markdown"))),
        ("table", table_rows(&export("table"))),
        ("html", html_rows(&export("html"))),
    ] {
        assert_eq!(rows.len(), cells.len(), "{f}: {rows:?}");
        for (row, c) in rows.iter().zip(&cells) {
            check_row(f, row, c);
        }
    }
    // The HTML report's embedded data holds the run lines themselves.
    let page = export("html");
    let data = page
        .split("<script type=\"application/json\" id=\"concur-data\">")
        .nth(1)
        .and_then(|s| s.split("</script>").next())
        .expect("the embedded data");
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    let walls = |runs: Vec<&serde_json::Value>| -> Vec<(String, f64)> {
        runs.iter()
            .map(|r| {
                (
                    r["model"].as_str().unwrap().to_string(),
                    r["wall_s"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        walls(data["runs"].as_array().unwrap().iter().collect()),
        walls(of_type(&lines, "run")),
        "html: the embedded runs"
    );

    // ruby: `label user system total (real)`, six decimals.
    let text = export("ruby");
    let rows: Vec<&str> = text.lines().filter(|l| l.contains('(')).collect();
    assert_eq!(rows.len(), cells.len(), "{text}");
    for (line, c) in rows.iter().zip(&cells) {
        let label = format!("{} ×{}", c.model, c.tasks);
        let rest = line
            .strip_prefix(label.as_str())
            .unwrap_or_else(|| panic!("ruby: {line:?} is not {label}'s"));
        let nums: Vec<f64> = rest
            .replace(['(', ')'], " ")
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let want = [
            c.user_median,
            c.sys_median,
            c.user_median + c.sys_median,
            c.wall_median,
        ];
        assert_eq!(nums.len(), 4, "ruby: {line}");
        for (got, want) in nums.iter().zip(want) {
            assert!(
                (got - want).abs() <= 5e-7 + 1e-12,
                "ruby: {line}: {got} vs {want}"
            );
        }
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
    // The binary names its allocator, so every figure says what it was measured under.
    let allocator = if cfg!(feature = "alloc-mimalloc") {
        "mimalloc"
    } else if cfg!(feature = "alloc-jemalloc") {
        "jemalloc"
    } else {
        "system"
    };
    assert_eq!(doc["meta"]["allocator"], allocator, "{}", doc["meta"]);
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
    for name in concur::plan::presets::study_names() {
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
