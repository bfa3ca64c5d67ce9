//! Reports: the renderings of an analysed study (terminal table, Markdown, CSV, Ruby's
//! `Benchmark` lines, a JSON summary, one self-contained HTML file), each an [`Exporter`]
//! registered in [`FORMATS`] and written through the [`ExportManager`]. Every rendering draws
//! on one [`Report`]: the cells, the runs, the meta line, the comparison and the advice.

pub mod charts;
pub mod csv;
pub mod export;
pub mod hosts;
pub mod html;
pub mod json;
pub mod markdown;
pub mod publish;
pub mod ruby;
pub mod table;
pub mod timeline;
pub mod trace;

pub use export::{Export, ExportManager, Exporter, FormatEntry, Target};

use crate::analysis::advice::Advice;
use crate::analysis::compare::Comparison;
use crate::analysis::results::{CellResult, Machine, Meta, RunResult};
use crate::analysis::{advice, compare, Analysis};
pub use crate::analysis::{groups, Group};
use crate::base::units::{fmt_kib, fmt_secs};

/// Column headers of the cell tables (terminal and Markdown).
pub const HEADERS: &[&str] = &[
    "model", "tasks", "wall", "±95%", "user", "sys", "peak RSS", "tree PSS", "speedup", "effic.",
    "vs ideal", "failed",
];

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// One table row per cell, as text.
pub fn row(c: &CellResult) -> Vec<String> {
    let ci = match (c.wall_ci95_s, c.wall_median_s) {
        (Some([lo, hi]), Some(m)) if m > 0.0 => {
            format!("±{:.1}%", 100.0 * (hi - m).max(m - lo) / m)
        }
        _ => "-".into(),
    };
    vec![
        c.key.model_label(),
        c.key.tasks.to_string(),
        opt(c.wall_median_s, fmt_secs),
        ci,
        opt(c.user_median_s, fmt_secs),
        opt(c.sys_median_s, fmt_secs),
        c.max_rss_kib.map(fmt_kib).unwrap_or_else(|| "-".into()),
        c.tree_pss_kib.map(fmt_kib).unwrap_or_else(|| "-".into()),
        opt(c.speedup, |s| format!("{s:.2}×")),
        opt(c.efficiency, |e| format!("{:.0}%", e * 100.0)),
        opt(c.vs_ideal, |v| format!("{v:.2}")),
        if c.runs_failed == 0 {
            String::new()
        } else {
            format!("{}/{} runs", c.runs_failed, c.runs)
        },
    ]
}

/// Column headers of tables of HTTP cells: throughput, latency and errors instead of CPU.
pub const HTTP_HEADERS: &[&str] = &[
    "model",
    "tasks",
    "wall",
    "±95%",
    "req/s",
    "p50",
    "p99",
    "max",
    "errors",
    "conns new/kept",
    "TLS p50",
    "server peak",
    "tree PSS",
    "ideal",
    "vs ideal",
];

fn fmt_us(us: u64) -> String {
    fmt_secs(us as f64 / 1e6)
}

/// One row of an HTTP table.
pub fn http_row(c: &CellResult) -> Vec<String> {
    let base = row(c);
    let lat = |f: fn(&crate::measure::latency::LatencySummary) -> u64| {
        c.latency_us
            .as_ref()
            .map(|l| fmt_us(f(l)))
            .unwrap_or_else(|| "-".into())
    };
    let errors = c
        .failures
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        base[0].clone(),
        base[1].clone(),
        base[2].clone(),
        base[3].clone(),
        opt(c.tasks_per_s, |r| format!("{r:.0}")),
        lat(|l| l.p50),
        lat(|l| l.p99),
        lat(|l| l.max),
        errors,
        // Connections opened / requests on kept ones: with `--no-keepalive` every request
        // opens one; `-` when the client could not tell (tasks in other processes).
        match (c.conn.connections_opened, c.conn.connections_reused) {
            (Some(o), Some(r)) => format!("{o}/{r}"),
            _ => "-".into(),
        },
        c.conn
            .tls_us
            .as_ref()
            .map(|l| fmt_us(l.p50))
            .unwrap_or_else(|| "-".into()),
        c.server_peak_in_flight
            .map(|p| p.to_string())
            .unwrap_or_else(|| "-".into()),
        base[7].clone(),
        opt(c.ideal_s, fmt_secs),
        base[10].clone(),
    ]
}

