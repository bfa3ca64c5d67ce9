//! Baselines: a results file saved under a name (`--save-baseline NAME`) and, per cell, the
//! change in median wall against it (`--baseline NAME|FILE`), judged by a Mann-Whitney U test
//! and a noise threshold, with a geometric-mean summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::analysis::results::{CellKey, Machine, RunResult};
use crate::error::{Error, Result};
use crate::stats;
use crate::units::fmt_secs;

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
        Error::usage(format!(
            "no baseline '{spec}': not a file, nor a valid baseline name"
        ))
    })?;
    if named.is_file() {
        Ok(named)
    } else {
        Err(Error::usage(format!(
            "no baseline '{spec}': neither a file nor {}",
            named.display()
        )))
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
    /// Things to know: different machines, samples too small to be significant.
    pub warnings: Vec<String>,
}

fn walls(runs: &[RunResult]) -> (Vec<CellKey>, BTreeMap<CellKey, Vec<f64>>) {
    let mut order = Vec::new();
    let mut map: BTreeMap<CellKey, Vec<f64>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status.measured()) {
        let v = map.entry(r.key.clone()).or_default();
        if v.is_empty() {
            order.push(r.key.clone());
        }
        v.push(r.wall_s);
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
    let mut small = false;
    for k in &order {
        let Some(b) = base.get(k) else {
            c.only_new += 1;
            continue;
        };
        let n = &now[k];
        let (Some(bm), Some(nm)) = (stats::median(b), stats::median(n)) else {
            continue;
        };
        if bm <= 0.0 {
            continue;
        }
        let ratio = nm / bm;
        let p = stats::mann_whitney(n, b).map_or(1.0, |t| t.p);
        // The smallest p the exact test can give with these sizes: 2 / C(n1 + n2, n1).
        if min_p(n.len(), b.len()) >= ALPHA {
            small = true;
        }
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
    c.only_base = base_order.iter().filter(|k| !now.contains_key(k)).count();
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
    if small {
        c.warnings.push(format!(
            "some cells have too few runs for the test to reach p < {ALPHA}: use --repeat 5 or more on both sides"
        ));
    }
    if c.changes.is_empty() {
        c.warnings
            .push("no cell of this run is in the baseline: nothing to compare".into());
    }
    c
}

fn min_p(n1: usize, n2: usize) -> f64 {
    // 2 / C(n1 + n2, n1), computed in floating point.
    let mut comb = 1.0;
    for i in 0..n1.min(n2) {
        comb = comb * (n1 + n2 - i) as f64 / (i + 1) as f64;
    }
    2.0 / comb
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

    #[test]
    fn names_and_min_p() {
        assert!(baseline_path("main-1.0_x").is_ok());
        assert!(baseline_path("../etc").is_err());
        assert!(baseline_path("").is_err());
        assert!((min_p(3, 3) - 0.1).abs() < 1e-12);
        assert!((min_p(5, 5) - 2.0 / 252.0).abs() < 1e-12);
    }
}
