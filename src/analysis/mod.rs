//! From runs to cells: statistics per cell, speedup over `seq`, efficiency, effective cores,
//! the ideal time and the distance to it, and the warnings a careful reader needs; the
//! results file's types ([`results`]), baselines ([`compare`]) and advice ([`advice`]).

pub mod advice;
pub mod compare;
pub mod results;

use std::collections::BTreeMap;

use crate::base::stats;
use results::{CellKey, CellResult, Machine, RunResult, RunStatus};

/// Runs shorter than this are dominated by start-up noise.
pub const TOO_SHORT_S: f64 = 0.005;
/// Coefficient of variation above which a cell's runs disagree.
pub const HIGH_VARIATION: f64 = 0.10;

/// Something a careful reader of the results must know, shown as one line (on stderr, and in
/// every report, where it is that line's text).
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// The machine was busy with other work when the study started (`busy`: a fraction).
    Loaded {
        /// How busy, 0 to 1.
        busy: f64,
    },
    /// A cell's runs are too short to time reliably.
    TooShort {
        /// The cell, as the tables name it.
        cell: String,
        /// Its median wall.
        wall_s: f64,
    },
    /// A cell's wall varies much across its runs.
    Varies {
        /// The cell, as the tables name it.
        cell: String,
        /// σ/mean.
        cv: f64,
    },
    /// A cell's runs produced different checksums.
    Checksums {
        /// The cell, as the tables name it.
        cell: String,
    },
    /// An open cell fell below 99% of the rate asked.
    Behind {
        /// The cell, as the tables name it.
        cell: String,
        /// The rate achieved, if any task ended.
        achieved: Option<f64>,
        /// The rate asked.
        asked: f64,
    },
    /// Cells of CPU work ran more tasks at once than there are cores.
    Oversubscribed {
        /// Their labels.
        cells: Vec<String>,
        /// The cores.
        cores: usize,
    },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::Loaded { busy } => write!(
                f,
                "the machine was {:.0}% busy with other work when the study started: timings may be inflated",
                100.0 * busy
            ),
            Warning::TooShort { cell, wall_s } => write!(
                f,
                "{cell}: runs take {} — too short to time reliably; use more tasks or a bigger task",
                crate::base::units::fmt_secs(*wall_s)
            ),
            Warning::Varies { cell, cv } => write!(
                f,
                "{cell}: wall varies by {:.0}% (σ/mean) across runs; other programs may have interfered — close them or add --repeat",
                100.0 * cv
            ),
            Warning::Checksums { cell } => write!(f, "{cell}: runs produced different checksums"),
            Warning::Behind {
                cell,
                achieved,
                asked,
            } => write!(
                f,
                "{cell}: fell behind the asked rate: achieved {} of {asked:.1}/s asked (below 99%): arrivals queued, and the latency counts their wait",
                achieved.map_or("-".into(), |a| format!("{a:.1}/s ({:.0}%)", 100.0 * a / asked)),
            ),
            Warning::Oversubscribed { cells, cores } => write!(
                f,
                "{} run more tasks at once than the {cores} cores: CPU work cannot go faster than {cores}×, and efficiency is taken over min(workers, cores)",
                cells.join(", ")
            ),
        }
    }
}

impl Warning {
    /// The cell a per-cell warning is about, and what it measured there as the grouped line
    /// shows it beside the cell's name; `None` for a warning about the study as a whole.
    fn cell(&self) -> Option<(&str, String)> {
        match self {
            Warning::TooShort { cell, wall_s } => {
                Some((cell, crate::base::units::fmt_secs(*wall_s)))
            }
            Warning::Varies { cell, cv } => Some((cell, format!("{:.0}%", 100.0 * cv))),
            Warning::Checksums { cell } => Some((cell, String::new())),
            Warning::Behind {
                cell,
                achieved,
                asked,
            } => Some((
                cell,
                format!(
                    "achieved {} of {asked:.1}/s",
                    achieved.map_or("-".into(), |a| format!("{a:.1}/s"))
                ),
            )),
            Warning::Loaded { .. } | Warning::Oversubscribed { .. } => None,
        }
    }