/// Column headers of tables of open-model cells (`--rate`): the asked and achieved rates,
/// latency from the scheduled time (corrected for coordinated omission), service, queue, the
/// dispatcher's lag, CPU per task, and whether the cell kept up.
pub const OPEN_HEADERS: &[&str] = &[
    "model",
    "tasks",
    "asked/s",
    "achieved/s",
    "p50",
    "p99",
    "service p99",
    "queue p99",
    "lag p99",
    "CPU/task",
    "tree PSS",
    "kept up",
    "failed",
];

/// The marker of an open-model cell whose achieved rate stayed below 99% of the asked one.
pub const BEHIND: &str = "BEHIND";

/// One row of an open-model table.
pub fn open_row(c: &CellResult) -> Vec<String> {
    let base = row(c);
    let Some(o) = &c.open else {
        return base;
    };
    let q = |l: &Option<crate::measure::latency::LatencySummary>,
             f: fn(&crate::measure::latency::LatencySummary) -> u64| {
        l.as_ref()
            .map(|l| fmt_us(f(l)))
            .unwrap_or_else(|| "-".into())
    };
    let asked = match (o.rate_ramp, &c.rate_search) {
        (Some([a, b]), _) => format!("{a:.0}..{b:.0}"),
        (None, Some(_)) => format!("{:.1} (auto)", o.rate_asked),
        (None, None) => format!("{:.1}", o.rate_asked),
    };
    // Released on ticks (`--grain`): said beside the rate, since it is in every latency.
    let asked = match o.grain_us {
        Some(g) => format!("{asked} @{}", fmt_us(g)),
        None => asked,
    };
    let cpu = match (c.user_median_s, c.sys_median_s) {
        (Some(u), Some(s)) if c.key.tasks > 0 => fmt_secs((u + s) / c.key.tasks as f64),
        _ => "-".into(),
    };
    vec![
        base[0].clone(),
        base[1].clone(),
        asked,
        opt(o.rate_achieved, |r| format!("{r:.1}")),
        q(&c.latency_us, |l| l.p50),
        q(&c.latency_us, |l| l.p99),
        q(&o.service_us, |l| l.p99),
        q(&o.queue_us, |l| l.p99),
        q(&o.lag_us, |l| l.p99),
        cpu,
        base[7].clone(),
        match (o.behind, o.rate_achieved) {
            (true, _) => BEHIND.into(),
            (false, Some(_)) => "yes".into(),
            (false, None) => "-".into(),
        },
        base[11].clone(),
    ]
}

/// Column headers of tables of waiting cells (`sleep:D`, the `tasks` study): the time to start
/// every task, how late the wake-ups came beside what the kernel's slack alone would make them
/// ([`crate::measure::slack`]), CPU, and memory per task.
pub const WAIT_HEADERS: &[&str] = &[
    "model",
    "tasks",
    "wall",
    "start all",
    "late p50",
    "late p99",
    "late max",
    "slack",
    "user",
    "sys",
    "peak RSS",
    "tree PSS",
    "PSS/task",
    "failed",
];

/// One row of a table of waiting cells.
pub fn wait_row(c: &CellResult) -> Vec<String> {
    let base = row(c);
    let late = |f: fn(&crate::measure::latency::LatencySummary) -> u64| {
        c.wakeups
            .as_ref()
            .map(|w| fmt_us(f(&w.late_us)))
            .unwrap_or_else(|| "-".into())
    };
    vec![
        base[0].clone(),
        base[1].clone(),
        base[2].clone(),
        opt(c.wakeups.map(|w| w.start_all_s), fmt_secs),
        late(|l| l.p50),
        late(|l| l.p99),
        late(|l| l.max),
        opt(
            c.wakeups.and_then(|w| w.slack).map(|s| s.ns as f64 / 1e9),
            fmt_secs,
        ),
        base[4].clone(),
        base[5].clone(),
        base[6].clone(),
        base[7].clone(),
        opt(c.pss_per_task_b, crate::base::units::fmt_bytes_signed),
        base[11].clone(),
    ]
}

