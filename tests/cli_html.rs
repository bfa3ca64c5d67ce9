//! The reports people look at: the self-contained HTML file (structure, no network, opened by
//! headless Chromium when it is installed), baselines, advice, and snapshots of the terminal
//! and Markdown renderings of fixed synthetic results (tests/data/, made by
//! make_synthetic.py). Set UPDATE_SNAPSHOTS=1 to rewrite tests/snapshots/ after a deliberate
//! change of the output: the run that rewrites a snapshot still fails, so review the diff and
//! run again.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

const KINDS: &[&str] = &["speedup", "wall", "memory", "latency", "timeline"];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a small real study with `--html` and returns (dir, results path, html text).
fn real_html() -> (tempfile::TempDir, PathBuf, String) {
    let (dir, json) = results_path();
    let html = dir.path().join("report.html");
    concur()
        .args([
            "run", "-w", "fib:20", "-m", "seq", "-m", "thread", "-m", "pool:2", "-n", "2,4,8",
            "-r", "3", "--warmup", "0", "-q", "--json",
        ])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .assert()
        .success();
    let text = std::fs::read_to_string(&html).expect("html written");
    (dir, json, text)
}

fn embedded_data(html: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"concur-data\">";
    let start = html.find(open).expect("data block") + open.len();
    let end = start + html[start..].find("</script>").expect("end of data block");
    serde_json::from_str(&html[start..end]).expect("embedded data is JSON")
}

/// The text of every `<text>` element in `svg`, trimmed: a chart's labels as drawn.
fn chart_labels(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| {
            let body = &rest[rest.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

/// The cells a group's bar charts (`wall`, `memory`, `latency`) label their bars with: every
/// label of the form `MODEL ×TASKS` in every panel of the chart, sorted.
fn bar_cells(figure: &str) -> Vec<String> {
    let mut cells: Vec<String> = chart_labels(figure)
        .into_iter()
        .filter(|l| {
            l.rsplit_once(" ×")
                .is_some_and(|(m, n)| !m.is_empty() && n.parse::<usize>().is_ok())
        })
        .collect();
    cells.sort();
    cells
}

/// Checks a report's groups by their content, in the page as written or as a browser built
/// it: the groups' titles in order, and in each group every bar chart labelling one bar per
/// cell of that group (`expected`: a title and its cells' `MODEL ×TASKS` labels, each group).
fn check_groups_by_content(html: &str, expected: &[(String, Vec<String>)]) {
    let sections: Vec<&str> = html.split("<section class=\"group\"").skip(1).collect();
    let titles: Vec<String> = sections
        .iter()
        .map(|s| {
            let t = &s[s.find("<h2>").expect("a group title") + 4..];
            t[..t.find("</h2>").expect("its end")].replace("&amp;", "&")
        })
        .collect();
    let want: Vec<&String> = expected.iter().map(|(t, _)| t).collect();
    assert_eq!(
        titles.iter().collect::<Vec<_>>(),
        want,
        "the groups, in order"
    );
    for (section, (title, cells)) in sections.iter().zip(expected) {
        let mut cells = cells.clone();
        cells.sort();
        let figs = figures(section);
        let kinds: Vec<&str> = figs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds, KINDS, "every chart kind, in order, in {title}");
        for (kind, body) in figs
            .iter()
            .filter(|(k, _)| ["wall", "memory", "latency"].contains(&k.as_str()))
        {
            assert_eq!(bar_cells(body), cells, "the {kind} chart's bars in {title}");
        }
    }
}

fn figures(html: &str) -> Vec<(String, String)> {
    html.split("<figure class=\"chart\" data-kind=\"")
        .skip(1)
        .map(|rest| {
            let kind = rest.split('"').next().unwrap_or_default().to_string();
            let body = rest
                .split("</figure>")
                .next()
                .unwrap_or_default()
                .to_string();
            (kind, body)
        })
        .collect()
}

#[test]
fn html_report_is_self_contained_and_complete() {
    let (_dir, json, html) = real_html();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<meta name=\"viewport\""));
    let figs = figures(&html);
    for kind in KINDS {
        let of_kind: Vec<_> = figs.iter().filter(|(k, _)| k == kind).collect();
        assert_eq!(of_kind.len(), 1, "one {kind} chart in the one group");
        assert!(
            of_kind[0].1.contains("<svg"),
            "{kind} chart is an inline SVG"
        );
    }
    // One timeline per cell: 3 models × 3 task counts.
    let timeline = &figs.iter().find(|(k, _)| k == "timeline").unwrap().1;
    assert_eq!(timeline.matches("<svg").count(), 9);
    // Nothing to fetch: no URL, no external script, stylesheet, font or image.
    for bad in [
        "http://",
        "https://",
        "<script src",
        "<link",
        "@import",
        "url(",
        "<img",
        "<iframe",
    ] {
        assert!(!html.contains(bad), "the report contains {bad:?}");
    }
    assert_eq!(html.matches("<script").count(), 1, "only the data block");
    // The raw data is embedded and is the results file's runs.
    let data = embedded_data(&html);
    let lines = read_lines(&json);
    assert_eq!(
        data["runs"].as_array().unwrap().len(),
        of_type(&lines, "run").len()
    );
    assert_eq!(data["cells"].as_array().unwrap().len(), 9);
    assert_eq!(data["meta"]["schema"], 1);
    assert!(data["advice"][0]["text"]
        .as_str()
        .unwrap()
        .contains("fib:20"));
    // The machine, command line and advice are on the page.
    assert!(html.contains("<dt>machine</dt>") && html.contains("--html"));
    assert!(html.contains("class=\"advice\""));
}

