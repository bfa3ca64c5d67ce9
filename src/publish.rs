//! Publishing an analysed study: the comparison with a baseline, the advice, every rendering
//! through the [`ExportManager`], the saved baseline, the warnings on stderr, and the exit
//! status the results call for. `concur run`, `report` and `advise` all end here.

use std::path::{Path, PathBuf};

use crate::analysis::results::{Line, Meta, ResultsFile, ResultsWriter, RunResult, RunStatus};
use crate::analysis::{advice, compare, results, Analysis};
use crate::error::Result;
use crate::output::Terminal;
use crate::report::{Export, ExportManager, Report};

/// Where and how results are shown and saved.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// The JSON Lines results file (`-` for stdout); `None` picks `concur-results/STUDY-TIME.jsonl`.
    pub results: Option<PathBuf>,
    /// The renderings asked for (`--csv`, `--export`...), to files or to stdout (`-`).
    pub exports: Vec<Export>,
    /// What stdout shows when no export and no results file goes there (`--format`); `None`:
    /// nothing.
    pub stdout_format: Option<String>,
    /// Compare with this baseline: a saved name or a results file.
    pub baseline: Option<String>,
    /// Save the results as a baseline of this name.
    pub save_baseline: Option<String>,
    /// No progress bar, notes or warnings on stderr.
    pub quiet: bool,
    /// Accept failed runs and tasks: exit 0 all the same (`-i`, as hyperfine's).
    pub ignore_failures: bool,
    /// Exit 1 when a cell compared with the baseline regressed (`--fail-on-regression`), after
    /// everything is written and shown.
    pub fail_on_regression: bool,
}

/// The outputs, checked before any work: the renderings' files are open, the baseline is read.
pub struct Prepared {
    exports: ExportManager,
    baseline: Option<(String, ResultsFile)>,
}

/// Checks every output before any work: renderings (at most one on stdout, files creatable),
/// the name to save a baseline under, the baseline to compare with.
pub fn prepare(out: &Outputs) -> Result<Prepared> {
    if out.fail_on_regression && out.baseline.is_none() {
        return Err(crate::Error::usage(
            "--fail-on-regression needs --baseline NAME|FILE: there is nothing to regress against",
        ));
    }
    if let Some(name) = &out.save_baseline {
        compare::baseline_path(name)?;
    }
    if let Some(p) = out
        .results
        .as_deref()
        .filter(|p| *p != std::path::Path::new("-"))
    {
        crate::files::check_output("--json", p)?;
    }
    let exports = ExportManager::open(
        &out.exports,
        out.stdout_format.as_deref(),
        out.results.as_deref(),
    )?;
    let baseline = match &out.baseline {
        Some(spec) => {
            let path = compare::resolve_baseline(spec)?;
            Some((spec.clone(), read_results(&path, out.quiet)?))
        }
        None => None,
    };
    Ok(Prepared { exports, baseline })
}

/// Reads a results file to render or compare with, saying on stderr (as a warning, which
/// `--quiet` silences) when its cut last line was left out.
pub fn read_results(path: &Path, quiet: bool) -> Result<ResultsFile> {
    let file = results::read_results(path)?;
    if let Some(cut) = &file.cut {
        Terminal::after(quiet).warning(cut);
    }
    Ok(file)
}

/// What a study concludes beyond its cells: the comparison with a baseline, and the advice.
#[derive(Debug, Clone)]
pub struct Conclusion {
    /// The comparison with the baseline, if one was named.
    pub comparison: Option<compare::Comparison>,
    /// The advice per group of cells.
    pub advice: Vec<advice::Advice>,
}

/// Compares with the baseline (if any), advises, writes every rendering, saves the baseline
/// and prints the warnings; returns the comparison and the advice.
pub fn publish(
    a: &Analysis,
    meta: &Meta,
    runs: &[RunResult],
    prepared: Prepared,
    out: &Outputs,
) -> Result<Conclusion> {
    let comparison = prepared.baseline.map(|(label, b)| {
        compare::compare(
            &label,
            &b.runs,
            b.meta.as_ref().map(|m| &m.machine),
            runs,
            Some(&meta.machine),
        )
    });
    let advice = advice::advise(a);
    let report = Report {
        analysis: a,
        meta,
        runs,
        comparison: comparison.as_ref(),
        advice: &advice,
    };
    prepared.exports.write(&report)?;
    let terminal = Terminal::after(out.quiet);
    for w in &a.warnings {
        terminal.warning(w);
    }
    for w in comparison.iter().flat_map(|c| &c.warnings) {
        terminal.warning(w);
    }
    if let Some(name) = &out.save_baseline {
        save_baseline(name, a, meta, runs, out.quiet)?;
    }
    Ok(Conclusion { comparison, advice })
}

fn save_baseline(
    name: &str,
    a: &Analysis,
    meta: &Meta,
    runs: &[RunResult],
    quiet: bool,
) -> Result<()> {
    let path = compare::baseline_path(name)?;
    crate::files::create_default_dir(compare::BASELINE_DIR)?;
    let mut w = ResultsWriter::create("--save-baseline", &path)?;
    w.write(&Line::Meta(meta.clone()))?;
    for r in runs {
        w.write(&Line::Run(r.clone()))?;
    }
    for c in &a.cells {
        w.write(&Line::Cell(c.clone()))?;
    }
    Terminal::after(quiet).line(format_args!("baseline '{name}' saved: {}", path.display()));
    Ok(())
}

