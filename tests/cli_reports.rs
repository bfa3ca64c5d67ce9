//! Every rendering can be made again from a results file (its schema is checked in
//! `tests/results_schema.rs`).

mod common;

use common::*;

fn small_study() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, path) = results_path();
    concur()
        .args([
            "run", "-w", "fib:20", "-m", "seq", "-m", "pool:2", "-n", "4", "-r", "3", "--warmup",
            "0", "-q", "--json",
        ])
        .arg(&path)
        .assert()
        .success();
    (dir, path)
}

#[test]
fn report_renders_every_format_again_and_stably() {
    let (dir, path) = small_study();
    let table = concur().arg("report").arg(&path).output().unwrap();
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("custom · fib:20 · no interpreter lock"),
        "{text}"
    );
    assert!(text.contains("pool:2") && text.contains("speedup"));
    let again = concur().arg("report").arg(&path).output().unwrap();
    assert_eq!(table.stdout, again.stdout, "rendering is deterministic");

    let ruby = concur()
        .args(["report", "--format", "ruby"])
        .arg(&path)
        .output()
        .unwrap();
    let ruby = String::from_utf8_lossy(&ruby.stdout);
    assert!(
        ruby.contains("user     system      total        real"),
        "{ruby}"
    );
    assert!(
        ruby.lines()
            .any(|l| l.starts_with("pool:2 ×4") && l.ends_with(')')),
        "{ruby}"
    );

    let md = dir.path().join("out.md");
    let csv = dir.path().join("out.csv");
    concur()
        .arg("report")
        .arg(&path)
        .arg("--markdown")
        .arg(&md)
        .arg("--csv")
        .arg(&csv)
        .assert()
        .success();
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("| model | tasks | wall |"), "{md}");
    let csv = std::fs::read_to_string(csv).unwrap();
    assert!(csv.starts_with("study,workload,model,workers,tasks,gil,"));
    assert_eq!(csv.lines().count(), 3);
}

#[test]
fn mail_sink_stdout_prints_every_mail() {
    let (_dir, path) = results_path();
    let out = concur()
        .args([
            "run",
            "-w",
            "mail:5",
            "-m",
            "seq",
            "-m",
            "fork",
            "-m",
            "spawn",
            "-n",
            "3",
            "-r",
            "1",
            "--warmup",
            "0",
            "-q",
            "--mail-sink",
            "stdout",
            "--json",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("From: concur@example.com").count(),
        9,
        "{text}"
    );
}

#[test]
fn list_names_every_workload_and_model() {
    let out = concur().arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "fib:N",
        "spin:N",
        "read[",
        "sleep:DURATION",
        "mail[",
        "seq",
        "thread",
        "spawn",
        "fork",
        "pool:W",
        "rayon:W",
        "async:W",
        "async-local:W",
        "gil",
        "mailer",
    ] {
        assert!(text.contains(name), "{name}");
    }
}

