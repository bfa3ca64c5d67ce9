//! Publishing an analysed study: the comparison with a baseline, the advice, every rendering
//! through the [`ExportManager`], the saved baseline, the warnings on stderr, and the exit
//! status the results call for. `concur run`, `report` and `advise` all end here.

use std::path::PathBuf;

use crate::analysis::results::{Line, Meta, ResultsFile, ResultsWriter, RunResult, RunStatus};
use crate::analysis::{advice, compare, results, Analysis};
use crate::base::error::Result;
use crate::os::terminal::Terminal;
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
    /// Every warning on a line of its own (one line per kind otherwise), and warm-ups' live
    /// lines.
    pub verbose: bool,
    /// No live view on a terminal (`--no-live`): the progress bar instead.
    pub no_live: bool,
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
/// the name to save a baseline under, the baseline to compare with and, given the comparison
/// `planned`, that `--fail-on-regression` could fail at all ([`compare::check_gate`]); the
/// baseline is read and the gate checked before any file is opened, so a refusal leaves none.
pub fn prepare(out: &Outputs, planned: Option<&compare::Planned>) -> Result<Prepared> {
    if out.fail_on_regression && out.baseline.is_none() {
        return Err(crate::base::error::Error::flag(
            "--fail-on-regression",
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
        crate::os::files::check_output("--json", p)?;
    }
    let baseline = match &out.baseline {
        Some(spec) => {
            let path = compare::resolve_baseline(spec)?;
            Some((spec.clone(), results::read_results(&path)?))
        }
        None => None,
    };
    if let Some(planned) = planned {
        check_gate(out, baseline.as_ref(), planned)?;
    }
    if let Some((_, b)) = &baseline {
        warn_if_cut(b, out.quiet);
    }
    let exports = ExportManager::open(
        &out.exports,
        out.stdout_format.as_deref(),
        out.results.as_deref(),
    )?;
    Ok(Prepared { exports, baseline })
}

fn check_gate(
    out: &Outputs,
    baseline: Option<&(String, ResultsFile)>,
    planned: &compare::Planned,
) -> Result<()> {
    match baseline {
        Some((label, base)) if out.fail_on_regression => {
            compare::check_gate(label, &base.runs, planned)
        }
        _ => Ok(()),
    }
}

impl Prepared {
    /// With `--fail-on-regression`, refuses a comparison in which the gate could never fail
    /// ([`compare::check_gate`]); for a plan whose cells are known only once bound (a study
    /// over every agent of a hub, the classic programs' cells), called again then, before any
    /// run.
    pub fn check_gate(&self, out: &Outputs, planned: &compare::Planned) -> Result<()> {
        check_gate(out, self.baseline.as_ref(), planned)
    }
}

/// Says on stderr (as a warning, which `--quiet` silences) that the cut last line of a results
/// file read to render or compare with was left out.
pub fn warn_if_cut(file: &ResultsFile, quiet: bool) {
    if let Some(cut) = &file.cut {
        Terminal::after(quiet).warning(cut);
    }
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
    if out.verbose {
        for w in &a.warnings {
            terminal.warning(w);
        }
    } else {
        for w in crate::analysis::grouped(&a.warnings) {
            terminal.warning(w);
        }
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
    crate::os::files::create_default_dir(compare::BASELINE_DIR)?;
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
/// the user accepts failures) or, with `--fail-on-regression`, when a compared cell regressed
/// or a cell in both could not be judged (its failed runs left too few for the test), saying
/// which on stderr; else 0.
pub fn exit_status(
    runs: &[RunResult],
    comparison: Option<&compare::Comparison>,
    out: &Outputs,
) -> i32 {
    let failures = failure_status(runs, out);
    let regressions = match comparison.filter(|_| out.fail_on_regression) {
        Some(c) => regression_status(c, out).max(unjudged_status(c, runs, out)),
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

/// 1 when a cell in both could not be judged, with one line naming the first, how its runs
/// ended, and how many it has of each side: a gate that passed it would have passed blind.
fn unjudged_status(c: &compare::Comparison, runs: &[RunResult], out: &Outputs) -> i32 {
    let Some(u) = c.unjudged.first() else {
        return 0;
    };
    let cell: Vec<&RunResult> = runs.iter().filter(|r| r.key == u.key).collect();
    let mut ended: Vec<(String, usize)> = Vec::new();
    for r in cell.iter().filter(|r| !r.status.measured()) {
        let word = format!("{:?}", r.status).to_lowercase();
        match ended.iter_mut().find(|(w, _)| *w == word) {
            Some((_, n)) => *n += 1,
            None => ended.push((word, 1)),
        }
    }
    let why = if ended.is_empty() {
        String::new()
    } else {
        format!(
            ", the others {}",
            ended
                .iter()
                .map(|(w, n)| format!("{n} {w}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Terminal::after(out.quiet).error(format_args!(
        "{} of {} cells in both could not be judged against baseline '{}': {} has {} measured runs of {}{why}, against {} in the baseline, and Mann-Whitney's smallest p for those is {:.3} ≥ {}; exit status 1 (--fail-on-regression)",
        c.unjudged.len(),
        c.in_both(),
        c.baseline,
        compare::cell_name(&u.key),
        u.runs.1,
        cell.len(),
        u.runs.0,
        u.min_p,
        compare::ALPHA
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
    use crate::runner::mock::{mock_plan, MockEnd, MockExecutor};

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

    #[test]
    fn a_cell_left_unjudged_by_failed_runs_fails_the_gate_and_nothing_else() {
        let plan = mock_plan(&["fib:1"], &["seq"], &[2], 5);
        let base = MockExecutor::new(2).runs(&plan);
        let mut now = base.clone();
        for r in now.iter_mut().take(3) {
            r.status = RunStatus::Crashed;
        }
        let c = compare::compare("main", &base, None, &now, None);
        assert_eq!(c.unjudged.len(), 1);
        let gate = Outputs {
            quiet: true,
            fail_on_regression: true,
            ignore_failures: true,
            ..Outputs::default()
        };
        assert_eq!(exit_status(&now, Some(&c), &gate), 1);
        let no_gate = Outputs {
            fail_on_regression: false,
            ..gate.clone()
        };
        assert_eq!(exit_status(&now, Some(&c), &no_gate), 0);
        // The same runs all measured: judged (unchanged), and the gate passes.
        let judged = compare::compare("main", &base, None, &base, None);
        assert!(judged.unjudged.is_empty());
        assert_eq!(exit_status(&base, Some(&judged), &gate), 0);
    }
}
