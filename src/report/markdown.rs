//! Markdown: one pipe table per (study, workload, lock), failures as a list below it.

use super::{columns, footnotes, groups, machine_line, Exporter, FormatEntry, Report};
use crate::analysis::results::Machine;
use crate::analysis::Analysis;

/// A table cell or list item: `|` escaped, and control characters (a line break would end the
/// row) shown as escapes.
fn escape(s: &str) -> String {
    crate::os::terminal::escape_controls(s).replace('|', "\\|")
}

/// Renders every group as a Markdown table, with the warnings at the end.
pub fn render(a: &Analysis, machine: Option<&Machine>) -> String {
    let mut out = String::new();
    if let Some(m) = machine {
        out.push_str(&format!("Machine: {}\n", machine_line(m)));
    }
    for g in groups(a) {
        let (headers, row) = columns(&g);
        out.push_str(&format!("\n### {}\n\n", g.title));
        out.push_str(&format!("| {} |\n", headers.join(" | ")));
        out.push_str(&format!(
            "|{}\n",
            headers
                .iter()
                .enumerate()
                .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
                .collect::<String>()
        ));
        for c in &g.cells {
            let cells: Vec<String> = row(c).iter().map(|s| escape(s)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        let notes = footnotes(&g);
        if !notes.is_empty() {
            out.push('\n');
            for f in notes {
                out.push_str(&format!("- {}\n", escape(&f)));
            }
        }
    }
    if !a.warnings.is_empty() {
        out.push_str("\nWarnings:\n\n");
        for w in &a.warnings {
            out.push_str(&format!("- {}\n", escape(&w.to_string())));
        }
    }
    out
}

/// The `markdown` format: the tables, then the comparison and the advice as sections.
pub(super) const FORMAT: FormatEntry = FormatEntry {
    name: "markdown",
    help: "Markdown tables, with the comparison and the advice",
    stdout: true,
    exporter: &MarkdownExporter,
};

struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn render(&self, r: &Report) -> String {
        let text = render(r.analysis, Some(&r.meta.machine)) + &super::extras_markdown(r);
        crate::os::terminal::escape_controls_but_newlines(&text).into_owned()
    }
}