#[test]
fn timelines_are_kept_for_one_run_per_cell() {
    let (_dir, json, _html) = real_html();
    let lines = read_lines(&json);
    for r in of_type(&lines, "run") {
        let t = r.get("timeline_us");
        if r["rep"] == 0 {
            let t = t.and_then(|t| t.as_array()).expect("rep 0 has a timeline");
            assert_eq!(t.len() as u64, r["tasks"].as_u64().unwrap());
            let wall_us = r["wall_s"].as_f64().unwrap() * 1e6;
            for span in t {
                let (s, e) = (span[0].as_f64().unwrap(), span[1].as_f64().unwrap());
                assert!(
                    s <= e && e <= wall_us * 1.01 + 50.0,
                    "{span} in {wall_us} µs"
                );
            }
        } else {
            assert!(t.is_none(), "only rep 0 keeps a timeline: {r}");
        }
    }
}

#[test]
fn report_renders_the_same_html_again() {
    let (dir, json, _html) = real_html();
    let a = dir.path().join("a.html");
    let b = dir.path().join("b.html");
    for f in [&a, &b] {
        concur()
            .arg("report")
            .arg(&json)
            .arg("--html")
            .arg(f)
            .assert()
            .success();
    }
    let (a, b) = (
        std::fs::read_to_string(a).unwrap(),
        std::fs::read_to_string(b).unwrap(),
    );
    assert_eq!(a, b);
    assert_eq!(figures(&a).len(), KINDS.len());
}

/// The headless browser the full-tier tests open reports in (Debian's `chromium`).
const BROWSER: &str = "chromium";

fn chromium(browser: &str, extra: &[&str], page: &Path) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    // A browser that hangs must not hang the suite.
    std::process::Command::new("timeout")
        .args(["120", browser])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            // Any request the page made would fail here: it must make none to render fully.
            "--proxy-server=127.0.0.1:9",
            "--enable-logging=stderr",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs")
}

#[test]
#[ignore = "full tier: needs chromium"]
fn headless_chromium_opens_the_report() {
    common::require(&[common::Need::Chromium]);
    let browser = BROWSER;
    let (dir, _json, _html) = real_html();
    let page = dir.path().join("report.html");
    let shot = dir.path().join("shot.png");
    let out = chromium(
        browser,
        &[
            "--window-size=1200,2400",
            &format!("--screenshot={}", shot.display()),
        ],
        &page,
    );
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(png.len() > 20_000, "a blank page? {} bytes", png.len());
    let dom = chromium(browser, &["--dump-dom"], &page);
    let text = String::from_utf8_lossy(&dom.stdout);
    assert!(text.contains("concur-data"), "{text}");
    // The page the browser built, by its content: the one group, each bar chart with a bar
    // labelled by each of the 9 cells.
    let cells: Vec<String> = ["seq", "thread", "pool:2"]
        .iter()
        .flat_map(|m| [2, 4, 8].map(|n| format!("{m} ×{n}")))
        .collect();
    check_groups_by_content(
        &text,
        &[("custom · fib:20 · no interpreter lock".to_string(), cells)],
    );
    let page_text = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        text.matches("<svg").count(),
        page_text.matches("<svg").count(),
        "every chart parsed"
    );
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !log.lines()
            .any(|l| l.contains("CONSOLE") || l.contains("Uncaught")),
        "console errors: {log}"
    );
}

/// A cell's timeline in a report (or a DOM dump of one): the `<svg>` start tag and the whole
/// element, found by the cell's `data-cell`.
fn timeline_of<'a>(html: &'a str, cell: &str) -> (&'a str, &'a str) {
    let open = format!("<div class=\"tl\" data-cell=\"{cell}\">");
    let at = html
        .find(&open)
        .unwrap_or_else(|| panic!("no timeline for {cell}"));
    let rest = &html[at..];
    let svg = &rest[rest.find("<svg").expect("an svg")..];
    let svg = &svg[..svg.find("</svg>").expect("a closed svg")];
    let tag = &svg[..svg.find('>').expect("a start tag")];
    (tag, svg)
}

