//! `--rate auto --slo 'p99<100ms'`: for each cell, the highest arrival rate at which the
//! model keeps the SLO on the corrected latency and achieves 99% of the asked rate, found
//! by short probes (each a fresh-process run through the [`Executor`]): the rate grows
//! fourfold until a probe fails, then bisects between the last good and the first bad rate.

use crate::analysis::results::{Probe, RateSearch, RunResult, RunStatus};
use crate::error::Result;
use crate::model;
use crate::study::plan::{CellPlan, Plan};
use crate::study::rate::{Rate, Slo};
use crate::study::runner::{Executor, Iteration};

/// The first rate probed, tasks per second, when the cell gives no better guess.
pub const START_RATE: f64 = 10.0;
/// The lowest rate tried before the search gives up.
pub const MIN_RATE: f64 = 0.1;
/// The search stops when the bracket is this narrow, relative to its low end.
pub const PRECISION: f64 = 0.03;
/// The most probes per cell.
pub const MAX_PROBES: usize = 16;
/// The fewest tasks in a probe: a p99 over fewer than 100 tasks is their maximum, and one slow
/// first connection would fail the probe; a slow rate's probe lasts longer instead.
pub const MIN_PROBE_TASKS: usize = 100;

/// Whether a probe passed, and its line in the search.
fn judge(run: &RunResult, rate: f64, slo: &Slo) -> Probe {
    let open = run.open.as_ref();
    let ok = run.status == RunStatus::Ok
        && open.is_some_and(|o| !o.behind)
        && run.latency_us.as_ref().is_some_and(|l| slo.kept(l));
    Probe {
        rate,
        achieved: open.and_then(|o| o.rate_achieved),
        latency_us: run.latency_us.as_ref().map(|l| slo.quantile.of(l)),
        ok,
    }
}

