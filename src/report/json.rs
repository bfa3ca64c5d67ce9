//! The `json` format: the study's verdict as one JSON document (the meta line, the cells, the
//! comparison with a baseline, the advice and the warnings), for scripts; `concur advise
//! --json` writes it. The run-by-run results file is the JSON Lines one (`--json` on `run`).

use super::{Exporter, FormatEntry, Report};

/// The `json` format.
pub(super) const FORMAT: FormatEntry = FormatEntry {
    name: "json",
    help: "one JSON document: meta, cells, comparison, advice, warnings",
    stdout: true,
    exporter: &JsonExporter,
};

struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, r: &Report) -> String {
        let doc = serde_json::json!({
            "schema": crate::analysis::results::SCHEMA,
            "meta": super::masked_meta(r.meta),
            "cells": r.analysis.cells,
            "comparison": r.comparison,
            "advice": r.advice,
            "warnings": r.analysis.warnings,
        });
        // Serializing plain data cannot fail; an empty document would say so if it did.
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        // The same values, with no raw C1 control or bidirectional override for a terminal.
        crate::os::terminal::escape_json_controls(&text).into_owned() + "\n"
    }
}