/// Builds one table row from a cell.
pub type RowFn = fn(&CellResult) -> Vec<String>;

/// The headers and row builder for a group: open-model tables for `--rate` cells, wake-up
/// tables for waiting cells, HTTP tables for http cells, CPU tables otherwise.
pub fn columns(g: &Group) -> (&'static [&'static str], RowFn) {
    if g.cells.iter().any(|c| c.open.is_some()) {
        (OPEN_HEADERS, open_row)
    } else if g.cells.iter().any(|c| c.wakeups.is_some()) {
        (WAIT_HEADERS, wait_row)
    } else if g.cells.iter().any(|c| c.traits.http) {
        (HTTP_HEADERS, http_row)
    } else {
        (HEADERS, row)
    }
}

/// Footnotes of a group: why its failed cells failed, and what the wall of each external
/// program is (the work it reported, or its whole process).
pub fn footnotes(g: &Group) -> Vec<String> {
    let mut notes: Vec<String> = g
        .cells
        .iter()
        .filter_map(|c| {
            c.error.as_ref().map(|e| {
                // A run's error may be an agent's answer: no control reaches a report.
                format!(
                    "{}: {}",
                    c.key.label(),
                    crate::os::terminal::escape_controls(e)
                )
            })
        })
        .collect();
    notes.extend(slack_note(g));
    let mut seen = std::collections::BTreeSet::new();
    for c in g.cells.iter().filter(|c| c.traits.external) {
        if !seen.insert(c.key.model.as_str()) {
            continue;
        }
        let startups: Vec<f64> = g
            .cells
            .iter()
            .filter(|o| o.key.model == c.key.model)
            .filter_map(|o| o.startup_median_s)
            .collect();
        notes.push(match crate::base::stats::median(&startups) {
            Some(s) => format!(
                "{}: external program; wall is the work it reported on its CONCUR line (its start-up and exit took {} more, which its CPU and memory include)",
                c.key.model,
                fmt_secs(s)
            ),
            None => format!(
                "{}: external program; wall is its whole process, start-up included (it printed no CONCUR line)",
                c.key.model
            ),
        });
    }
    notes
}

/// What the slack column of a group of waiting cells is: the rows by the primitive their
/// tasks wait in, and the rule that primitive's slack follows (`measure::slack`).
fn slack_note(g: &Group) -> Option<String> {
    let mut by: Vec<(String, Vec<&str>)> = Vec::new();
    for c in &g.cells {
        let Some(s) = c.wakeups.and_then(|w| w.slack) else {
            continue;
        };
        let rule = slack_rule(&s);
        let row = c.traits.family.as_str();
        match by.iter_mut().find(|(r, _)| *r == rule) {
            Some((_, rows)) if rows.contains(&row) => {}
            Some((_, rows)) => rows.push(row),
            None => by.push((rule, vec![row])),
        }
    }
    if by.is_empty() {
        return None;
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(rule, rows)| format!("{rule}: {}", rows.join(", ")))
        .collect();
    Some(format!(
        "slack: what the kernel may add to one wait, by what the row's tasks wait in: {}",
        parts.join("; ")
    ))
}

/// The rule one slack follows, in words (fs/select.c and the hrtimer slack, as
/// `measure::slack` computes them).
fn slack_rule(s: &crate::measure::slack::Slack) -> String {
    use crate::measure::slack::{Primitive, MAX_POLL_SLACK_NS};
    let what = match s.primitive {
        Primitive::Poll => "a poll timeout (epoll_wait)",
        Primitive::Nanosleep => "a nanosleep",
        Primitive::Futex => "a futex wait",
        Primitive::Timerfd => "a timerfd",
    };
    let timer = fmt_secs(s.timers.timer_slack_ns as f64 / 1e9);
    match (s.timers.realtime, s.primitive) {
        (true, _) => format!("{what}, none on a real-time thread"),
        (false, Primitive::Timerfd) => format!("{what}, none"),
        (false, Primitive::Poll) => format!(
            "{what}, {} of the wait, at least {timer}, at most {}",
            if s.timers.nice > 0 { "0.5%" } else { "0.1%" },
            fmt_secs(MAX_POLL_SLACK_NS as f64 / 1e9)
        ),
        (false, _) => format!("{what}, the timer slack ({timer})"),
    }
}