/// The median of some run lines' field, over the measured runs (`ok` and `failed`).
fn median_of(runs: &[&serde_json::Value], field: &str) -> Option<f64> {
    let mut xs: Vec<f64> = runs
        .iter()
        .filter(|r| r["status"] == "ok" || r["status"] == "failed")
        .map(|r| r[field].as_f64().unwrap())
        .collect();
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(xs[n / 2]),
        _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

/// The cells of a results file as (workload, model, runs) from its run lines, in file order.
fn cells_of(lines: &[serde_json::Value]) -> Vec<(String, String, Vec<&serde_json::Value>)> {
    let mut cells: Vec<(String, String, Vec<&serde_json::Value>)> = Vec::new();
    for r in of_type(lines, "run") {
        let (w, m) = (
            r["workload"].as_str().unwrap(),
            r["model"].as_str().unwrap(),
        );
        match cells.iter_mut().find(|c| c.0 == w && c.1 == m) {
            Some(c) => c.2.push(r),
            None => cells.push((w.into(), m.into(), vec![r])),
        }
    }
    cells
}

/// The part of a rendering from the group title naming `workload` to the next title.
fn section<'a>(text: &'a str, marker: &str, workload: &str) -> &'a str {
    let title = format!("{marker}custom · {workload} · no interpreter lock");
    let start = text
        .find(&title)
        .unwrap_or_else(|| panic!("no group {title:?} in\n{text}"));
    let rest = &text[start + title.len()..];
    let end = rest
        .find(&format!("{marker}custom · "))
        .unwrap_or(rest.len());
    &rest[..end]
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn stdout_of(args: &[&str], file: &std::path::Path) -> String {
    let out = concur()
        .arg("report")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "concur report {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn report_shows_every_cell_of_a_failing_study_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = failing_study(dir.path());
    let lines = read_lines(&path);
    let cells = cells_of(&lines);
    assert_eq!(cells.len(), 8);

    let table = stdout_of(&[], &path);
    let markdown = stdout_of(&["--markdown", "-"], &path);
    let csv_text = stdout_of(&["--csv", "-"], &path);
    let html_path = dir.path().join("failures.html");
    stdout_of(&["--html", html_path.to_str().unwrap(), "-q"], &path);
    let html = std::fs::read_to_string(&html_path).unwrap();
    let mut csv_rows: Vec<csv::StringRecord> = csv::Reader::from_reader(csv_text.as_bytes())
        .records()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(csv_rows.len(), 8, "{csv_text}");

    for (workload, model, runs) in &cells {
        let label = format!("{model} ×2");
        let failed = runs.iter().filter(|r| r["status"] != "ok").count();
        let reason = runs.iter().find_map(|r| r["error"].as_str());
        match workload.as_str() {
            "crash:panic" => assert!(reason.unwrap().contains("panicked on purpose")),
            "crash:abort" => assert_eq!(reason, Some("killed by SIGABRT")),
            "sleep:5s" => assert!(reason.unwrap().starts_with("timed out after 3")),
            _ => assert_eq!(reason, None),
        }
        let counted = if failed == 0 {
            String::new()
        } else {
            format!("{failed}/{} runs", runs.len())
        };

        // The terminal table: a row ending in the failed-runs count, and the footnote.
        let t = section(&table, "", workload);
        let row = t
            .lines()
            .find(|l| l.split_whitespace().next() == Some(model.as_str()))
            .unwrap_or_else(|| panic!("no row for {model} in\n{t}"));
        assert!(row.trim_end().ends_with(&counted), "{row}");
        match reason {
            Some(e) => assert!(t.contains(&format!("  ! {label}: {e}\n")), "{t}"),
            None => assert!(!t.contains(" ! "), "{t}"),
        }

        // Markdown: the row with its count in the last column, and the footnote as a list item.
        let m = section(&markdown, "### ", workload);
        let row = m
            .lines()
            .find(|l| l.starts_with(&format!("| {model} | 2 |")))
            .unwrap_or_else(|| panic!("no row for {model} in\n{m}"));
        assert!(row.ends_with(&format!("| {counted} |")), "{row}");
        if let Some(e) = reason {
            assert!(m.contains(&format!("\n- {label}: {e}\n")), "{m}");
        }

        // HTML: the row, and the footnote as a warning paragraph.
        let h = section(&html, "<h2>", workload);
        assert!(
            h.contains(&format!("<tr><td>{model}</td><td>2</td>")),
            "{h}"
        );
        if failed > 0 {
            assert!(h.contains(&format!("<td>{counted}</td></tr>")), "{h}");
        }
        if let Some(e) = reason {
            let p = format!(
                "<p class=\"warn\">{}</p>",
                html_escape(&format!("{label}: {e}"))
            );
            assert!(h.contains(&p), "{p} not in {h}");
        }

        // CSV: one row per cell, with its counts and reason.
        let at = csv_rows
            .iter()
            .position(|r| &r[1] == workload && &r[2] == model)
            .unwrap_or_else(|| panic!("no CSV row for {workload} {model}"));
        let r = csv_rows.remove(at);
        assert_eq!(&r[6], runs.len().to_string(), "runs");
        assert_eq!(&r[7], failed.to_string(), "runs_failed");
        assert_eq!(&r[25], reason.unwrap_or(""), "error");
        let measured = runs
            .iter()
            .any(|r| r["status"] == "ok" || r["status"] == "failed");
        assert_eq!(!r[8].is_empty(), measured, "wall_median_s of {r:?}");
    }
    // The group with no measured cell still has its table (rows of dashes).
    let aborted = section(&table, "", "crash:abort");
    assert_eq!(aborted.matches("1/1 runs").count(), 2, "{aborted}");
}