/// Counted runs that failed (a failed task, a crash, a timeout, a process that could not
/// start), leaving out the cells a study plans to fail.
pub fn failed_runs(runs: &[RunResult]) -> Vec<&RunResult> {
    runs.iter()
        .filter(|r| r.status != RunStatus::Ok && !r.traits.expected_failure)
        .collect()
}

/// The exit status the runs and their comparison call for: 1 when a counted run failed (unless
/// the user accepts failures) or, with `--fail-on-regression`, when a compared cell regressed,
/// saying which on stderr; else 0.
pub fn exit_status(
    runs: &[RunResult],
    comparison: Option<&compare::Comparison>,
    out: &Outputs,
) -> i32 {
    let failures = failure_status(runs, out);
    let regressions = match comparison.filter(|_| out.fail_on_regression) {
        Some(c) => regression_status(c, out),
        None => 0,
    };
    failures.max(regressions)
}

/// 1 when any compared cell regressed, with one line naming them.
fn regression_status(c: &compare::Comparison, out: &Outputs) -> i32 {
    let regressed: Vec<String> = c
        .changes
        .iter()
        .filter(|x| x.verdict == compare::Verdict::Regressed)
        .map(|x| format!("{} ({})", compare::cell_name(&x.key), compare::pct(x.ratio)))
        .collect();
    if regressed.is_empty() {
        return 0;
    }
    Terminal::after(out.quiet).error(format_args!(
        "{} of {} cells regressed against baseline '{}': {}; exit status 1 (--fail-on-regression)",
        regressed.len(),
        c.changes.len(),
        c.baseline,
        regressed.join(", ")
    ));
    1
}

fn failure_status(runs: &[RunResult], out: &Outputs) -> i32 {
    let failed = failed_runs(runs);
    let Some(first) = failed.first() else {
        return 0;
    };
    if out.ignore_failures {
        return 0;
    }
    Terminal::after(out.quiet).error(format_args!(
        "{} of {} runs failed (first: {} {}: {}); exit status 1 (-i/--ignore-failures accepts failures)",
        failed.len(),
        runs.len(),
        first.key.workload,
        first.key.label(),
        first.error.as_deref().unwrap_or("failed tasks")
    ));
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::runner::mock::{mock_plan, MockEnd, MockExecutor};

    #[test]
    fn failures_a_study_plans_do_not_count_and_others_do_unless_ignored() {
        let plan = mock_plan(&["fib:1"], &["seq", "thread"], &[2], 1);
        let runs = MockExecutor::new(2)
            .failing("thread", MockEnd::Crash)
            .runs(&plan);
        let (ok, failed) = (runs[0].clone(), runs[1].clone());
        assert_eq!(
            (ok.status, failed.status),
            (RunStatus::Ok, RunStatus::Crashed)
        );
        let mut planned = failed.clone();
        planned.traits.expected_failure = true;
        let quiet = Outputs {
            quiet: true,
            ..Outputs::default()
        };
        assert_eq!(exit_status(&[ok.clone(), planned.clone()], None, &quiet), 0);
        assert_eq!(
            exit_status(&[ok.clone(), planned.clone(), failed.clone()], None, &quiet),
            1
        );
        assert_eq!(failed_runs(&[ok, planned, failed.clone()]), vec![&failed]);
        let ignoring = Outputs {
            ignore_failures: true,
            ..quiet
        };
        assert_eq!(exit_status(&[failed], None, &ignoring), 0);
    }

    #[test]
    fn a_regressed_cell_fails_only_when_asked_and_others_never() {
        let plan = mock_plan(&["fib:1"], &["seq"], &[2], 1);
        let runs = MockExecutor::new(2).runs(&plan);
        let change = |verdict| compare::CellChange {
            key: runs[0].key.clone(),
            base_median_s: 1.0,
            new_median_s: 1.5,
            ratio: 1.5,
            p: 0.01,
            runs: (5, 5),
            verdict,
        };
        let comparison = |verdicts: &[compare::Verdict]| compare::Comparison {
            baseline: "main".into(),
            changes: verdicts.iter().map(|v| change(*v)).collect(),
            ..Default::default()
        };
        let gate = Outputs {
            quiet: true,
            fail_on_regression: true,
            ..Outputs::default()
        };
        let no_gate = Outputs {
            fail_on_regression: false,
            ..gate.clone()
        };
        use compare::Verdict::*;
        let regressed = comparison(&[Unchanged, Regressed]);
        assert_eq!(exit_status(&runs, Some(&regressed), &gate), 1);
        assert_eq!(exit_status(&runs, Some(&regressed), &no_gate), 0);
        for fine in [comparison(&[Unchanged, Improved]), comparison(&[])] {
            assert_eq!(exit_status(&runs, Some(&fine), &gate), 0);
        }
        assert_eq!(exit_status(&runs, None, &gate), 0);
    }
}
