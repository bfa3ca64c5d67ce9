//! Baselines: a results file saved under a name (`--save-baseline NAME`) and, per cell, the
//! change in median wall against it (`--baseline NAME|FILE`), judged by a Mann-Whitney U test
//! and a noise threshold, with a geometric-mean summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::analysis::results::{CellKey, Machine, RunResult};
use crate::base::error::{Error, Result};
use crate::base::stats;
use crate::base::units::fmt_secs;

/// Where named baselines live, relative to the working directory.
pub const BASELINE_DIR: &str = "concur-results/baselines";
/// Changes of the median smaller than this fraction are noise, whatever the test says.
pub const NOISE: f64 = 0.05;
/// The significance level of the Mann-Whitney test.
pub const ALPHA: f64 = 0.05;

/// Checks a baseline name (letters, digits, `.`, `_`, `-`) and returns its file.
pub fn baseline_path(name: &str) -> Result<PathBuf> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Err(Error::usage(format!(
            "bad baseline name '{name}': use letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(Path::new(BASELINE_DIR).join(format!("{name}.jsonl")))
}

/// Resolves `--baseline NAME|FILE`: an existing file, else a saved baseline of that name.
pub fn resolve_baseline(spec: &str) -> Result<PathBuf> {
    let as_file = Path::new(spec);
    if as_file.is_file() {
        return Ok(as_file.to_path_buf());
    }
    let named = baseline_path(spec).map_err(|_| {
        Error::flag(
            "--baseline",
            format!("no baseline '{spec}': not a file, nor a valid baseline name"),
        )
    })?;
    if named.is_file() {
        Ok(named)
    } else {
        Err(Error::flag(
            "--baseline",
            format!(
                "no baseline '{spec}': neither a file nor {}",
                named.display()
            ),
        ))
    }
}

/// What became of one cell since the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Faster by more than the noise threshold, and significant.
    Improved,
    /// Slower by more than the noise threshold, and significant.
    Regressed,
    /// Within noise, or not significant.
    Unchanged,
}

impl Verdict {
    /// The word shown in tables (`~` for no significant change).
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::Unchanged => "~",
        }
    }
}

/// One cell present in both runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CellChange {
    /// The cell.
    pub key: CellKey,
    /// Median wall in the baseline.
    pub base_median_s: f64,
    /// Median wall now.
    pub new_median_s: f64,
    /// Now over baseline (below 1 is faster).
    pub ratio: f64,
    /// Two-sided Mann-Whitney p-value of the two sets of walls.
    pub p: f64,
    /// Runs in the baseline and now.
    pub runs: (usize, usize),
    /// The judgement.
    pub verdict: Verdict,
}

/// A cell in both runs that the test cannot judge: too few measured runs on one side or both
/// for Mann-Whitney to ever reach p < [`ALPHA`], however far apart they are.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Unjudged {
    /// The cell.
    pub key: CellKey,
    /// Measured runs in the baseline and now.
    pub runs: (usize, usize),
    /// The smallest p these counts allow ([`min_p`]).
    pub min_p: f64,
}

/// The comparison of a set of runs with a baseline.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Comparison {
    /// The baseline as the user named it.
    pub baseline: String,
    /// Cells in both, in the current run's order.
    pub changes: Vec<CellChange>,
    /// Geometric mean of the ratios (now over baseline).
    pub geomean: Option<f64>,
    /// Cells only in the current runs.
    pub only_new: usize,
    /// Cells only in the baseline.
    pub only_base: usize,
    /// Cells in both (with or without measured runs) whose counts of measured runs can never
    /// reach significance: what `--fail-on-regression` fails on rather than passing blind.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unjudged: Vec<Unjudged>,
    /// Things to know: different machines, samples too small to be significant.
    pub warnings: Vec<String>,
}

impl Comparison {
    /// How many cells are in both: those compared and those that could not be.
    pub fn in_both(&self) -> usize {
        let apart = self
            .unjudged
            .iter()
            .filter(|u| !self.changes.iter().any(|x| x.key == u.key))
            .count();
        self.changes.len() + apart
    }
}