/// The value of attribute `name` in an element's text.
fn attr<'a>(text: &'a str, name: &str) -> &'a str {
    let key = format!(" {name}=\"");
    let at = text
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        + key.len();
    &text[at..at + text[at..].find('"').unwrap()]
}

/// Every `data-task` a timeline draws, sorted.
fn drawn_tasks(svg: &str) -> Vec<usize> {
    let mut v: Vec<usize> = svg
        .split(" data-task=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().parse().unwrap())
        .collect();
    v.sort_unstable();
    v
}

/// `concur run ARGS -r 1 --warmup 0 -q` with `--json` and `--html`: (dir, results, html, the
/// page's text).
fn run_with_html(args: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let (dir, json) = results_path();
    let html = dir.path().join("report.html");
    concur()
        .arg("run")
        .args(args)
        .args(["-r", "1", "--warmup", "0", "-q", "--json"])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .assert()
        .success();
    let text = std::fs::read_to_string(&html).unwrap();
    (dir, json, html, text)
}

/// Runs `pool:4` and `async:4` on 40 tasks of 5 ms with `--html`: (dir, results, html, text).
fn pool_and_async() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    run_with_html(&[
        "-w",
        "sleep:5ms",
        "-m",
        "pool:4",
        "-m",
        "async:4",
        "-n",
        "40",
    ])
}

#[test]
fn the_timeline_has_a_row_per_worker_and_every_task_once() {
    let (dir, json, _html, text) = pool_and_async();
    let mut ends = Vec::new();
    for (cell, kind) in [("pool:4 ×40", "worker"), ("async:4 ×40", "slot")] {
        let (tag, svg) = timeline_of(&text, cell);
        assert_eq!(attr(tag, "data-lane-kind"), kind, "{tag}");
        assert_eq!(attr(tag, "data-lanes"), "4", "{tag}");
        assert_eq!(attr(tag, "data-rows"), "4", "{tag}");
        assert_eq!(attr(tag, "data-tasks"), "40", "{tag}");
        assert_eq!(attr(tag, "data-of"), "40", "{tag}");
        assert_eq!(attr(tag, "data-mode"), "bars", "{tag}");
        assert_eq!(svg.matches("<g class=\"lane\"").count(), 4);
        for lane in 0..4 {
            assert!(svg.contains(&format!("<title>{kind} {lane}: ")), "{svg}");
        }
        // Every task once, and each on the lane the run recorded for it.
        assert_eq!(drawn_tasks(svg), (0..40).collect::<Vec<_>>(), "{cell}");
        let lanes: usize = svg
            .split("<g class=\"lane\"")
            .skip(1)
            .map(|g| attr(g, "data-tasks").parse::<usize>().unwrap())
            .sum();
        assert_eq!(lanes, 40);
        ends.push(attr(tag, "data-axis-end-us").to_string());
    }
    assert_eq!(ends[0], ends[1], "the cells of one workload share an axis");
    let lines = read_lines(&json);
    let run = of_type(&lines, "run")
        .into_iter()
        .find(|r| r["model"] == "pool:4")
        .unwrap();
    let (_, svg) = timeline_of(&text, "pool:4 ×40");
    let t = &run["timeline_tasks"];
    for (i, task) in t["index"].as_array().unwrap().iter().enumerate() {
        let lane = t["worker"][i].as_u64().unwrap();
        let group = svg
            .split("<g class=\"lane\"")
            .skip(1)
            .find(|g| attr(g, "data-lane") == lane.to_string())
            .unwrap();
        assert!(
            group.contains(&format!(" data-task=\"{task}\"")),
            "task {task} on worker {lane}"
        );
    }

    // A results file from before lanes were recorded still draws: its spans coloured into
    // slots, each drawn once by position.
    let old = dir.path().join("old.jsonl");
    without_timeline_tasks(&json, &old);
    let page = dir.path().join("old.html");
    concur()
        .arg("report")
        .arg(&old)
        .arg("--html")
        .arg(&page)
        .assert()
        .success();
    let text = std::fs::read_to_string(&page).unwrap();
    for cell in ["pool:4 ×40", "async:4 ×40"] {
        let (tag, svg) = timeline_of(&text, cell);
        assert_eq!(attr(tag, "data-lanes-recorded"), "false", "{tag}");
        assert_eq!(attr(tag, "data-lane-kind"), "slot", "{tag}");
        let lanes: usize = attr(tag, "data-lanes").parse().unwrap();
        assert!((1..=4).contains(&lanes), "{tag}");
        assert_eq!(drawn_tasks(svg), (0..40).collect::<Vec<_>>(), "{cell}");
    }
    assert!(text.contains("the run recorded no lanes"));
}