    /// The line of `several` warnings of this one's kind, each about another cell.
    fn grouped_line(&self, several: &[&Warning]) -> String {
        let cells = several
            .iter()
            .filter_map(|w| w.cell())
            .map(|(cell, what)| {
                if what.is_empty() {
                    cell.to_string()
                } else {
                    format!("{cell} ({what})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let n = several.len();
        match self {
            Warning::TooShort { .. } => format!(
                "runs too short to time reliably in {n} cells: {cells}; use more tasks or a bigger task"
            ),
            Warning::Varies { .. } => {
                let cvs = several.iter().filter_map(|w| match w {
                    Warning::Varies { cv, .. } => Some(100.0 * cv),
                    _ => None,
                });
                let (lo, hi) = cvs.fold((f64::INFINITY, 0.0_f64), |(lo, hi), c| {
                    (lo.min(c), hi.max(c))
                });
                format!(
                    "wall varies by {lo:.0}–{hi:.0}% (σ/mean) across runs in {n} cells: {cells}; other programs may have interfered — close them or add --repeat"
                )
            }
            Warning::Checksums { .. } => {
                format!("runs produced different checksums in {n} cells: {cells}")
            }
            Warning::Behind { .. } => format!(
                "fell behind the asked rate (below 99%) in {n} cells: {cells}; arrivals queued, and the latency counts their wait"
            ),
            Warning::Loaded { .. } | Warning::Oversubscribed { .. } => self.to_string(),
        }
    }
}

/// The warnings as stderr shows them: one line per kind, in order of each kind's first
/// warning, naming the cells it concerns and counting them when there are several; a kind
/// with one warning keeps that warning's own line. (`--verbose` and every report keep one
/// line per warning.)
pub fn grouped(warnings: &[Warning]) -> Vec<String> {
    let mut kinds: Vec<Vec<&Warning>> = Vec::new();
    for w in warnings {
        let kind = std::mem::discriminant(w);
        match kinds
            .iter_mut()
            .find(|k| std::mem::discriminant(k[0]) == kind && w.cell().is_some())
        {
            Some(k) => k.push(w),
            None => kinds.push(vec![w]),
        }
    }
    kinds
        .iter()
        .map(|k| match k.as_slice() {
            [one] => one.to_string(),
            several => several[0].grouped_line(several),
        })
        .collect()
}

/// In a report a warning is its line.
impl serde::Serialize for Warning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The cells of a set of runs, in order of first appearance, and warnings about them.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// One result per cell.
    pub cells: Vec<CellResult>,
    /// Things the reader should know (printed on stderr, kept in reports).
    pub warnings: Vec<Warning>,
    /// The cores of the machine the runs were made on (from the results file's meta line,
    /// never from the machine that renders them).
    pub cores: usize,
}

fn median_u64(xs: impl Iterator<Item = u64>) -> Option<u64> {
    let v: Vec<f64> = xs.map(|x| x as f64).collect();
    stats::median(&v).map(|m| m.round() as u64)
}

fn summarize_cell(key: &CellKey, runs: &[&RunResult]) -> CellResult {
    let measured: Vec<&RunResult> = runs
        .iter()
        .copied()
        .filter(|r| r.status.measured())
        .collect();
    let walls: Vec<f64> = measured.iter().map(|r| r.wall_s).collect();
    let s = stats::summarize(&walls);
    let med = |f: fn(&RunResult) -> f64| {
        stats::median(&measured.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    let eff_cores = stats::median(
        &measured
            .iter()
            .filter(|r| r.wall_s > 0.0)
            .map(|r| (r.user_s + r.sys_s) / r.wall_s)
            .collect::<Vec<_>>(),
    );
    let first = runs.first();
    let checksum = measured.first().map(|r| r.bytes);
    let median_run = s.and_then(|s| {
        measured.iter().min_by(|a, b| {
            (a.wall_s - s.median)
                .abs()
                .total_cmp(&(b.wall_s - s.median).abs())
        })
    });
    CellResult {
        key: key.clone(),
        workers: first.and_then(|r| r.workers),
        parallelism: first.map_or(1, |r| r.parallelism),
        runs: runs.len(),
        runs_failed: runs.iter().filter(|r| r.status != RunStatus::Ok).count(),
        wall_median_s: s.map(|s| s.median),
        wall_ci95_s: s.map(|s| [s.ci95.0, s.ci95.1]),
        wall_min_s: s.map(|s| s.min),
        wall_max_s: s.map(|s| s.max),
        wall_mean_s: s.map(|s| s.mean),
        wall_sd_s: s.map(|s| s.sd),
        user_median_s: med(|r| r.user_s),
        sys_median_s: med(|r| r.sys_s),
        max_rss_kib: median_u64(measured.iter().map(|r| r.max_rss_kib)),
        tree_pss_kib: median_u64(measured.iter().filter_map(|r| r.tree_pss_kib)),
        tree_pss_all_started_kib: median_u64(
            measured.iter().filter_map(|r| r.tree_pss_all_started_kib),
        ),
        tree_pss_end_kib: median_u64(measured.iter().filter_map(|r| r.tree_pss_end_kib)),
        speedup: None,
        efficiency: None,
        effective_cores: eff_cores,
        ideal_s: None,
        vs_ideal: None,
        bytes: checksum,
        bytes_consistent: measured.iter().all(|r| Some(r.bytes) == checksum),
        latency_us: median_run.and_then(|r| r.latency_us),
        error: runs.iter().find_map(|r| r.error.clone()),
        tasks_failed: measured.iter().map(|r| r.tasks_failed).sum(),
        failures: measured.iter().fold(BTreeMap::new(), |mut acc, r| {
            for (k, v) in &r.failures {
                *acc.entry(k.clone()).or_default() += v;
            }
            acc
        }),
        tasks_per_s: median_run
            .filter(|r| r.wall_s > 0.0)
            .map(|r| r.tasks_ok as f64 / r.wall_s),
        server_peak_in_flight: runs.iter().filter_map(|r| r.server_peak_in_flight).max(),
        startup_median_s: stats::median(
            &measured
                .iter()
                .filter_map(|r| r.startup_s)
                .collect::<Vec<_>>(),
        ),
        conn: median_run.map(|r| r.conn.clone()).unwrap_or_default(),
        traits: first.map(|r| r.traits.clone()).unwrap_or_default(),
        isolation: first.map(|r| r.isolation).unwrap_or_default(),
        open: median_run.and_then(|r| r.open.clone()).map(|mut o| {
            o.series.clear();
            o
        }),
        rate_search: runs.iter().find_map(|r| r.rate_search.clone()),
        wakeups: median_run.and_then(|r| r.wakeups),
        pss_per_task_b: None,
    }
}

/// A row's name across task counts: the model without its worker count (`async:100000` is
/// the `async` row of a scan that gives every task a worker), an external label as it is.
fn row_name(k: &CellKey) -> &str {
    match k.model.rsplit_once(':') {
        Some((name, w)) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => &k.model,
    }
}

/// A row across task counts: study, workload, [`row_name`] and lock.
fn row_key(k: &CellKey) -> (String, String, String, bool) {
    (
        k.study.clone(),
        k.workload.clone(),
        row_name(k).to_string(),
        k.gil,
    )
}

/// Fills each cell's memory per task from the same row's 1-task cell (cells whose every task
/// ran). Both cells' all-started samples where both have one: the tree with every task in it,
/// the same moment in both runs, where a peak is whichever tick or moment read most (a busy
/// machine's tick catches a short run late or not at all). Their peaks otherwise.
fn memory_per_task(cells: &mut [CellResult]) {
    type Row = (String, String, String, bool);
    let one: BTreeMap<Row, (Option<u64>, Option<u64>)> = cells
        .iter()
        .filter(|c| c.key.tasks == 1)
        .map(|c| {
            (
                row_key(&c.key),
                (c.tree_pss_all_started_kib, c.tree_pss_kib),
            )
        })
        .collect();
    // A cell whose tasks did not all run (a model past its limit) has no memory per task.
    let whole = |c: &CellResult| c.runs_failed == 0 && c.tasks_failed == 0;
    for c in cells.iter_mut().filter(|c| c.key.tasks > 1 && whole(c)) {
        let Some(&(base_started, base_peak)) = one.get(&row_key(&c.key)) else {
            continue;
        };
        let pair = match (base_started, c.tree_pss_all_started_kib) {
            (Some(base), Some(pss)) => Some((base, pss)),
            _ => base_peak.zip(c.tree_pss_kib),
        };
        if let Some((base, pss)) = pair {
            let extra = (c.key.tasks - 1) as f64;
            c.pss_per_task_b = Some((pss as f64 - base as f64) * 1024.0 / extra);
        }
    }
}

/// Computes every cell of `runs`, made on `machine`.
pub fn analyze(runs: &[RunResult], machine: &Machine) -> Analysis {
    let cores = machine.cores.max(1);
    let mut order: Vec<CellKey> = Vec::new();
    let mut groups: BTreeMap<CellKey, Vec<&RunResult>> = BTreeMap::new();
    for r in runs {
        let g = groups.entry(r.key.clone()).or_default();
        if g.is_empty() {
            order.push(r.key.clone());
        }
        g.push(r);
    }
    let mut cells: Vec<CellResult> = order
        .iter()
        .map(|k| summarize_cell(k, &groups[k]))
        .collect();

    // The seq baseline of each (study, workload, tasks, gil), and the per-task time of each
    // workload from its lock-free seq cells (the hardware's ideal knows no interpreter lock).
    let seq: BTreeMap<(String, String, usize, bool), f64> = cells
        .iter()
        .filter(|c| c.traits.baseline)
        .filter_map(|c| {
            let k = &c.key;
            Some((
                (k.study.clone(), k.workload.clone(), k.tasks, k.gil),
                c.wall_median_s?,
            ))
        })
        .collect();
    let task_time = |workload: &str, gil: bool| -> Option<f64> {
        let per_task = |want_gil: bool| {
            let v: Vec<f64> = seq
                .iter()
                .filter(|((_, w, _, g), _)| w == workload && *g == want_gil)
                .map(|((_, _, n, _), wall)| wall / *n as f64)
                .collect();
            stats::median(&v)
        };
        per_task(false).or_else(|| per_task(gil))
    };
    let first_run: BTreeMap<&CellKey, &RunResult> =
        order.iter().map(|k| (k, groups[k][0])).collect();
    // A measured workload (another program's) is known by its seq cells' effective cores e:
    // one task keeps e cores busy, so at most cores / e tasks run at full speed at once. That
    // one number covers the whole range: e ≈ 1 is CPU-bound (the cores bound it), e ≈ 0 waits
    // (its concurrency bounds it), and a command that half waits (process start-up, I/O) gets
    // the slots in between.
    let measured_e: BTreeMap<(String, String), f64> = {
        let mut e: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for c in cells
            .iter()
            .filter(|c| c.traits.baseline && c.traits.nature == results::Nature::Measured)
        {
            if let Some(x) = c.effective_cores {
                e.entry((c.key.study.clone(), c.key.workload.clone()))
                    .or_default()
                    .push(x);
            }
        }
        e.into_iter()
            .filter_map(|(k, v)| Some((k, stats::median(&v)?)))
            .collect()
    };

    for c in cells.iter_mut() {
        let k = c.key.clone();
        // How many tasks can run at full speed at once, for measured workloads.
        let mut measured_slots = None;
        if c.traits.nature == results::Nature::Measured {
            if let Some(e) = measured_e.get(&(k.study.clone(), k.workload.clone())) {
                c.traits.waits = *e <= advice::WAIT_BOUND;
                let by_cores = (cores as f64 / e.max(1e-6)).max(1.0);
                measured_slots = Some((c.parallelism.min(k.tasks).max(1) as f64).min(by_cores));
            }
        }
        let Some(wall) = c.wall_median_s else {
            continue;
        };
        // An open run's wall is the schedule's length, not the work's: speedups and the
        // batch ideal do not apply to it.
        if c.open.is_some() {
            continue;
        }
        // Without a seq cell of the same task count, seq's time is estimated as N times the
        // workload's per-task time in its seq cells.
        let base = seq
            .get(&(k.study.clone(), k.workload.clone(), k.tasks, k.gil))
            .copied()
            .or_else(|| task_time(&k.workload, k.gil).map(|t| t * k.tasks as f64));
        let run = first_run[&k];
        // Waiting overlaps without using cores: a delay-bound or network cell's best speedup
        // is its concurrency, a CPU-bound cell's the cores.
        if let Some(base) = base.filter(|_| wall > 0.0) {
            let speedup = base / wall;
            c.speedup = Some(speedup);
            // Over K hosts, K machines' cores.
            let cap = if c.traits.waits {
                usize::MAX
            } else {
                cores * k.hosts.unwrap_or(1)
            };
            let p = c.parallelism.min(cap).min(k.tasks).max(1);
            c.efficiency = Some(speedup / measured_slots.unwrap_or(p as f64));
        }
        let ideal = match (run.traits.nature.delay_s(), measured_slots) {
            (Some(delay), _) => {
                let p = c.parallelism.min(k.tasks).max(1);
                Some(k.tasks.div_ceil(p) as f64 * delay)
            }
            (None, Some(slots)) => {
                task_time(&k.workload, k.gil).map(|t| k.tasks as f64 * t / slots)
            }
            (None, None) => task_time(&k.workload, k.gil).map(|t| {
                let p = c.parallelism.min(cores).min(k.tasks).max(1);
                k.tasks as f64 * t / p as f64
            }),
        };
        c.ideal_s = ideal;
        c.vs_ideal = ideal.filter(|i| *i > 0.0).map(|i| wall / i);
    }

    memory_per_task(&mut cells);
    let mut warnings = warnings(&cells, cores);
    if machine.loaded() {
        warnings.insert(
            0,
            Warning::Loaded {
                busy: machine.cpu_busy.unwrap_or(0.0),
            },
        );
    }
    Analysis {
        cells,
        warnings,
        cores,
    }
}

fn warnings(cells: &[CellResult], cores: usize) -> Vec<Warning> {
    let mut w = Vec::new();
    let name = |c: &CellResult| {
        format!(
            "{}{} {}",
            c.key.workload,
            if c.key.gil { " (gil)" } else { "" },
            c.key.label()
        )
    };
    for c in cells {
        if let Some(m) = c.wall_median_s.filter(|m| *m < TOO_SHORT_S) {
            w.push(Warning::TooShort {
                cell: name(c),
                wall_s: m,
            });
        }
        if let (Some(sd), Some(mean)) = (c.wall_sd_s, c.wall_mean_s) {
            if c.runs >= 3 && mean > 0.0 && sd / mean > HIGH_VARIATION {
                w.push(Warning::Varies {
                    cell: name(c),
                    cv: sd / mean,
                });
            }
        }
        if !c.bytes_consistent {
            w.push(Warning::Checksums { cell: name(c) });
        }
        if let Some(o) = c.open.as_ref().filter(|o| o.behind) {
            w.push(Warning::Behind {
                cell: name(c),
                achieved: o.rate_achieved,
                asked: o.rate_asked,
            });
        }
    }
    let over: Vec<String> = cells
        .iter()
        .filter(|c| c.parallelism.min(c.key.tasks) > cores && !c.traits.waits)
        .map(|c| c.key.label())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !over.is_empty() {
        w.push(Warning::Oversubscribed { cells: over, cores });
    }
    w
}

/// The cells of one table: same study, workload and lock setting.
pub struct Group<'a> {
    /// e.g. `gil · spin:60000000 · with --gil`.
    pub title: String,
    /// The cells, in run order.
    pub cells: Vec<&'a CellResult>,
}

/// Splits cells into tables by (study, workload, lock), in order of first appearance.
pub fn groups(a: &Analysis) -> Vec<Group<'_>> {
    let mut out: Vec<Group> = Vec::new();
    let mut keys: Vec<(String, String, bool)> = Vec::new();
    for c in &a.cells {
        let k = (c.key.study.clone(), c.key.workload.clone(), c.key.gil);
        match keys.iter().position(|x| *x == k) {
            Some(i) => out[i].cells.push(c),
            None => {
                out.push(Group {
                    title: format!(
                        "{} · {} · {}",
                        k.0,
                        k.1,
                        if k.2 {
                            "with --gil (emulated interpreter lock)"
                        } else {
                            "no interpreter lock"
                        }
                    ),
                    cells: vec![c],
                });
                keys.push(k);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::mock::{mock_plan, MockEnd, MockExecutor};
    use crate::runner::Executor;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    fn cell<'a>(a: &'a Analysis, model: &str, tasks: usize) -> &'a CellResult {
        a.cells
            .iter()
            .find(|c| c.key.model == model && c.key.tasks == tasks)
            .unwrap_or_else(|| panic!("no cell {model} ×{tasks}"))
    }

    /// fib:20 at 0.1 s a task, 8 tasks, on 4 cores: perfect pools, a thread per task, and a
    /// fork that pays 40 ms of start-up.
    fn cpu() -> (Vec<RunResult>, Analysis) {
        let plan = mock_plan(
            &["fib:20"],
            &["seq", "pool:2", "pool:4", "thread", "fork"],
            &[8],
            3,
        );
        let runs = MockExecutor::new(4)
            .task_time("fib:20", 0.1)
            .overhead("fork", 0.04)
            .runs(&plan);
        let a = analyze(&runs, &MockExecutor::new(4).machine());
        (runs, a)
    }

    #[test]
    fn memory_per_task_is_taken_against_the_rows_one_task_cell_when_every_task_ran() {
        // The mock's tree PSS is 3000 + 100·P KiB: async:11 at 11 tasks holds 1000 KiB more
        // than at 1 task, over 10 more tasks.
        let plan = mock_plan(&["sleep:1s"], &["async:11", "thread"], &[1, 11], 1);
        let runs = MockExecutor::new(2).runs(&plan);
        let a = analyze(&runs, &MockExecutor::new(2).machine());
        assert!(close(cell(&a, "async:11", 11).pss_per_task_b, 102_400.0));
        assert_eq!(cell(&a, "async:11", 1).pss_per_task_b, None);
        let runs = MockExecutor::new(2)
            .failing("async:11", MockEnd::FailedTasks(1))
            .runs(&plan);
        let a = analyze(&runs, &MockExecutor::new(2).machine());
        assert_eq!(cell(&a, "async:11", 11).pss_per_task_b, None);
        assert!(cell(&a, "thread", 11).pss_per_task_b.is_some());
    }

    /// PSS/task from both cells' all-started samples where both have one, from both peaks
    /// where either has none (never one of each).
    #[test]
    fn memory_per_task_takes_the_all_started_samples_of_both_cells_or_both_peaks() {
        // Peaks (the mock's) 3100 KiB at 1 task, 4100 at 11 (async:11 has 11 workers).
        let plan = mock_plan(&["sleep:1s"], &["async:11"], &[1, 11], 1);
        let mut runs = MockExecutor::new(2).runs(&plan);
        for r in runs.iter_mut() {
            r.tree_pss_all_started_kib = Some(if r.key.tasks == 1 { 2000 } else { 4000 });
        }
        let machine = MockExecutor::new(2).machine();
        let a = analyze(&runs, &machine);
        let c = cell(&a, "async:11", 11);
        assert_eq!(c.tree_pss_all_started_kib, Some(4000));
        assert!(close(c.pss_per_task_b, 2000.0 * 1024.0 / 10.0), "{c:?}");
        // The 1-task run's task ended before its all-started sample: both peaks.
        for r in runs.iter_mut().filter(|r| r.key.tasks == 1) {
            r.tree_pss_all_started_kib = None;
        }
        let a = analyze(&runs, &machine);
        let c = cell(&a, "async:11", 11);
        assert!(close(c.pss_per_task_b, 1000.0 * 1024.0 / 10.0), "{c:?}");
    }

    #[test]
    fn cpu_cells_scale_up_to_the_cores() {
        let (_, a) = cpu();
        let seq = cell(&a, "seq", 8);
        assert!(close(seq.wall_median_s, 0.8));
        assert!(close(seq.speedup, 1.0) && close(seq.efficiency, 1.0));
        assert!(close(seq.ideal_s, 0.8) && close(seq.vs_ideal, 1.0));
        assert!(close(seq.effective_cores, 1.0));
        let pool2 = cell(&a, "pool:2", 8);
        assert!(close(pool2.speedup, 2.0) && close(pool2.efficiency, 1.0));
        assert!(close(pool2.ideal_s, 0.4) && close(pool2.vs_ideal, 1.0));
        // Eight threads on four cores: four times faster at best, efficiency over the cores.
        let thread = cell(&a, "thread", 8);
        assert!(close(thread.speedup, 4.0) && close(thread.efficiency, 1.0));
        assert!(close(thread.ideal_s, 0.2) && close(thread.effective_cores, 4.0));
        let fork = cell(&a, "fork", 8);
        assert!(close(fork.wall_median_s, 0.24));
        assert!(close(fork.speedup, 0.8 / 0.24));
        assert!(close(fork.efficiency, 0.8 / 0.24 / 4.0));
        assert!(close(fork.ideal_s, 0.2) && close(fork.vs_ideal, 1.2));
        assert_eq!(fork.bytes, Some(80));
        assert!(fork.bytes_consistent && !fork.traits.waits);
        let [lo, hi] = fork.wall_ci95_s.unwrap();
        assert!(close(Some(lo), 0.24) && close(Some(hi), 0.24));
        assert_eq!(
            a.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["fork ×8, thread ×8 run more tasks at once than the 4 cores: CPU work cannot go faster than 4×, and efficiency is taken over min(workers, cores)"]
        );
    }

    /// `cmd:` cells whose seq runs keep `busy` cores busy per task (0.1 s a task, 8 tasks,
    /// 2 cores): the ideal's slots are min(W, N, cores / busy).
    fn measured(busy: f64) -> Analysis {
        let plan = mock_plan(&["cmd:true"], &["seq", "pool:2", "pool:8"], &[8], 1);
        let mut runs = MockExecutor::new(2).task_time("cmd:true", 0.1).runs(&plan);
        for r in runs.iter_mut() {
            r.user_s *= busy;
        }
        analyze(&runs, &MockExecutor::new(2).machine())
    }

    #[test]
    fn measured_cells_are_cpu_bound_or_waiting_as_the_seq_cell_measured() {
        // Computing: the cores bound it, as any CPU work.
        let a = measured(1.0);
        let pool8 = cell(&a, "pool:8", 8);
        assert!(!pool8.traits.waits && pool8.traits.nature == results::Nature::Measured);
        assert!(close(pool8.ideal_s, 0.4), "{:?}", pool8.ideal_s);
        // Waiting (a tenth of a core a task): 8 at once fit on 2 cores.
        let a = measured(0.1);
        let pool8 = cell(&a, "pool:8", 8);
        assert!(pool8.traits.waits);
        assert!(close(pool8.ideal_s, 0.1), "{:?}", pool8.ideal_s);
        assert!(close(cell(&a, "pool:2", 8).ideal_s, 0.4));
        // Half: 4 at once.
        let a = measured(0.5);
        assert!(close(cell(&a, "pool:8", 8).ideal_s, 0.2));
        assert!(!cell(&a, "pool:8", 8).traits.waits);
    }

    #[test]
    fn delay_cells_scale_with_concurrency_not_cores() {
        let plan = mock_plan(&["sleep:100ms"], &["seq", "pool:5", "async:10"], &[10], 3);
        let runs = MockExecutor::new(2).runs(&plan);
        let a = analyze(&runs, &MockExecutor::new(2).machine());
        let seq = cell(&a, "seq", 10);
        assert!(close(seq.wall_median_s, 1.0) && close(seq.ideal_s, 1.0));
        let pool = cell(&a, "pool:5", 10);
        assert!(close(pool.speedup, 5.0) && close(pool.efficiency, 1.0));
        assert!(close(pool.ideal_s, 0.2) && close(pool.vs_ideal, 1.0));
        let asy = cell(&a, "async:10", 10);
        assert!(close(asy.speedup, 10.0) && close(asy.efficiency, 1.0));
        assert!(close(asy.ideal_s, 0.1) && close(asy.vs_ideal, 1.0));
        assert!(asy.traits.waits);
        assert!(close(asy.tasks_per_s, 100.0));
        // Waiting does not compete for the 2 cores: no warning about oversubscription.
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    }

    #[test]
    fn failed_runs_and_failed_tasks() {
        let plan = mock_plan(&["fib:20"], &["seq", "pool:2", "thread", "fork"], &[4], 3);
        let runs = MockExecutor::new(2)
            .failing("pool:2", MockEnd::FailedTasks(1))
            .failing("thread", MockEnd::Crash)
            .failing("fork", MockEnd::NoStart)
            .runs(&plan);
        let a = analyze(&runs, &MockExecutor::new(2).machine());
        // Failed tasks: the runs still measure.
        let pool = cell(&a, "pool:2", 4);
        assert_eq!((pool.runs, pool.runs_failed, pool.tasks_failed), (3, 3, 3));
        assert_eq!(pool.failures.get("mock"), Some(&3));
        assert_eq!(pool.bytes, Some(30));
        assert!(close(pool.wall_median_s, 0.02) && close(pool.speedup, 2.0));
        assert_eq!(
            pool.error.as_deref(),
            Some("1 of 4 tasks failed (first: mock: task failed)")
        );
        // Crashed and never-started runs measure nothing.
        for (model, error) in [
            ("thread", "killed by SIGSEGV: mock: segfault"),
            (
                "fork",
                "could not start the run's process: entity not found",
            ),
        ] {
            let c = cell(&a, model, 4);
            assert_eq!((c.runs, c.runs_failed), (3, 3), "{model}");
            assert_eq!(c.wall_median_s, None, "{model}");
            assert_eq!((c.speedup, c.ideal_s), (None, None), "{model}");
            assert_eq!(c.error.as_deref(), Some(error), "{model}");
        }
        let crashed = runs.iter().find(|r| r.key.model == "thread").unwrap();
        assert_eq!(
            (crashed.status, crashed.tasks_failed),
            (RunStatus::Crashed, 4)
        );
        let unstarted = runs.iter().find(|r| r.key.model == "fork").unwrap();
        assert_eq!(
            (unstarted.status, unstarted.tasks_failed),
            (RunStatus::Spawn, 0)
        );
    }

    #[test]
    fn warnings_group_into_one_line_per_kind_naming_and_counting_their_cells() {
        let varies = |cell: &str, cv| Warning::Varies {
            cell: cell.into(),
            cv,
        };
        let short = |cell: &str| Warning::TooShort {
            cell: cell.into(),
            wall_s: 0.0012,
        };
        let behind = |cell: &str| Warning::Behind {
            cell: cell.into(),
            achieved: Some(40.0),
            asked: 50.0,
        };
        let warnings = [
            Warning::Loaded { busy: 0.5 },
            varies("a seq ×10", 0.13),
            short("a pool:4 ×10"),
            varies("a thread ×10", 0.43),
            Warning::Checksums {
                cell: "a seq ×10".into(),
            },
            varies("a pool:4 ×10", 0.2),
            behind("b pool:2 ×100"),
            behind("b pool:8 ×100"),
            Warning::Oversubscribed {
                cells: vec!["thread ×10".into(), "pool:4 ×10".into()],
                cores: 2,
            },
        ];
        let lines = grouped(&warnings);
        assert_eq!(
            lines,
            [
                warnings[0].to_string(),
                "wall varies by 13–43% (σ/mean) across runs in 3 cells: a seq ×10 (13%), a thread ×10 (43%), a pool:4 ×10 (20%); other programs may have interfered — close them or add --repeat".to_string(),
                warnings[2].to_string(),
                warnings[4].to_string(),
                "fell behind the asked rate (below 99%) in 2 cells: b pool:2 ×100 (achieved 40.0/s of 50.0/s), b pool:8 ×100 (achieved 40.0/s of 50.0/s); arrivals queued, and the latency counts their wait".to_string(),
                warnings[8].to_string(),
            ]
        );
        assert_eq!(
            grouped(&[short("x seq ×2"), short("x thread ×2")]),
            ["runs too short to time reliably in 2 cells: x seq ×2 (1.2 ms), x thread ×2 (1.2 ms); use more tasks or a bigger task"]
        );
        assert_eq!(
            grouped(&[
                Warning::Checksums {
                    cell: "x seq ×2".into()
                },
                Warning::Checksums {
                    cell: "x fork ×2".into()
                }
            ]),
            ["runs produced different checksums in 2 cells: x seq ×2, x fork ×2"]
        );
        assert!(grouped(&[]).is_empty());
    }

    #[test]
    fn spread_runs_give_a_median_an_interval_and_a_variation_warning() {
        let plan = mock_plan(&["fib:20"], &["seq"], &[4], 3);
        let runs = MockExecutor::new(2)
            .task_time("fib:20", 0.25)
            .jitter(0.2)
            .runs(&plan);
        let walls: Vec<f64> = runs.iter().map(|r| r.wall_s).collect();
        assert_eq!(walls.len(), 3);
        assert!((walls[0] - 1.0).abs() < 1e-9 && (walls[1] - 1.2).abs() < 1e-9);
        let a = analyze(&runs, &MockExecutor::new(2).machine());
        let seq = cell(&a, "seq", 4);
        assert!(close(seq.wall_median_s, 1.0));
        assert!(close(seq.wall_min_s, 0.8) && close(seq.wall_max_s, 1.2));
        assert_eq!(a.warnings.len(), 1);
        assert!(a.warnings[0]
            .to_string()
            .starts_with("fib:20 seq ×4: wall varies by 20%"));
    }
}