/// Every cell of `runs` in first-seen order, with the walls of its measured runs (none when
/// every run of it crashed, timed out or failed a hook).
fn walls(runs: &[RunResult]) -> (Vec<CellKey>, BTreeMap<CellKey, Vec<f64>>) {
    let mut order = Vec::new();
    let mut map: BTreeMap<CellKey, Vec<f64>> = BTreeMap::new();
    for r in runs {
        let v = map.entry(r.key.clone()).or_insert_with(|| {
            order.push(r.key.clone());
            Vec::new()
        });
        if r.status.measured() {
            v.push(r.wall_s);
        }
    }
    (order, map)
}

fn machine_differences(a: &Machine, b: &Machine) -> Vec<String> {
    let mut d = Vec::new();
    if a.cpu != b.cpu {
        d.push(format!("CPU '{}' vs '{}'", a.cpu, b.cpu));
    }
    if a.cores != b.cores {
        d.push(format!("{} vs {} cores", a.cores, b.cores));
    }
    if a.kernel != b.kernel {
        d.push(format!("kernel {} vs {}", a.kernel, b.kernel));
    }
    d
}

/// Compares `runs` (on `machine`) with the baseline's runs (on `base_machine`).
pub fn compare(
    label: &str,
    base_runs: &[RunResult],
    base_machine: Option<&Machine>,
    runs: &[RunResult],
    machine: Option<&Machine>,
) -> Comparison {
    let (base_order, base) = walls(base_runs);
    let (order, now) = walls(runs);
    let mut c = Comparison {
        baseline: label.to_string(),
        ..Default::default()
    };
    for k in &order {
        let n = &now[k];
        let Some(b) = base.get(k) else {
            if !n.is_empty() {
                c.only_new += 1;
            }
            continue;
        };
        let least = min_p(n.len(), b.len());
        if least >= ALPHA {
            c.unjudged.push(Unjudged {
                key: k.clone(),
                runs: (b.len(), n.len()),
                min_p: least,
            });
        }
        let (Some(bm), Some(nm)) = (stats::median(b), stats::median(n)) else {
            continue;
        };
        if bm <= 0.0 {
            continue;
        }
        let ratio = nm / bm;
        let p = stats::mann_whitney(n, b).map_or(1.0, |t| t.p);
        let verdict = if p < ALPHA && ratio < 1.0 - NOISE {
            Verdict::Improved
        } else if p < ALPHA && ratio > 1.0 + NOISE {
            Verdict::Regressed
        } else {
            Verdict::Unchanged
        };
        c.changes.push(CellChange {
            key: k.clone(),
            base_median_s: bm,
            new_median_s: nm,
            ratio,
            p,
            runs: (b.len(), n.len()),
            verdict,
        });
    }
    c.only_base = base_order
        .iter()
        .filter(|k| !base[*k].is_empty() && !now.contains_key(*k))
        .count();
    c.geomean = stats::geometric_mean(&c.changes.iter().map(|x| x.ratio).collect::<Vec<_>>());
    if let (Some(a), Some(b)) = (base_machine, machine) {
        let d = machine_differences(a, b);
        if !d.is_empty() {
            c.warnings.push(format!(
                "the baseline ran on another machine ({}): differences may be the machine's",
                d.join(", ")
            ));
        }
    }
    if let Some(first) = c.unjudged.first() {
        c.warnings.push(format!(
            "{} of the cells in both cannot be judged: too few measured runs for the test ever to reach p < {ALPHA} (first: {}, {} now against {} in the baseline, smallest p {:.3}); {}",
            c.unjudged.len(),
            cell_name(&first.key),
            first.runs.1,
            first.runs.0,
            first.min_p,
            remedy(c.unjudged.iter().map(|u| u.runs.0))
        ));
    }
    if c.changes.is_empty() && c.unjudged.is_empty() {
        c.warnings
            .push("no cell of this run is in the baseline: nothing to compare".into());
    }
    c
}