#[test]
fn a_thread_per_task_past_64_lanes_is_drawn_in_bands() {
    let (_dir, _json, _html, text) = run_with_html(&[
        "-w",
        "fib:5",
        "-m",
        "thread",
        "-n",
        "2500",
        "--trace-tasks",
        "2000",
    ]);
    let (tag, svg) = timeline_of(&text, "thread ×2500");
    assert_eq!(attr(tag, "data-lane-kind"), "thread", "{tag}");
    // The timeline keeps 2,000 of the 2,500 tasks, each on a thread of its own.
    assert_eq!(attr(tag, "data-lanes"), "2000", "{tag}");
    assert_eq!(attr(tag, "data-rows"), "64", "{tag}");
    assert_eq!(attr(tag, "data-tasks"), "2000", "{tag}");
    assert_eq!(attr(tag, "data-of"), "2500", "{tag}");
    assert_eq!(attr(tag, "data-mode"), "occupancy", "{tag}");
    let bands: Vec<&str> = svg.split("<g class=\"lane\"").skip(1).collect();
    assert_eq!(bands.len(), 64);
    let held: usize = bands
        .iter()
        .map(|g| attr(g, "data-lanes").parse::<usize>().unwrap())
        .sum();
    let tasks: usize = bands
        .iter()
        .map(|g| attr(g, "data-tasks").parse::<usize>().unwrap())
        .sum();
    assert_eq!((held, tasks), (2000, 2000));
    assert!(
        text.contains(
            "2,000 of 2,500 tasks, sampled evenly · 2,000 threads · grouped into 64 bands"
        ),
        "{tag}"
    );
}

/// `curl:2` fetching 4 times from the study's own server: (dir, results, html, text).
fn phased() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    run_with_html(&["-w", "http:/delay/5ms", "-m", "curl:2", "-n", "4"])
}

/// The phases drawn over each task's bar in `svg`: (kind, task) in drawing order.
fn drawn_phases(svg: &str) -> Vec<(String, usize)> {
    svg.split("<rect class=\"phase\"")
        .skip(1)
        .map(|r| {
            (
                attr(r, "data-phase").to_string(),
                attr(r, "data-phase-of").parse().unwrap(),
            )
        })
        .collect()
}

/// The legend under the timeline figure: its swatches' names.
fn timeline_legend(html: &str) -> String {
    let at = html
        .find("<figure class=\"chart\" data-kind=\"timeline\">")
        .expect("a timeline figure");
    let cap = &html[at..];
    cap[..cap.find("</figcaption>").unwrap()].to_string()
}

#[test]
fn bars_are_coloured_by_their_phases_with_a_legend() {
    let (_dir, _json, _html, text) = phased();
    let (_, svg) = timeline_of(&text, "curl:2 ×4");
    let drawn = drawn_phases(svg);
    for task in 0..4 {
        let kinds: Vec<&str> = drawn
            .iter()
            .filter(|(_, t)| *t == task)
            .map(|(k, _)| k.as_str())
            .collect();
        assert!(kinds.ends_with(&["wait", "read"]), "task {task}: {kinds:?}");
    }
    let legend = timeline_legend(&text);
    for name in ["connect", "waiting for the first byte", "body read"] {
        assert!(
            legend.contains(&format!("</span>{name}")),
            "{name}: {legend}"
        );
    }
    assert!(!legend.contains("holding the lock"), "{legend}");
    // Threads under the lock: their holds over their bars, and the legend says so.
    let (_dir, _json, _html, text) = run_with_html(&[
        "-w",
        "spin:2000000",
        "-m",
        "thread",
        "-n",
        "4",
        "--gil",
        "--switch-interval",
        "1ms",
    ]);
    let (_, svg) = timeline_of(&text, "thread ×4");
    assert!(
        drawn_phases(svg).iter().any(|(k, _)| k == "lock-held"),
        "{svg}"
    );
    assert!(timeline_legend(&text).contains("</span>holding the lock"));
}

