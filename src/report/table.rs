//! The terminal table: one table per (study, workload, lock), failures as footnotes.

use comfy_table::{presets, CellAlignment, ContentArrangement, Table, TableComponent};

use super::{columns, footnotes, groups, machine_line, Exporter, FormatEntry, Report};
use crate::analysis::results::Machine;
use crate::analysis::Analysis;

/// A terminal table in the house style: horizontal rules only, every column but the first
/// right-aligned. Control characters in a cell (an agent's name, a results file from
/// elsewhere) are shown escaped, before the columns are measured.
pub fn styled(headers: &[&str], rows: Vec<Vec<String>>) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY)
        .remove_style(TableComponent::HorizontalLines)
        .remove_style(TableComponent::MiddleIntersections)
        .remove_style(TableComponent::LeftBorderIntersections)
        .remove_style(TableComponent::RightBorderIntersections)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.to_vec());
    for r in rows {
        t.add_row(
            r.iter()
                .map(|c| crate::os::terminal::escape_controls(c).into_owned())
                .collect::<Vec<_>>(),
        );
    }
    for i in 1..headers.len() {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// Renders every group as a terminal table.
pub fn render(a: &Analysis, machine: Option<&Machine>) -> String {
    let mut out = String::new();
    if let Some(m) = machine {
        out.push_str(&format!("machine: {}\n", machine_line(m)));
    }
    for g in groups(a) {
        let (headers, row) = columns(&g);
        let t = styled(headers, g.cells.iter().map(|c| row(c)).collect());
        out.push_str(&format!("\n{}\n{t}\n", g.title));
        for f in footnotes(&g) {
            out.push_str(&format!("  ! {f}\n"));
        }
    }
    out
}

/// The `table` format: the tables, then the comparison with a baseline and the advice.
pub(super) const FORMAT: FormatEntry = FormatEntry {
    name: "table",
    help: "terminal tables grouped by workload, with the advice (the default)",
    stdout: true,
    exporter: &TableExporter,
};

struct TableExporter;

impl Exporter for TableExporter {
    fn render(&self, r: &Report) -> String {
        let text = render(r.analysis, Some(&r.meta.machine)) + &super::extras_text(r);
        // Whatever a cell did not already escape (a title, a note) is escaped here.
        crate::os::terminal::escape_controls_but_newlines(&text).into_owned()
    }
}