/// The smallest two-sided p the Mann-Whitney test gives for `n1` and `n2` untied values: that
/// of two samples wholly apart, computed by `stats::mann_whitney` itself, so it is exact
/// (`2 / C(n1 + n2, n1)`) up to `stats::MANN_WHITNEY_EXACT_MAX` values together and the
/// normal approximation beyond (where 1 run against any number never goes below 0.08). 1 when
/// a sample is empty.
pub fn min_p(n1: usize, n2: usize) -> f64 {
    let a: Vec<f64> = (0..n1).map(|i| i as f64).collect();
    let b: Vec<f64> = (n1..n1 + n2).map(|i| i as f64).collect();
    stats::mann_whitney(&a, &b).map_or(1.0, |t| t.p)
}

/// The most runs a cell may have (`--repeat`'s bound in the plan).
const MAX_REPEAT: usize = 1000;

/// The least count of runs from which on (up to `--repeat`'s bound) the test can reach
/// [`ALPHA`] against `base` runs; `None` when none can (a baseline of 0 or 1 run a cell).
pub fn runs_needed(base: usize) -> Option<usize> {
    let mut least = None;
    for r in (1..=MAX_REPEAT).rev() {
        if min_p(r, base) >= ALPHA {
            break;
        }
        least = Some(r);
    }
    least
}

/// What to do about cells whose baselines have these counts of runs: the `--repeat` that
/// reaches the threshold against all of them, or a new baseline when none does.
fn remedy(base_counts: impl Iterator<Item = usize>) -> String {
    let distinct: std::collections::BTreeSet<usize> = base_counts.collect();
    let needed: Option<Vec<usize>> = distinct.into_iter().map(runs_needed).collect();
    match needed.and_then(|n| n.into_iter().max()) {
        Some(r) if r > runs_needed_both() => format!(
            "use --repeat {r} or more against this baseline (or {} or more on both sides)",
            runs_needed_both()
        ),
        Some(r) => format!("use --repeat {r} or more"),
        None => format!(
            "no --repeat can reach it against a baseline of fewer than 2 runs a cell: save the baseline again with --repeat {} or more",
            runs_needed_both()
        ),
    }
}

/// The least `--repeat` that, on both sides, lets the test reach [`ALPHA`].
fn runs_needed_both() -> usize {
    (1..=MAX_REPEAT)
        .find(|&r| min_p(r, r) < ALPHA)
        .unwrap_or(MAX_REPEAT)
}

/// The comparison about to be made, before any run: each cell and how many counted runs it
/// will have, for [`check_gate`].
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Each cell, in run order, and its counted runs.
    pub cells: Vec<(CellKey, usize)>,
    /// Where they come from: a study's `--repeat` (`None`), or a results file to report.
    pub file: Option<String>,
}

impl Planned {
    /// A study's cells, each run `repeat` times.
    pub fn study(keys: impl IntoIterator<Item = CellKey>, repeat: usize) -> Planned {
        Planned {
            cells: keys.into_iter().map(|k| (k, repeat)).collect(),
            file: None,
        }
    }

    /// The cells of a results file, each with its run lines (measured or not: a run that
    /// crashed was planned all the same).
    pub fn file(name: &str, runs: &[RunResult]) -> Planned {
        let mut cells: Vec<(CellKey, usize)> = Vec::new();
        for r in runs {
            match cells.iter_mut().find(|(k, _)| *k == r.key) {
                Some((_, n)) => *n += 1,
                None => cells.push((r.key.clone(), 1)),
            }
        }
        Planned {
            cells,
            file: Some(name.to_string()),
        }
    }
}