/// The meta line as the reports show it: its command line masked again
/// (`secret::mask_credentials`), for a results file written before credential headers
/// were masked, or by another program.
pub fn masked_meta(meta: &Meta) -> Meta {
    Meta {
        command: meta
            .command
            .iter()
            .map(|a| crate::base::secret::mask_credentials(a))
            .collect(),
        ..meta.clone()
    }
}

/// One line describing the machine.
pub fn machine_line(m: &Machine) -> String {
    format!(
        "{}, {} cores, Linux {}, {}{}",
        m.cpu,
        m.cores,
        m.kernel,
        m.cpu_busy
            .map(|b| format!("{:.0}% busy before start", b * 100.0))
            .unwrap_or_else(|| format!("load {:.2}", m.load1)),
        m.governor
            .as_ref()
            .map(|g| format!(", governor {g}"))
            .unwrap_or_default()
    )
}

/// Every output format. A new format is one file (an [`Exporter`]) plus one line here.
pub const FORMATS: &[FormatEntry] = &[
    table::FORMAT,
    markdown::FORMAT,
    csv::FORMAT,
    ruby::FORMAT,
    json::FORMAT,
    html::FORMAT,
    trace::FORMAT,
];

/// The names of every format, for help and errors.
pub fn format_names() -> Vec<&'static str> {
    FORMATS.iter().map(|f| f.name).collect()
}

/// The names of the formats that may go to stdout (`--format`).
pub fn stdout_format_names() -> Vec<&'static str> {
    FORMATS
        .iter()
        .filter(|f| f.stdout)
        .map(|f| f.name)
        .collect()
}

/// Everything the full reports draw on: the cells, the runs behind them (timelines, per-run
/// walls), the meta line, the comparison with a baseline and the advice.
#[derive(Clone, Copy)]
pub struct Report<'a> {
    /// Cells and warnings.
    pub analysis: &'a Analysis,
    /// The results file's meta line (the machine the runs were made on).
    pub meta: &'a Meta,
    /// Every counted run.
    pub runs: &'a [RunResult],
    /// The comparison with `--baseline`, if asked for.
    pub comparison: Option<&'a Comparison>,
    /// Advice per group.
    pub advice: &'a [Advice],
}

/// Wraps `text` at `width` columns, each line indented by `indent`.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Each host's part of runs over several hosts, the comparison with a baseline and the
/// advice, as text after the terminal tables.
pub fn extras_text(r: &Report) -> String {
    // Runs over several hosts: each host's part.
    let mut out = hosts::render(r.runs);
    if let Some(c) = r.comparison {
        let t = table::styled(compare::HEADERS, compare::rows(c));
        out.push_str(&format!("\n{}\n{t}\n", compare::summary_line(c)));
    }
    if !r.advice.is_empty() {
        out.push_str("\nadvice\n");
        for a in r.advice {
            out.push_str(&format!("\n{}\n", a.group));
            out.push_str(&wrap(&a.text, 100, "  "));
            if let Some(l) = advice::amdahl_line(&a.amdahl) {
                out.push_str(&wrap(&l, 100, "  "));
            }
        }
    }
    out
}

/// The comparison with a baseline and the advice, as Markdown sections.
pub fn extras_markdown(r: &Report) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let mut out = String::new();
    if let Some(c) = r.comparison {
        out.push_str(&format!(
            "\n### Baseline\n\n{}\n\n",
            esc(&compare::summary_line(c))
        ));
        out.push_str(&format!("| {} |\n", compare::HEADERS.join(" | ")));
        out.push_str("|---|---:|---:|---:|---:|---:|\n");
        for row in compare::rows(c) {
            let cells: Vec<String> = row.iter().map(|s| esc(s)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        for w in &c.warnings {
            out.push_str(&format!("\n- {}\n", esc(w)));
        }
    }
    if !r.advice.is_empty() {
        out.push_str("\n### Advice\n");
        for a in r.advice {
            out.push_str(&format!("\n**{}**: {}\n", esc(&a.group), esc(&a.text)));
            if let Some(l) = advice::amdahl_line(&a.amdahl) {
                out.push_str(&format!("\n{}\n", esc(&l)));
            }
        }
    }
    out
}