/// The CSV columns, as documented; the values are checked against the file's cell lines.
const CSV_COLUMNS: &[&str] = &[
    "study",
    "workload",
    "model",
    "workers",
    "tasks",
    "gil",
    "runs",
    "runs_failed",
    "wall_median_s",
    "wall_ci95_lo_s",
    "wall_ci95_hi_s",
    "wall_min_s",
    "wall_max_s",
    "wall_mean_s",
    "wall_sd_s",
    "user_median_s",
    "sys_median_s",
    "max_rss_kib",
    "tree_pss_kib",
    "speedup",
    "efficiency",
    "effective_cores",
    "ideal_s",
    "vs_ideal",
    "bytes",
    "error",
    "latency_p50_us",
    "latency_p99_us",
    "rate_asked",
    "rate_achieved",
    "behind",
    "service_p99_us",
    "queue_p99_us",
    "lag_p99_us",
    "http2",
    "hosts",
    "tree_pss_all_started_kib",
    "tree_pss_end_kib",
    "pss_per_task_b",
    "http3",
];

/// A cell line's value as its CSV field: empty for null, `[lo, hi]` split in two columns.
fn cell_field(cell: &serde_json::Value, column: &str) -> serde_json::Value {
    match column {
        "wall_ci95_lo_s" => cell["wall_ci95_s"][0].clone(),
        "wall_ci95_hi_s" => cell["wall_ci95_s"][1].clone(),
        "latency_p50_us" => cell["latency_us"]["p50"].clone(),
        c if c.ends_with("_p99_us") => cell[c.replace("_p99_us", "_us")]["p99"].clone(),
        c => cell[c].clone(),
    }
}

/// Whether a CSV field holds the JSON value: the same number (to 1e-12 relative: `report`
/// recomputes the statistics, and a standard deviation may differ in its last bit), text or
/// nothing.
fn same_value(field: &str, v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => field.is_empty(),
        serde_json::Value::String(s) => field == s,
        serde_json::Value::Bool(b) => field == b.to_string(),
        serde_json::Value::Number(n) => {
            let (a, b) = (field.parse::<f64>().unwrap(), n.as_f64().unwrap());
            (a - b).abs() <= 1e-12 * b.abs()
        }
        _ => false,
    }
}

#[test]
fn csv_quotes_specs_and_every_value_reads_back() {
    // A real run whose workload holds `,`, `&` and `:` (and whose tasks may fail today: concur
    // appends random letters to `delay`; the values are compared with its own cell lines).
    let (dir, path) = results_path();
    let spec = "http:/add?a=1,2&delay=1";
    run_into(
        dir.path(),
        &path,
        &[
            "-w", spec, "-m", "seq", "-m", "pool:2", "-n", "2", "-r", "2",
        ],
    );
    let lines = read_lines(&path);
    let cells = of_type(&lines, "cell");
    assert_eq!(cells.len(), 2);
    let text = stdout_of(&["--csv", "-"], &path);
    assert!(text.contains(",\"http:/add?a=1,2&delay=1\","), "{text}");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(reader.headers().unwrap(), CSV_COLUMNS);
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(&row[1], spec);
        let cell = cells
            .iter()
            .find(|c| c["model"] == row[2])
            .unwrap_or_else(|| panic!("no cell line for {row:?}"));
        for (i, column) in CSV_COLUMNS.iter().enumerate() {
            // A cell line leaves `http2` and `http3` out when false; the CSV says false.
            let v = match (cell_field(cell, column), *column) {
                (serde_json::Value::Null, "http2" | "http3") => serde_json::Value::Bool(false),
                (v, _) => v,
            };
            assert!(
                same_value(&row[i], &v),
                "{column}: CSV {:?}, cell line {v}",
                &row[i]
            );
        }
    }

    // The committed file: quotes and commas inside a spec and an error, `|` too.
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/quoting.jsonl");
    let text = stdout_of(&["--csv", "-"], &data);
    assert!(
        text.contains(",\"read:/tmp/a \"\"b\"\",c|d:1024x1\","),
        "quotes doubled, the field quoted: {text}"
    );
    let lines = read_lines(&data);
    let runs = cells_of(&lines);
    let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(rows.len(), runs.len());
    for (row, (workload, model, runs)) in rows.iter().zip(&runs) {
        assert_eq!((&row[1], &row[2]), (workload.as_str(), model.as_str()));
        let first = runs[0];
        assert_eq!(&row[0], "custom");
        assert!(same_value(&row[3], &first["workers"]), "{row:?}");
        assert_eq!(&row[4], "2");
        assert_eq!(&row[5], "false");
        assert_eq!(&row[6], "3");
        let failed = runs.iter().filter(|r| r["status"] != "ok").count();
        assert_eq!(&row[7], failed.to_string());
        let num = |i: usize| row[i].parse::<f64>().unwrap();
        assert_eq!(num(8), median_of(runs, "wall_s").unwrap(), "median");
        let walls: Vec<f64> = runs.iter().map(|r| r["wall_s"].as_f64().unwrap()).collect();
        assert_eq!(num(11), walls.iter().copied().fold(f64::INFINITY, f64::min));
        assert_eq!(num(12), walls.iter().copied().fold(0.0, f64::max));
        assert!((num(13) - walls.iter().sum::<f64>() / 3.0).abs() < 1e-12);
        assert_eq!(num(15), median_of(runs, "user_s").unwrap());
        assert_eq!(num(16), median_of(runs, "sys_s").unwrap());
        assert!(same_value(&row[24], &first["bytes"]), "{row:?}");
        assert!(same_value(&row[25], &first["error"]), "{row:?}");
    }
}

