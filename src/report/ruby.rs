//! The classic Ruby `Benchmark.bm` lines: `user system total (real)` per cell, medians.

use super::{groups, Exporter, FormatEntry, Report};
use crate::analysis::Analysis;

/// Renders every group as `Benchmark.bm` output.
pub fn render(a: &Analysis) -> String {
    let mut out = String::new();
    for g in groups(a) {
        let width = g
            .cells
            .iter()
            .map(|c| c.key.label().chars().count())
            .max()
            .unwrap_or(0)
            .max(8);
        out.push_str(&format!("{}\n", g.title));
        out.push_str(&format!(
            "{:width$}       user     system      total        real\n",
            ""
        ));
        for c in &g.cells {
            let label = c.key.label();
            let pad = width.saturating_sub(label.chars().count());
            match (c.user_median_s, c.sys_median_s, c.wall_median_s) {
                (Some(u), Some(s), Some(r)) => out.push_str(&format!(
                    "{label}{:pad$} {u:10.6} {s:10.6} {:10.6} ({r:10.6})\n",
                    "",
                    u + s
                )),
                _ => out.push_str(&format!(
                    "{label}{:pad$} failed: {}\n",
                    "",
                    c.error.as_deref().unwrap_or("no measured run")
                )),
            }
        }
        out.push('\n');
    }
    out
}

/// The `ruby` format: the classic `Benchmark.bm` lines.
pub(super) const FORMAT: FormatEntry = FormatEntry {
    name: "ruby",
    help: "the classic Ruby Benchmark lines: user system total (real)",
    stdout: true,
    exporter: &RubyExporter,
};

struct RubyExporter;

impl Exporter for RubyExporter {
    fn render(&self, r: &Report) -> String {
        crate::os::terminal::escape_controls_but_newlines(&render(r.analysis)).into_owned()
    }
}