#[test]
fn phases_beside_their_task_are_drawn_before_or_after_its_bar_inside_the_axis() {
    let (_dir, _json, _html, text) = run_with_html(&[
        "-w",
        "sleep:2ms",
        "-m",
        "jobs-memory:2",
        "-m",
        "fork",
        "-n",
        "4",
    ]);
    // Each bar's (x, end) and each phase's (kind, task, x, end), in SVG units.
    let num = |r: &str, a: &str| attr(r, a).parse::<f64>().unwrap();
    for (cell, before, after) in [
        ("jobs-memory:2 ×4", "queued", "ack"),
        ("fork ×4", "process-start", "process-exit"),
    ] {
        let (tag, svg) = timeline_of(&text, cell);
        let axis_end = 760.0 - 14.0;
        assert!(tag.contains("data-axis-end-us"), "{tag}");
        let bars: BTreeMap<usize, (f64, f64)> = svg
            .split("<rect x=")
            .skip(1)
            .filter(|r| r.contains(" data-task=\""))
            .map(|r| {
                let r = format!(" x={r}");
                let x = num(&r, "x");
                (
                    attr(&r, "data-task").parse().unwrap(),
                    (x, x + num(&r, "width")),
                )
            })
            .collect();
        assert_eq!(bars.len(), 4, "{cell}");
        for r in svg.split("<rect class=\"phase\"").skip(1) {
            let (kind, task) = (attr(r, "data-phase"), attr(r, "data-phase-of"));
            let (x, w) = (num(r, "x"), num(r, "width"));
            let bar = bars[&task.parse::<usize>().unwrap()];
            // Positions are written to 0.1, a phase is at least 0.5 wide, and a bar leaves a
            // pixel's gap after it (its drawn end is a pixel short).
            if kind == before {
                assert!(x + w <= bar.0 + 0.6, "{cell}: {kind} of {task}: {r}");
            } else if kind == after {
                assert!(x + 1.1 >= bar.1, "{cell}: {kind} of {task}: {r}");
                assert!(x + w <= axis_end + 0.6, "{cell}: {kind} past the axis: {r}");
            } else {
                panic!("{cell}: {kind}");
            }
        }
        for kind in [before, after] {
            let n = drawn_phases(svg).iter().filter(|(k, _)| k == kind).count();
            assert_eq!(n, 4, "{cell}: a {kind} per task");
        }
    }
    let legend = timeline_legend(&text);
    for name in [
        "waiting in the queue",
        "acknowledgement",
        "process start",
        "process exit (until reaped)",
    ] {
        assert!(
            legend.contains(&format!("</span>{name}")),
            "{name}: {legend}"
        );
    }
}

/// Compares `actual` with the snapshot `name`. With `UPDATE_SNAPSHOTS` set, a snapshot that
/// differs (or is missing) is rewritten and the test still fails, naming it: a run passes only
/// when every snapshot already matched, so the variable can never turn a changed output into a
/// pass (re-run without it after reviewing the diff).
fn check_snapshot(name: &str, actual: &str) {
    let path = manifest_dir().join("tests/snapshots").join(name);
    let expected = std::fs::read_to_string(&path).ok();
    if expected.as_deref() == Some(actual) {
        return;
    }
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        panic!("{name} rewritten: review `git diff tests/snapshots`, then run again without UPDATE_SNAPSHOTS");
    }
    let expected =
        expected.unwrap_or_else(|| panic!("missing snapshot {name}: run with UPDATE_SNAPSHOTS=1"));
    assert_eq!(
        expected, actual,
        "{name} changed; if deliberately, run with UPDATE_SNAPSHOTS=1 and review the diff"
    );
}