/// The lines `concur report --format ruby` must print for a results file: per group its title,
/// the `Benchmark` header, one line per cell (medians of the measured runs) and a blank line.
fn expected_ruby(lines: &[serde_json::Value]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    let cells = cells_of(lines);
    for (workload, _, _) in &cells {
        let title = format!("custom · {workload} · no interpreter lock");
        if groups.iter().any(|g| g.0 == title) {
            continue;
        }
        let mine: Vec<_> = cells.iter().filter(|c| &c.0 == workload).collect();
        let label =
            |c: &(String, String, Vec<&serde_json::Value>)| format!("{} ×{}", c.1, c.2[0]["tasks"]);
        let width = mine
            .iter()
            .map(|c| label(c).chars().count())
            .max()
            .unwrap()
            .max(8);
        let mut out = vec![format!(
            "{:width$}       user     system      total        real",
            ""
        )];
        for c in mine {
            let l = label(c);
            let pad = " ".repeat(width - l.chars().count());
            let runs = &c.2;
            out.push(
                match (
                    median_of(runs, "user_s"),
                    median_of(runs, "sys_s"),
                    median_of(runs, "wall_s"),
                ) {
                    (Some(u), Some(s), Some(r)) => {
                        format!("{l}{pad} {u:10.6} {s:10.6} {:10.6} ({r:10.6})", u + s)
                    }
                    _ => {
                        let e = runs.iter().find_map(|r| r["error"].as_str()).unwrap();
                        format!("{l}{pad} failed: {e}")
                    }
                },
            );
        }
        groups.push((title, out));
    }
    groups
}

/// Splits Ruby output into groups: a title, then lines up to a blank line.
fn ruby_groups(text: &str) -> Vec<(String, Vec<String>)> {
    assert!(text.ends_with("\n\n"), "every group ends with a blank line");
    text.trim_end()
        .split("\n\n")
        .map(|g| {
            let mut lines = g.lines().map(String::from);
            (lines.next().unwrap(), lines.collect())
        })
        .collect()
}

#[test]
fn ruby_format_prints_every_line_in_benchmark_layout() {
    // Fixed numbers: every line is known.
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/base.jsonl");
    let text = stdout_of(&["--format", "ruby"], &base);
    assert_eq!(
        text,
        "custom · spin:1000000 · no interpreter lock\n\
         \x20               user     system      total        real\n\
         seq ×4      0.380000   0.020000   0.400000 (  0.400000)\n\
         thread ×4   0.541500   0.028500   0.570000 (  0.300000)\n\
         pool:2 ×4   0.379050   0.019950   0.399000 (  0.210000)\n\n"
    );
    assert_eq!(ruby_groups(&text), expected_ruby(&read_lines(&base)));

    // A real study with failed, crashed and timed-out runs: `report` still exits 0, measured
    // cells get their four numbers, the others their reason.
    let dir = tempfile::tempdir().unwrap();
    let path = failing_study(dir.path());
    let text = stdout_of(&["--format", "ruby"], &path);
    let mut got = ruby_groups(&text);
    let mut want = expected_ruby(&read_lines(&path));
    got.sort();
    want.sort();
    assert_eq!(got, want, "{text}");
    assert_eq!(text.matches(" failed: ").count(), 4, "{text}");
}