/// `--fail-on-regression`'s check before any run: refuses (one line, exit 2) a comparison in
/// which the gate could never fail, so that it cannot pass blind: no planned cell in the
/// baseline `label`, or a cell in both whose counts of runs can never reach [`ALPHA`] (3
/// against 3 gives at best p = 0.1). The line names the `--repeat` that can.
pub fn check_gate(label: &str, base_runs: &[RunResult], planned: &Planned) -> Result<()> {
    let (base_order, base) = walls(base_runs);
    let common: Vec<(&CellKey, usize, usize)> = planned
        .cells
        .iter()
        .filter_map(|(k, n)| base.get(k).map(|b| (k, *n, b.len())))
        .collect();
    let new_side = match &planned.file {
        None => "this study".to_string(),
        Some(f) => format!("'{f}'"),
    };
    if common.is_empty() {
        let some = |keys: &mut dyn Iterator<Item = &CellKey>, count: usize| {
            let names: Vec<String> = keys.take(2).map(cell_name).collect();
            let more = if count > 2 { ", …" } else { "" };
            match count {
                0 => "none".to_string(),
                _ => format!("{count}: {}{more}", names.join(", ")),
            }
        };
        return Err(Error::flag("--fail-on-regression", format!(
            "--fail-on-regression: no cell of {new_side} is in baseline '{label}', so the gate could never fail (cells here {}; in the baseline {})",
            some(&mut planned.cells.iter().map(|(k, _)| k), planned.cells.len()),
            some(&mut base_order.iter(), base_order.len())
        )));
    }
    let blind: Vec<&(&CellKey, usize, usize)> = common
        .iter()
        .filter(|(_, n, b)| min_p(*n, *b) >= ALPHA)
        .collect();
    // The cell the line names: the one furthest from the threshold.
    let Some(&&(key, n, b)) = blind
        .iter()
        .max_by(|x, y| min_p(x.1, x.2).total_cmp(&min_p(y.1, y.2)))
    else {
        return Ok(());
    };
    let p = min_p(n, b);
    let same_counts = common.iter().all(|c| (c.1, c.2) == (n, b));
    let sizes = match (&planned.file, same_counts) {
        (None, true) => format!("with --repeat {n} against a baseline of {b} runs a cell"),
        (None, false) => format!(
            "with --repeat {n} against the {b} runs of {} in baseline '{label}'",
            cell_name(key)
        ),
        (Some(_), true) => {
            format!("with {n} runs a cell in {new_side} against a baseline of {b} runs a cell")
        }
        (Some(_), false) => format!(
            "with {n} runs of {} in {new_side} against {b} in baseline '{label}'",
            cell_name(key)
        ),
    };
    Err(Error::flag("--fail-on-regression", format!(
        "--fail-on-regression cannot fail {sizes}: Mann-Whitney's smallest p is {p:.3} ≥ {ALPHA}; {}",
        remedy(blind.iter().map(|c| c.2))
    )))
}

/// The name of a compared cell: `study · workload (gil) · model ×N`.
pub fn cell_name(k: &CellKey) -> String {
    format!(
        "{} · {}{} · {}",
        k.study,
        k.workload,
        if k.gil { " (gil)" } else { "" },
        k.label()
    )
}

/// The percentage change of a ratio: `-12.3%`, `+4.0%`.
pub fn pct(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

/// Column headers of the comparison tables.
pub const HEADERS: &[&str] = &["cell", "baseline", "now", "change", "p", "verdict"];

/// The comparison's rows as text, the geometric-mean row last.
pub fn rows(c: &Comparison) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = c
        .changes
        .iter()
        .map(|x| {
            vec![
                cell_name(&x.key),
                fmt_secs(x.base_median_s),
                fmt_secs(x.new_median_s),
                pct(x.ratio),
                format!("{:.3}", x.p),
                x.verdict.word().to_string(),
            ]
        })
        .collect();
    if let Some(g) = c.geomean {
        out.push(vec![
            format!("geometric mean of {} cells", c.changes.len()),
            String::new(),
            String::new(),
            pct(g),
            String::new(),
            String::new(),
        ]);
    }
    out
}

