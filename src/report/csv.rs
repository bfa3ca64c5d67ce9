//! CSV: one row per cell with raw numbers (seconds, KiB), for spreadsheets and scripts.

use super::{Exporter, FormatEntry, Report};
use crate::analysis::Analysis;
use crate::os::terminal::escape_controls;

/// The CSV columns, in order.
pub const COLUMNS: &[&str] = &[
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
    // Added after the rest, so that columns read by position keep their place.
    "http2",
    // Over how many hosts (`--hosts`); empty for a cell of this machine alone.
    "hosts",
    // The tree's PSS when every task had started and at the run's end (medians; empty where
    // not sampled), and the memory per task the results file gives (bytes).
    "tree_pss_all_started_kib",
    "tree_pss_end_kib",
    "pss_per_task_b",
    // Added after the rest: the cell asked for HTTP/3.
    "http3",
];

/// A text cell as a spreadsheet cannot act on it: control and bidirectional characters
/// escaped (as every format escapes them), and a cell that a spreadsheet would read as a
/// formula (beginning with `=`, `+`, `-`, `@`, a tab or a carriage return) prefixed with a
/// `'`, OWASP's rule against CSV injection. Numbers are written by [`f`] and [`u`], never here.
fn text(v: &str) -> String {
    let v = escape_controls(v);
    if v.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{v}")
    } else {
        v.into_owned()
    }
}

fn f(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

fn u(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// Renders every cell as one CSV row, with a header row.
pub fn render(a: &Analysis) -> String {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let mut rows: Vec<Vec<String>> = vec![COLUMNS.iter().map(|s| s.to_string()).collect()];
    for c in &a.cells {
        rows.push(vec![
            text(&c.key.study),
            text(&c.key.workload),
            text(&c.key.model),
            c.workers.map(|w| w.to_string()).unwrap_or_default(),
            c.key.tasks.to_string(),
            c.key.gil.to_string(),
            c.runs.to_string(),
            c.runs_failed.to_string(),
            f(c.wall_median_s),
            f(c.wall_ci95_s.map(|c| c[0])),
            f(c.wall_ci95_s.map(|c| c[1])),
            f(c.wall_min_s),
            f(c.wall_max_s),
            f(c.wall_mean_s),
            f(c.wall_sd_s),
            f(c.user_median_s),
            f(c.sys_median_s),
            u(c.max_rss_kib),
            u(c.tree_pss_kib),
            f(c.speedup),
            f(c.efficiency),
            f(c.effective_cores),
            f(c.ideal_s),
            f(c.vs_ideal),
            u(c.bytes),
            text(c.error.as_deref().unwrap_or_default()),
            u(c.latency_us.map(|l| l.p50)),
            u(c.latency_us.map(|l| l.p99)),
            // Open-model cells only (`--rate`): empty for closed ones.
            f(c.open.as_ref().map(|o| o.rate_asked)),
            f(c.open.as_ref().and_then(|o| o.rate_achieved)),
            c.open
                .as_ref()
                .map(|o| o.behind.to_string())
                .unwrap_or_default(),
            u(c.open.as_ref().and_then(|o| o.service_us).map(|l| l.p99)),
            u(c.open.as_ref().and_then(|o| o.queue_us).map(|l| l.p99)),
            u(c.open.as_ref().and_then(|o| o.lag_us).map(|l| l.p99)),
            c.key.http2.to_string(),
            c.key.hosts.map(|k| k.to_string()).unwrap_or_default(),
            u(c.tree_pss_all_started_kib),
            u(c.tree_pss_end_kib),
            f(c.pss_per_task_b),
            c.key.http3.to_string(),
        ]);
    }
    for r in rows {
        // Writing into a Vec cannot fail.
        let _ = w.write_record(&r);
    }
    w.into_inner()
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

/// The `csv` format: one row per cell.
pub(super) const FORMAT: FormatEntry = FormatEntry {
    name: "csv",
    help: "CSV, one row per cell, raw numbers",
    stdout: true,
    exporter: &CsvExporter,
};

struct CsvExporter;

impl Exporter for CsvExporter {
    fn render(&self, r: &Report) -> String {
        render(r.analysis)
    }
}