/// Review row 10: a results file's text written into CSV as it was. A cell a spreadsheet reads
/// as a formula (`=`, `+`, `-`, `@`, tab, carriage return first) gets a `'` before it (OWASP's
/// rule), and control and bidirectional characters (U+200E and U+200F too) are escaped, in
/// CSV and in every other format that shows the text.
#[test]
fn csv_cells_cannot_be_formulas_and_no_format_passes_control_or_bidi_characters() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/quoting.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hostile.jsonl");
    let hostile_error = "=HYPERLINK(\"http://x\",\"y\")\u{1b}[31m\u{200f}\u{200e}\u{202e}\u{9b}";
    let lines: Vec<String> = read_lines(&data)
        .into_iter()
        .map(|mut v| {
            if v["type"] == "run" {
                v["study"] = "@SUM(1+1)".into();
                v["error"] = hostile_error.into();
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let text = stdout_of(&["--csv", "-"], &file);
    let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap())
        .collect();
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!(&row[0], "'@SUM(1+1)", "{row:?}");
        assert!(row[25].starts_with("'=HYPERLINK("), "{row:?}");
    }
    for args in [
        &["--csv", "-"][..],
        &["--format", "table"][..],
        &["--format", "markdown"][..],
        &["--format", "json"][..],
    ] {
        let out = stdout_of(args, &file);
        for c in ['\u{1b}', '\u{200e}', '\u{200f}', '\u{202e}', '\u{9b}'] {
            assert!(
                !out.contains(c),
                "{args:?} passed U+{:04X} through: {out}",
                c as u32
            );
        }
    }
}

/// Review row 8: a run line with `wall_s` 1.7e308 (valid JSON) made the sums infinite and
/// `concur report --html` loop forever in the chart's axis. Such a line is refused, naming the
/// file, the line and the field, in every format, at once.
#[test]
fn a_figure_no_run_can_produce_is_refused_naming_file_line_and_field() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/quoting.jsonl");
    let dir = tempfile::tempdir().unwrap();
    for (field, value) in [
        ("wall_s", serde_json::json!(1.7e308)),
        ("max_rss_kib", serde_json::json!(u64::MAX)),
        ("user_s", serde_json::json!(-1e300)),
    ] {
        let file = dir.path().join(format!("{field}.jsonl"));
        let mut lines = read_lines(&data);
        let second_run = lines
            .iter()
            .enumerate()
            .filter(|(_, v)| v["type"] == "run")
            .nth(1)
            .map(|(i, _)| i)
            .unwrap();
        lines[second_run][field] = value.clone();
        let text: Vec<String> = lines.iter().map(|v| v.to_string()).collect();
        std::fs::write(&file, text.join("\n") + "\n").unwrap();
        for format in ["html", "table", "csv", "json"] {
            let out_file = dir.path().join(format!("out.{format}"));
            let mut child = common::concur_process()
                .arg("report")
                .arg(&file)
                .arg("--export")
                .arg(format!("{format}={}", out_file.display()))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("concur report --export {format} did not end within 60 s for {field} {value}");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert_eq!(status.code(), Some(2), "{format} {field}: {err}");
            let want = format!("line {}: field {field} is", second_run + 1);
            assert!(err.contains(&want), "{format} {field}: {err}");
            assert!(err.contains(&file.display().to_string()), "{err}");
        }
    }
}