/// One line counting the verdicts.
pub fn summary_line(c: &Comparison) -> String {
    let count = |v: Verdict| c.changes.iter().filter(|x| x.verdict == v).count();
    let mut s = format!(
        "against baseline '{}': {} improved, {} regressed, {} unchanged (noise threshold {:.0}%, Mann-Whitney p < {ALPHA})",
        c.baseline,
        count(Verdict::Improved),
        count(Verdict::Regressed),
        count(Verdict::Unchanged),
        NOISE * 100.0
    );
    if c.only_new + c.only_base > 0 {
        s.push_str(&format!(
            "; {} cells only now, {} only in the baseline",
            c.only_new, c.only_base
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::results::RunStatus;
    use crate::runner::mock::{mock_plan, MockExecutor};

    #[test]
    fn baseline_names() {
        assert!(baseline_path("main-1.0_x").is_ok());
        assert!(baseline_path("../etc").is_err());
        assert!(baseline_path("").is_err());
    }

    #[test]
    fn min_p_is_the_tests_own_at_known_counts() {
        // Exact: 2 / C(n1 + n2, n1), whichever side is the larger.
        for (n1, n2, p) in [
            (3, 3, 2.0 / 20.0),
            (4, 4, 2.0 / 70.0),
            (3, 4, 2.0 / 35.0),
            (4, 3, 2.0 / 35.0),
            (3, 5, 2.0 / 56.0),
            (5, 5, 2.0 / 252.0),
            (2, 8, 2.0 / 45.0),
            (1, 39, 2.0 / 40.0),
            (20, 20, 2.0 / 137_846_528_820.0),
        ] {
            let got = min_p(n1, n2);
            assert!(
                (got - p).abs() < 1e-12 * p.max(1e-3),
                "{n1} vs {n2}: {got} != {p}"
            );
        }
        // Past 40 values the test's normal approximation, continuity-corrected: 1 against 40 is
        // z = (20 - 0.5) / sqrt(1·40·42/12), p = erfc(z/√2) ≈ 0.0993, above 2/41.
        let z = 19.5 / (40.0f64 * 42.0 / 12.0).sqrt();
        let p = stats::erfc(z / std::f64::consts::SQRT_2);
        assert!(
            (min_p(1, 40) - p).abs() < 1e-12 && (p - 0.0993).abs() < 1e-3,
            "{p}"
        );
        assert_eq!((min_p(0, 5), min_p(5, 0)), (1.0, 1.0));
    }

    #[test]
    fn runs_needed_is_the_least_repeat_from_which_on_the_test_can_reach_alpha() {
        // Against 3: 4 gives 2/35 = 0.057, 5 gives 2/56 = 0.036.
        assert_eq!(runs_needed(3), Some(5));
        assert_eq!(runs_needed(4), Some(4));
        assert_eq!(runs_needed(5), Some(3));
        // Against 2: 7 gives 2/36 = 0.056, 8 gives 2/45 = 0.044.
        assert_eq!(runs_needed(2), Some(8));
        // Against 1 run no count ever does (the approximation tends to p = 0.083).
        assert_eq!((runs_needed(1), runs_needed(0)), (None, None));
        assert_eq!(runs_needed_both(), 4);
    }

    /// Runs of `models` × `fib:1` × 2 tasks, `repeat` each, the walls of each cell spread
    /// apart a little (the mock's jitter), every run ok.
    fn runs(models: &[&str], repeat: usize) -> Vec<RunResult> {
        let plan = mock_plan(&["fib:1"], models, &[2], repeat);
        MockExecutor::new(2).jitter(0.01).runs(&plan)
    }

    fn keys(runs: &[RunResult]) -> Vec<CellKey> {
        let mut k: Vec<CellKey> = runs.iter().map(|r| r.key.clone()).collect();
        k.dedup();
        k.sort();
        k.dedup();
        k
    }

    /// The cell of `model` in `runs` ends `status` in its first `n` runs.
    fn ending(
        mut runs: Vec<RunResult>,
        model: &str,
        n: usize,
        status: RunStatus,
    ) -> Vec<RunResult> {
        for r in runs.iter_mut().filter(|r| r.key.model == model).take(n) {
            r.status = status;
        }
        runs
    }

    #[test]
    fn the_gate_refuses_sizes_that_can_never_reach_alpha_naming_the_repeat_that_can() {
        let base = runs(&["seq", "thread"], 3);
        let planned = |repeat| Planned::study(keys(&base), repeat);
        let err = check_gate("main", &base, &planned(3))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--fail-on-regression cannot fail with --repeat 3 against a baseline of 3 runs a cell: Mann-Whitney's smallest p is 0.100 ≥ 0.05; use --repeat 5 or more against this baseline (or 4 or more on both sides)"
        );
        assert!(
            check_gate("main", &base, &planned(4)).is_err(),
            "4 vs 3: 0.057"
        );
        assert!(
            check_gate("main", &base, &planned(5)).is_ok(),
            "5 vs 3: 0.036"
        );
        let base4 = runs(&["seq", "thread"], 4);
        assert!(check_gate("main", &base4, &Planned::study(keys(&base4), 4)).is_ok());
        // One cell of the baseline short of runs (3 of its 5 crashed): named, with its count.
        let short = ending(runs(&["seq", "thread"], 5), "thread", 3, RunStatus::Crashed);
        let err = check_gate("main", &short, &Planned::study(keys(&short), 5))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--fail-on-regression cannot fail with --repeat 5 against the 2 runs of custom · fib:1 · thread ×2 in baseline 'main': Mann-Whitney's smallest p is 0.095")
                && err.ends_with("use --repeat 8 or more against this baseline (or 4 or more on both sides)"),
            "{err}"
        );
        // A baseline of one run a cell: no repeat helps.
        let one = runs(&["seq"], 1);
        let err = check_gate("main", &one, &Planned::study(keys(&one), 1000))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("no --repeat can reach it against a baseline of fewer than 2 runs a cell: save the baseline again with --repeat 4 or more"),
            "{err}"
        );
    }

    #[test]
    fn the_gate_refuses_a_baseline_with_no_planned_cell() {
        let base = runs(&["seq", "thread"], 5);
        let other = runs(&["pool:2"], 5);
        let err = check_gate("main", &base, &Planned::study(keys(&other), 5))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--fail-on-regression: no cell of this study is in baseline 'main', so the gate could never fail (cells here 1: custom · fib:1 · pool:2 ×2; in the baseline 2: custom · fib:1 · seq ×2, custom · fib:1 · thread ×2)"
        );
        // A file without a run: none here.
        let err = check_gate("main", &base, &Planned::file("empty.jsonl", &[]))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--fail-on-regression: no cell of 'empty.jsonl' is in baseline 'main', so the gate could never fail (cells here none; in the baseline 2: "),
            "{err}"
        );
        // One cell in common is enough.
        let some = runs(&["seq", "pool:2"], 5);
        assert!(check_gate("main", &base, &Planned::study(keys(&some), 5)).is_ok());
    }

    #[test]
    fn a_file_plans_every_run_line_it_holds_measured_or_not() {
        let file = ending(runs(&["seq", "thread"], 3), "thread", 2, RunStatus::Timeout);
        let planned = Planned::file("new.jsonl", &file);
        let counts: Vec<(String, usize)> = planned
            .cells
            .iter()
            .map(|(k, n)| (k.model.clone(), *n))
            .collect();
        assert_eq!(counts, [("seq".to_string(), 3), ("thread".to_string(), 3)]);
        let err = check_gate("b.jsonl", &file, &planned)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--fail-on-regression cannot fail with 3 runs of custom · fib:1 · thread ×2 in 'new.jsonl' against 1 in baseline 'b.jsonl'"),
            "{err}"
        );
    }

    #[test]
    fn cells_left_without_enough_measured_runs_are_unjudged() {
        let base = runs(&["seq", "thread"], 5);
        let now = ending(runs(&["seq", "thread"], 5), "thread", 3, RunStatus::Crashed);
        let c = compare("main", &base, None, &now, None);
        assert_eq!(
            c.unjudged,
            vec![Unjudged {
                key: keys(&now)[1].clone(),
                runs: (5, 2),
                min_p: 2.0 / 21.0
            }]
        );
        assert_eq!((c.changes.len(), c.in_both(), c.only_base), (2, 2, 0));
        assert!(
            c.warnings
                .iter()
                .any(|w| w.starts_with("1 of the cells in both cannot be judged")
                    && w.contains("thread ×2, 2 now against 5 in the baseline, smallest p 0.095")),
            "{:?}",
            c.warnings
        );
        // Every run of it crashed: in both all the same, not "only in the baseline".
        let none = ending(runs(&["seq", "thread"], 5), "thread", 5, RunStatus::Crashed);
        let c = compare("main", &base, None, &none, None);
        assert_eq!(c.unjudged.len(), 1);
        assert_eq!((c.unjudged[0].runs, c.unjudged[0].min_p), ((5, 0), 1.0));
        assert_eq!(
            (c.changes.len(), c.in_both(), c.only_base, c.only_new),
            (1, 2, 0, 0)
        );
        // Enough on both sides: nothing unjudged, whatever the verdicts.
        let c = compare("main", &base, None, &runs(&["seq", "thread"], 4), None);
        assert!(c.unjudged.is_empty() && c.warnings.is_empty(), "{c:?}");
        // 4 against 3 cannot reach 0.05 (2/35).
        let c = compare("main", &runs(&["seq"], 3), None, &runs(&["seq"], 4), None);
        assert_eq!(c.unjudged[0].runs, (3, 4));
    }

    #[test]
    fn another_machine_is_named_in_a_warning_by_each_difference() {
        let m = Machine {
            cpu: "AMD EPYC".into(),
            cores: 2,
            kernel: "6.18".into(),
            load1: 0.1,
            governor: None,
            mem_total_kib: None,
            cpu_busy: None,
        };
        let base = runs(&["seq"], 5);
        let warned = |other: &Machine| {
            compare("main", &base, Some(&m), &base, Some(other))
                .warnings
                .into_iter()
                .filter(|w| w.starts_with("the baseline ran on another machine"))
                .collect::<Vec<_>>()
        };
        // The same machine, busier: no warning.
        assert!(warned(&Machine {
            load1: 3.0,
            ..m.clone()
        })
        .is_empty());
        let other = Machine {
            cpu: "Intel Xeon".into(),
            cores: 4,
            kernel: "6.1".into(),
            ..m.clone()
        };
        assert_eq!(
            warned(&other),
            vec![
                "the baseline ran on another machine (CPU 'AMD EPYC' vs 'Intel Xeon', 2 vs 4 \
                 cores, kernel 6.18 vs 6.1): differences may be the machine's"
                    .to_string()
            ]
        );
        for one in [
            Machine {
                cpu: "Intel Xeon".into(),
                ..m.clone()
            },
            Machine {
                cores: 4,
                ..m.clone()
            },
            Machine {
                kernel: "6.1".into(),
                ..m.clone()
            },
        ] {
            assert_eq!(warned(&one).len(), 1, "{one:?}");
        }
    }

    #[test]
    fn cells_only_in_the_new_runs_are_counted() {
        let base = runs(&["seq"], 5);
        let now = runs(&["seq", "thread", "pool:2"], 5);
        let c = compare("main", &base, None, &now, None);
        assert_eq!((c.in_both(), c.only_new, c.only_base), (1, 2, 0));
        // A new cell whose every run crashed measured nothing: not counted.
        let crashed = ending(now.clone(), "thread", 5, RunStatus::Crashed);
        let c = compare("main", &base, None, &crashed, None);
        assert_eq!(c.only_new, 1);
    }

    #[test]
    fn verdicts_need_both_significance_and_a_change_past_the_noise() {
        let base = runs(&["seq"], 5);
        let scaled = |f: f64| -> Vec<RunResult> {
            let mut r = base.clone();
            for x in &mut r {
                x.wall_s *= f;
            }
            r
        };
        let verdict = |f| compare("main", &base, None, &scaled(f), None).changes[0].verdict;
        assert_eq!(verdict(1.06), Verdict::Regressed);
        assert_eq!(verdict(0.94), Verdict::Improved);
        // Significant (p = 2/252) but within the 5% noise threshold.
        assert_eq!(verdict(1.04), Verdict::Unchanged);
        assert_eq!(verdict(0.96), Verdict::Unchanged);
    }
}