/// Searches the highest sustainable rate of `cell`. Returns the search and the run at the
/// rate found (or the last probe, when none passed), or `None` when interrupted. `each`
/// is told of every probe as it ends.
pub fn search(
    plan: &Plan,
    cell: &CellPlan,
    executor: &dyn Executor,
    each: &mut dyn FnMut(&CellPlan, &Probe),
) -> Result<Option<(RateSearch, RunResult)>> {
    let Some(open) = &plan.open else {
        return Ok(None);
    };
    let Rate::Auto(slo) = &open.rate else {
        return Ok(None);
    };
    let duration = open
        .duration
        .unwrap_or(crate::study::rate::PROBE_DURATION)
        .as_secs_f64();
    let m = model::parse(&cell.key.model)?;
    let mut probes: Vec<Probe> = Vec::new();
    let mut best: Option<(f64, RunResult)> = None;
    let mut last: Option<RunResult> = None;
    let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
    // A delay-bound cell's capacity is about parallelism / delay: start at half of it (the
    // probes still decide), else at START_RATE.
    let slots = m.workers().unwrap_or(1).max(1) as f64;
    let mut rate = cell
        .traits
        .delay_s
        .filter(|d| *d > 0.0)
        .map_or(START_RATE, |d| {
            (0.5 * slots / d).clamp(MIN_RATE, crate::study::rate::MAX_RATE / 4.0)
        });
    while probes.len() < MAX_PROBES {
        if executor.interrupted() {
            return Ok(None);
        }
        let tasks = ((rate * duration).ceil() as usize).max(MIN_PROBE_TASKS);
        let mut probe_cell = cell.clone();
        probe_cell.key.tasks = tasks;
        probe_cell.parallelism = m.parallelism(tasks);
        let run = executor.run(&plan.at_rate(rate), &probe_cell, Iteration::Counted(0));
        if run.status == RunStatus::Interrupted {
            return Ok(None);
        }
        let p = judge(&run, rate, slo);
        each(cell, &p);
        let ok = p.ok;
        probes.push(p);
        if ok {
            lo = Some(rate);
            best = Some((rate, run));
        } else {
            hi = Some(rate);
            last = Some(run);
        }
        rate = match (lo, hi) {
            (Some(l), None) => l * 4.0,
            (None, Some(h)) if h / 4.0 >= MIN_RATE => h / 4.0,
            (None, _) => break,
            (Some(l), Some(h)) => {
                if (h - l) / l <= PRECISION {
                    break;
                }
                (l + h) / 2.0
            }
        };
    }
    let sustained = best.as_ref().map(|(r, _)| *r);
    let search = RateSearch {
        slo: slo.text.clone(),
        sustained,
        probes,
    };
    let run = match (best, last) {
        (Some((_, run)), _) | (None, Some(run)) => run,
        (None, None) => return Ok(None),
    };
    Ok(Some((search, run)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::study::plan::{self, OpenOptions, RunOptions};
    use crate::study::runner::mock::MockExecutor;

    fn auto_plan(models: &[&str], slo: &str) -> Plan {
        plan::build(&RunOptions {
            workloads: vec!["sleep:100ms".into()],
            models: models.iter().map(|m| m.to_string()).collect(),
            repeat: Some(1),
            warmup: Some(0),
            timeout: Duration::from_secs(60),
            open: OpenOptions {
                rate: Some("auto".into()),
                slo: Some(slo.into()),
                ..OpenOptions::default()
            },
            ..RunOptions::default()
        })
        .unwrap()
    }

    #[test]
    fn finds_each_models_capacity_within_the_precision() {
        // sleep:100ms: pool:4 serves 40/s, pool:16 160/s, seq 10/s.
        let plan = auto_plan(&["pool:4", "pool:16", "seq"], "p99<150ms");
        let mock = MockExecutor::new(2);
        for (cell, capacity) in plan.cells.iter().zip([40.0, 160.0, 10.0]) {
            let mut seen = vec![];
            let (found, run) = search(&plan, cell, &mock, &mut |_, p| seen.push(p.clone()))
                .unwrap()
                .unwrap();
            let r = found.sustained.unwrap();
            assert!(
                r <= capacity && r >= capacity * (1.0 - PRECISION),
                "{}: {r}",
                cell.key.model
            );
            assert_eq!(seen, found.probes);
            assert!(found.probes.len() <= MAX_PROBES);
            // The run kept is the one at the rate found.
            assert_eq!(run.open.unwrap().rate_asked, r);
            assert_eq!(found.slo, "p99<150ms");
        }
    }

    #[test]
    fn a_model_that_never_keeps_the_slo_has_no_rate() {
        // No rate gets sleep:100ms under 50 ms.
        let plan = auto_plan(&["pool:4"], "p99<50ms");
        let (found, _) = search(&plan, &plan.cells[0], &MockExecutor::new(2), &mut |_, _| {})
            .unwrap()
            .unwrap();
        assert_eq!(found.sustained, None);
        assert!(found.probes.iter().all(|p| !p.ok));
        assert!(found.probes.last().unwrap().rate < 0.5);
    }

    #[test]
    fn the_study_writes_one_run_per_cell_with_its_search() {
        let plan = auto_plan(&["pool:4", "pool:8"], "p99<150ms");
        let dir = tempfile::tempdir().unwrap();
        let mut w =
            crate::analysis::results::ResultsWriter::create(&dir.path().join("r.jsonl")).unwrap();
        let out = crate::study::execute(
            &plan,
            &MockExecutor::new(2),
            &mut w,
            vec![],
            crate::study::Feedback::Quiet,
        )
        .unwrap();
        assert_eq!(out.runs.len(), 2);
        let sustained: Vec<f64> = out
            .analysis
            .cells
            .iter()
            .map(|c| c.rate_search.as_ref().unwrap().sustained.unwrap())
            .collect();
        assert!(sustained[1] > 1.9 * sustained[0], "{sustained:?}");
    }
}