/// The stderr lines of `concur` with `args` that start with `warning:`.
fn warning_lines(args: &[&str], file: &std::path::Path) -> Vec<String> {
    let out = concur().args(args).arg(file).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_warning_of_many_cells_is_one_line_naming_them_and_one_line_each_with_verbose() {
    // fib:1 twice takes microseconds under any model: every cell is too short to time.
    let (_dir, path) = results_path();
    let study = [
        "run", "-w", "fib:1", "-m", "seq", "-m", "thread", "-m", "pool:2", "-n", "2", "-r", "3",
        "--warmup", "0", "--json",
    ];
    let cells = ["fib:1 seq ×2", "fib:1 thread ×2", "fib:1 pool:2 ×2"];
    let short = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.contains("too short to time reliably"))
            .cloned()
            .collect()
    };
    for lines in [
        warning_lines(&study, &path),
        warning_lines(&["report"], &path),
    ] {
        let short = short(&lines);
        assert_eq!(short.len(), 1, "{lines:#?}");
        assert!(
            short[0].starts_with("warning: runs too short to time reliably in 3 cells: "),
            "{short:?}"
        );
        for cell in cells {
            assert!(short[0].contains(&format!("{cell} (")), "{cell}: {short:?}");
        }
    }
    let verbose = short(&warning_lines(&["report", "--verbose"], &path));
    assert_eq!(verbose.len(), 3, "{verbose:#?}");
    for (line, cell) in verbose.iter().zip(cells) {
        assert!(
            line.starts_with(&format!("warning: {cell}: runs take ")),
            "{line}"
        );
    }
}

/// The PSS/task column is taken from the all-started samples where both cells have one, and
/// from the peaks otherwise (a file from before the samples were recorded still reads). A real
/// study's run lines, their PSS set to figures that tell the two apart: the 1-task run peaks at
/// 3,000 KiB and held 2,000 when its task had started, the 11-task run 4,100 and 4,000: 200 KiB
/// a task from the all-started samples, 110 KiB from the peaks.
#[test]
fn pss_per_task_comes_from_the_all_started_samples() {
    let (dir, path) = results_path();
    run_study_to(
        &path,
        &[
            "-w",
            "sleep:10ms",
            "-m",
            "async:11",
            "-n",
            "1,11",
            "-r",
            "1",
        ],
    );
    let write = |name: &str, with_moments: bool| {
        let lines: Vec<String> = read_lines(&path)
            .into_iter()
            .filter(|l| l["type"] != "cell")
            .map(|mut l| {
                if l["type"] == "run" {
                    let (peak, started) = if l["tasks"] == 1 {
                        (3000, 2000)
                    } else {
                        (4100, 4000)
                    };
                    let o = l.as_object_mut().unwrap();
                    o.insert("tree_pss_kib".into(), peak.into());
                    o.remove("tree_pss_all_started_kib");
                    o.remove("tree_pss_end_kib");
                    if with_moments {
                        o.insert("tree_pss_all_started_kib".into(), started.into());
                        o.insert("tree_pss_end_kib".into(), started.into());
                    }
                }
                l.to_string()
            })
            .collect();
        let p = dir.path().join(name);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p
    };
    let pss_per_task = |file: &std::path::Path| {
        let md = stdout_of(&["--format", "markdown"], file);
        let header: Vec<&str> = md
            .lines()
            .find(|l| l.contains("| PSS/task |"))
            .unwrap_or_else(|| panic!("no PSS/task column: {md}"))
            .split('|')
            .map(str::trim)
            .collect();
        let col = header.iter().position(|h| *h == "PSS/task").unwrap();
        let row: Vec<&str> = md
            .lines()
            .find(|l| l.starts_with("| async:11 | 11 |"))
            .unwrap_or_else(|| panic!("no async:11 ×11 row: {md}"))
            .split('|')
            .map(str::trim)
            .collect();
        row[col].to_string()
    };
    let new = write("new.jsonl", true);
    assert_eq!(pss_per_task(&new), "200.0 KiB");
    let cells = stdout_of(&["--format", "json"], &new);
    let cells: serde_json::Value = serde_json::from_str(&cells).unwrap();
    let cell = cells["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tasks"] == 11)
        .expect("the 11-task cell");
    assert_eq!(cell["tree_pss_all_started_kib"], 4000, "{cell}");
    assert_eq!(cell["pss_per_task_b"], 200.0 * 1024.0, "{cell}");
    let old = write("old.jsonl", false);
    assert_eq!(pss_per_task(&old), "110.0 KiB");
}
