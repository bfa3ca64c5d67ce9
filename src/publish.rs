//! Publishing an analysed study: the comparison with a baseline, the advice, every rendering
//! through the [`ExportManager`], the saved baseline, the warnings on stderr, and the exit
//! status the results call for. `concur run`, `report` and `advise` all end here.

use std::path::PathBuf;

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
}

/// The outputs, checked before any work: the renderings' files are open, the baseline is read.
pub struct Prepared {
    exports: ExportManager,
    baseline: Option<(String, ResultsFile)>,
}

/// Checks every output before any work: renderings (at most one on stdout, files creatable),
/// the name to save a baseline under, the baseline to compare with.
pub fn prepare(out: &Outputs) -> Result<Prepared> {
    if let Some(name) = &out.save_baseline {
        compare::baseline_path(name)?;
    }
    let exports = ExportManager::open(
        &out.exports,
        out.stdout_format.as_deref(),
        out.results.as_deref(),
    )?;
    let baseline = match &out.baseline {
        Some(spec) => {
            let path = compare::resolve_baseline(spec)?;
            Some((spec.clone(), results::read_results(&path)?))
        }
        None => None,
    };
    Ok(Prepared { exports, baseline })
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
    let mut w = ResultsWriter::create(&path)?;
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

/// The exit status the runs call for: 0 when every counted run finished with no failed task
/// (or the user accepts failures), 1 otherwise, saying so on stderr.
pub fn exit_status(runs: &[RunResult], out: &Outputs) -> i32 {
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
        assert_eq!(exit_status(&[ok.clone(), planned.clone()], &quiet), 0);
        assert_eq!(
            exit_status(&[ok.clone(), planned.clone(), failed.clone()], &quiet),
            1
        );
        assert_eq!(failed_runs(&[ok, planned, failed.clone()]), vec![&failed]);
        let ignoring = Outputs {
            ignore_failures: true,
            ..quiet
        };
        assert_eq!(exit_status(&[failed], &ignoring), 0);
    }
}