fn report_synthetic(args: &[&str]) -> std::process::Output {
    concur()
        .current_dir(manifest_dir())
        .args([
            "report",
            "tests/data/new.jsonl",
            "--baseline",
            "tests/data/base.jsonl",
        ])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn terminal_and_markdown_snapshots() {
    let table = report_synthetic(&[]);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    check_snapshot("report.txt", &String::from_utf8_lossy(&table.stdout));
    let md = report_synthetic(&["--format", "markdown"]);
    assert!(md.status.success());
    check_snapshot("report.md", &String::from_utf8_lossy(&md.stdout));
}

#[test]
fn baseline_finds_the_improved_the_regressed_and_the_unchanged() {
    let out = report_synthetic(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let verdict = |cell: &str| {
        text.lines()
            .find(|l| l.contains(cell) && l.contains("%"))
            .unwrap_or_else(|| panic!("no row for {cell}: {text}"))
            .split_whitespace()
            .last()
            .unwrap()
            .to_string()
    };
    assert_eq!(verdict("seq ×4"), "~");
    assert_eq!(verdict("thread ×4"), "improved");
    assert_eq!(verdict("pool:2 ×4"), "regressed");
    assert!(
        text.contains("1 improved, 1 regressed, 1 unchanged"),
        "{text}"
    );
    let geo = text
        .lines()
        .find(|l| l.contains("geometric mean of 3 cells"))
        .expect("geometric-mean row");
    // (0.7 × 1.3 × 1.0)^(1/3) - 1 = -3.1%.
    assert!(geo.contains("-3.1%"), "{geo}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("another machine"), "{stderr}");

    // The same in HTML, with the verdicts marked.
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("cmp.html");
    let out = report_synthetic(&["--html", html.to_str().unwrap()]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<td class=\"improved\">improved</td>"));
    assert!(html.contains("<td class=\"regressed\">regressed</td>"));
    assert_eq!(
        embedded_data(&html)["comparison"]["changes"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn baseline_from_another_machine_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(manifest_dir().join("tests/data/base.jsonl")).unwrap();
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, base.replace("Synthetic CPU", "Another CPU")).unwrap();
    let out = concur()
        .arg("report")
        .arg(manifest_dir().join("tests/data/new.jsonl"))
        .arg("--baseline")
        .arg(&other)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("another machine") && stderr.contains("Another CPU"),
        "{stderr}"
    );
}

#[test]
fn baselines_are_saved_by_name_and_bad_names_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let new = manifest_dir().join("tests/data/new.jsonl");
    concur()
        .current_dir(dir.path())
        .arg("report")
        .arg(&new)
        .args(["--save-baseline", "before", "-q"])
        .assert()
        .success();
    let saved = dir.path().join("concur-results/baselines/before.jsonl");
    assert_eq!(read_lines(&saved).len(), 16 + 3, "meta, runs and cells");
    let out = concur()
        .current_dir(dir.path())
        .arg("report")
        .arg(&new)
        .args(["--baseline", "before"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0 improved, 0 regressed, 3 unchanged"),
        "{text}"
    );
    for (flag, value) in [("--baseline", "nope"), ("--save-baseline", "../up")] {
        let out = concur()
            .current_dir(dir.path())
            .arg("report")
            .arg(&new)
            .args([flag, value])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(value), "{err}");
    }
}

#[test]
fn advise_runs_the_cells_and_explains() {
    let (_dir, json) = results_path();
    let out = concur()
        .args([
            "advise",
            "-w",
            "fib:20",
            "-n",
            "4",
            "-r",
            "2",
            "-q",
            "--results",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\nadvice\n"), "{text}");
    assert!(
        text.contains("CPU-bound") && text.contains("won in"),
        "{text}"
    );
    let lines = read_lines(&json);
    let models: std::collections::BTreeSet<String> = of_type(&lines, "cell")
        .iter()
        .map(|c| c["model"].as_str().unwrap().to_string())
        .collect();
    for m in ["seq", "thread", "fork", "async:4"] {
        assert!(models.contains(m), "{models:?}");
    }
    assert!(models.iter().any(|m| m.starts_with("pool:")));

    let html = json.with_extension("html");
    let out = concur()
        .args([
            "advise",
            "-w",
            "sleep:20ms",
            "-n",
            "8",
            "-r",
            "2",
            "-q",
            "--results",
        ])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sleep:20ms mostly waits"), "{text}");
    // Tasks that wait get a latency histogram per cell (5 cells), between the latency chart
    // and the timelines.
    let html = std::fs::read_to_string(html).unwrap();
    let from = html.find("data-kind=\"latency\"").unwrap();
    let to = html.find("data-kind=\"timeline\"").unwrap();
    let part = &html[from..to];
    assert!(part.contains("Distribution of task latency"));
    assert_eq!(part.matches("<svg").count(), 1 + 5);
}

#[test]
fn run_saves_and_compares_baselines() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        concur()
            .current_dir(dir.path())
            .args([
                "run", "-w", "fib:20", "-m", "seq", "-m", "pool:2", "-n", "4", "-r", "3",
                "--warmup", "0", "-q", "--json", "r.jsonl",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(run(&["--save-baseline", "first"]).status.success());
    assert!(dir
        .path()
        .join("concur-results/baselines/first.jsonl")
        .is_file());
    let out = run(&["--baseline", "first", "--markdown", "r.md"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("against baseline 'first':"), "{text}");
    assert!(text.contains("geometric mean of 2 cells"), "{text}");
    let md = std::fs::read_to_string(dir.path().join("r.md")).unwrap();
    assert!(
        md.contains("### Baseline") && md.contains("### Advice"),
        "{md}"
    );
    // A missing baseline is refused before anything runs.
    let out = run(&["--baseline", "missing"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Runs the quick tour with `--html` and checks its report's text: every chart kind, in
/// order, in each of its groups. Returns (dir, html path, html text).
fn tour_report() -> (tempfile::TempDir, PathBuf, String) {
    let (dir, json) = results_path();
    let html = dir.path().join("tour.html");
    concur()
        .args(["run", "--quick", "-r", "1", "--warmup", "0", "-q", "--json"])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .assert()
        .success();
    let text = std::fs::read_to_string(&html).unwrap();
    let (groups, cells) = tour_groups();
    check_groups_by_content(&text, &groups);
    // The mailer's `thread ×10000` (seconds) would flatten its 100-task rows (about 100 ms):
    // its timeline has an axis of its own, the others share theirs.
    let mailer = text
        .split("<section class=\"group\"")
        .find(|s| s.contains("<h2>mailer"))
        .expect("the mailer's group");
    let ends: Vec<(&str, u64)> = mailer
        .split("<div class=\"tl\" data-cell=\"")
        .skip(1)
        .map(|d| {
            let cell = &d[..d.find('"').unwrap()];
            (cell, attr(d, "data-axis-end-us").parse().unwrap())
        })
        .collect();
    let (big, rest): (Vec<_>, Vec<_>) = ends.iter().partition(|(c, _)| *c == "thread ×10000");
    assert_eq!(big.len(), 1, "{ends:?}");
    assert_eq!(rest.len(), 10, "{ends:?}");
    assert!(
        rest.iter()
            .all(|&&(_, e)| e == rest[0].1 && e * 5 <= big[0].1),
        "{ends:?}"
    );
    assert!(
        mailer.contains("thread ×10000 would flatten the rest, so it is drawn on its own axis"),
        "the caption says so"
    );
    // One run a cell (`-r 1 --warmup 0`), every cell of the plan.
    let data = embedded_data(&text);
    assert_eq!(data["cells"].as_array().unwrap().len(), cells);
    assert_eq!(data["runs"].as_array().unwrap().len(), cells);
    (dir, html, text)
}

/// The quick tour's groups as its plan makes them (`concur::plan::presets`, what `concur run`
/// runs with no study named): each group's title and its cells' labels; and the cell count.
fn tour_groups() -> (Vec<(String, Vec<String>)>, usize) {
    let options = concur::StudyOptions {
        quick: true,
        ..Default::default()
    };
    let tour = concur::plan::presets::preset(concur::plan::presets::TOUR, &options, false)
        .expect("the tour's plan");
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for c in &tour.cells {
        let lock = if c.gil {
            "with --gil (emulated interpreter lock)"
        } else {
            "no interpreter lock"
        };
        let title = format!("{} · {} · {lock}", c.study, c.workload);
        let label = format!("{} ×{}", c.model, c.tasks);
        match groups.iter_mut().find(|(t, _)| *t == title) {
            Some((_, cells)) => cells.push(label),
            None => groups.push((title, vec![label])),
        }
    }
    (groups, tour.cells.len())
}

#[test]
fn quick_tour_report_has_every_chart_per_group() {
    tour_report();
}

#[test]
#[ignore = "full tier: needs chromium"]
fn the_quick_tour_report_parses_in_chromium() {
    common::require(&[common::Need::Chromium]);
    let (_dir, html, text) = tour_report();
    let dom = chromium(BROWSER, &["--dump-dom"], &html);
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    // What the browser built: the same groups, every bar of every chart labelled by its cell.
    check_groups_by_content(&dom_text, &tour_groups().0);
    assert_eq!(
        dom_text.matches("<svg").count(),
        text.matches("<svg").count(),
        "every chart parsed"
    );
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(!log.lines().any(|l| l.contains("CONSOLE")), "{log}");
}

#[test]
#[ignore = "full tier: needs chromium"]
fn chromium_draws_the_timeline_with_a_row_per_worker() {
    common::require(&[common::Need::Chromium]);
    let (_dir, _json, html, _text) = pool_and_async();
    let dom = chromium(BROWSER, &["--dump-dom"], &html);
    let text = String::from_utf8_lossy(&dom.stdout);
    // What the browser built from the page: the timeline's element, its lanes, its bars.
    for (cell, kind) in [("pool:4 ×40", "worker"), ("async:4 ×40", "slot")] {
        let (tag, svg) = timeline_of(&text, cell);
        assert_eq!(attr(tag, "data-lanes"), "4", "{tag}");
        assert_eq!(svg.matches("<g class=\"lane\"").count(), 4, "{svg}");
        for lane in 0..4 {
            assert!(svg.contains(&format!("<title>{kind} {lane}: ")), "{svg}");
        }
        assert_eq!(drawn_tasks(svg), (0..40).collect::<Vec<_>>(), "{cell}");
    }
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !log.lines()
            .any(|l| l.contains("CONSOLE") || l.contains("Uncaught")),
        "console errors: {log}"
    );
}

#[test]
#[ignore = "full tier: needs chromium and redis-server"]
fn chromium_draws_a_run_over_two_hosts_with_each_lane_named_by_its_agent() {
    common::require(&[common::Need::Chromium, common::Need::Redis]);
    let mut hub = common::hub::Hub::start(None);
    let url = hub.url();
    hub.agent("h1", &[]);
    hub.agent("h2", &[]);
    common::wait_for_agents(&url, &["h1", "h2"]);
    let (_dir, _json, html, _page) = run_with_html(&[
        "-w",
        "sleep:5ms",
        "-m",
        "pool:4",
        "-n",
        "40",
        "--hub",
        &url,
        "--hosts",
        "2",
    ]);
    let dom = chromium(BROWSER, &["--dump-dom"], &html);
    let text = String::from_utf8_lossy(&dom.stdout);
    let (tag, svg) = timeline_of(&text, "pool:4 @2 hosts ×40");
    let titles: Vec<&str> = svg
        .split("<title>")
        .skip(1)
        .map(|t| t.split(':').next().unwrap())
        .collect();
    // W is each host's (`pool:4` on 2 hosts is 8 workers): each host's four, on rows of their
    // own named by the agent.
    assert_eq!(attr(tag, "data-lanes"), "8", "{titles:?}");
    for host in ["h1", "h2"] {
        assert_eq!(
            svg.matches(&format!(" data-host=\"{host}\"")).count(),
            4,
            "{svg}"
        );
        for worker in 0..4 {
            assert!(
                svg.contains(&format!("<title>host {host} worker {worker}: ")),
                "{svg}"
            );
        }
    }
    assert_eq!(drawn_tasks(svg), (0..40).collect::<Vec<_>>());
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !log.lines()
            .any(|l| l.contains("CONSOLE") || l.contains("Uncaught")),
        "console errors: {log}"
    );
}

#[test]
#[ignore = "full tier: needs chromium"]
fn chromium_draws_phase_coloured_bars_and_their_legend() {
    common::require(&[common::Need::Chromium]);
    let (_dir, _json, html, page) = phased();
    let dom = chromium(BROWSER, &["--dump-dom"], &html);
    let text = String::from_utf8_lossy(&dom.stdout);
    // What the browser built: every phase rectangle of the page, with its colour, and the
    // legend's swatches.
    assert_eq!(
        text.matches("<rect class=\"phase\"").count(),
        page.matches("<rect class=\"phase\"").count()
    );
    let (_, svg) = timeline_of(&text, "curl:2 ×4");
    assert!(drawn_phases(svg).iter().any(|(k, _)| k == "read"), "{svg}");
    assert!(
        svg.contains("fill=\"#009e73\"") || svg.contains("fill=\"#009E73\""),
        "read's green: {svg}"
    );
    let legend = timeline_legend(&text);
    assert!(legend.contains("</span>body read"), "{legend}");
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !log.lines()
            .any(|l| l.contains("CONSOLE") || l.contains("Uncaught")),
        "console errors: {log}"
    );
}

#[test]
fn the_regression_gate_fails_a_report_with_a_regressed_cell_after_writing_everything() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("summary.md");
    let out = report_synthetic(&[
        "--fail-on-regression",
        "--export",
        &format!("markdown={}", md.display()),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let err = err
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect::<Vec<_>>();
    assert_eq!(err.len(), 1, "{err:?}");
    let err = err[0];
    assert!(
        err.contains("1 of 3 cells regressed against baseline 'tests/data/base.jsonl'")
            && err.contains("pool:2 ×4 (+30.0%)")
            && err.contains("--fail-on-regression"),
        "{err}"
    );
    // Everything was still shown and written: the table, and the Markdown for a CI summary.
    assert!(String::from_utf8_lossy(&out.stdout).contains("geometric mean of 3 cells"));
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("| regressed |") && md.contains("geometric mean"),
        "{md}"
    );
    // The same results against themselves: nothing regressed, exit 0.
    let out = concur()
        .current_dir(manifest_dir())
        .args([
            "report",
            "tests/data/new.jsonl",
            "--baseline",
            "tests/data/new.jsonl",
        ])
        .args(["--fail-on-regression", "-q"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without a baseline the gate has nothing to judge: refused.
    let out = concur()
        .current_dir(manifest_dir())
        .args(["report", "tests/data/new.jsonl", "--fail-on-regression"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_regression_gate_fails_a_run_slower_than_its_baseline() {
    // One workload spec, two speeds: the shell reads the sleep from the environment.
    let dir = tempfile::tempdir().unwrap();
    let run = |secs: &str, extra: &[&str]| {
        concur()
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
                "-n", "1", "-r", "5", "--warmup", "0", "-q", "--json", "r.jsonl",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    // The speeds are far apart (60×), so that a loaded machine cannot blur them: each run's
    // wall holds a shell's start, which took over 0.25 s under CI's load (a 25× gap once let
    // three of five fast runs overlap the slow ones, and the gate rightly saw no significance).
    // Five runs a side let two overlaps pass; the heaviest tests wait while this one runs.
    let _alone = alone();
    assert!(run("0.01", &["--save-baseline", "fast"]).status.success());
    let out = run(
        "0.6",
        &[
            "--baseline",
            "fast",
            "--fail-on-regression",
            "--save-baseline",
            "slow",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("regressed against baseline 'fast'"), "{err}");
    // Faster than its baseline: improved, not regressed, so the gate lets it through.
    let out = run("0.01", &["--baseline", "slow", "--fail-on-regression"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
