//! `--rate auto --slo 'p99<100ms'`: for each cell, the highest arrival rate at which the
//! model keeps the SLO on the corrected latency and achieves 99% of the asked rate, found
//! by short probes (each a fresh-process run through the [`Executor`]): the rate grows
//! fourfold until a probe fails, then bisects between the last good and the first bad rate.
//! With `-r N` the study then measures the rate found N times afresh ([`run_at`]).

use crate::analysis::results::{Probe, RateSearch, RunResult, RunStatus};
use crate::base::error::Result;
use crate::plan::rate::{Rate, Slo, PROBE_DURATION};
use crate::plan::{CellPlan, Plan};
use crate::runner::{Executor, Iteration};

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

/// One run of `cell` at `rate`, sized as a probe: `rate × --duration` tasks (2 s by default),
/// at least [`MIN_PROBE_TASKS`].
pub fn run_at(
    plan: &Plan,
    cell: &CellPlan,
    rate: f64,
    iteration: Iteration,
    executor: &dyn Executor,
) -> Result<RunResult> {
    let duration = plan
        .open
        .as_ref()
        .and_then(|o| o.duration)
        .unwrap_or(PROBE_DURATION)
        .as_secs_f64();
    let tasks = ((rate * duration).ceil() as usize).max(MIN_PROBE_TASKS);
    Ok(executor.run(&plan.at_rate(rate), &cell.with_tasks(tasks), iteration))
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
    let mut probes: Vec<Probe> = Vec::new();
    let mut best: Option<(f64, RunResult)> = None;
    let mut last: Option<RunResult> = None;
    let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
    // A delay-bound cell's capacity is about parallelism / delay: start at half of it (the
    // probes still decide), else at START_RATE.
    let slots = cell.workers.unwrap_or(1).max(1) as f64;
    let mut rate = cell
        .traits
        .nature
        .delay_s()
        .filter(|d| *d > 0.0)
        .map_or(START_RATE, |d| {
            (0.5 * slots / d).clamp(MIN_RATE, crate::plan::rate::MAX_RATE / 4.0)
        });
    while probes.len() < MAX_PROBES {
        if executor.interrupted() {
            return Ok(None);
        }
        let run = run_at(plan, cell, rate, Iteration::Probe(probes.len()), executor)?;
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
    use crate::plan;
    use crate::plan::{OpenOptions, StudyOptions};
    use crate::runner::mock::MockExecutor;

    fn auto_plan(models: &[&str], slo: &str) -> Plan {
        auto_plan_repeated(models, slo, None)
    }

    /// `--rate auto --slo SLO` over `models` on `sleep:100ms`, with `-r` if given.
    fn auto_plan_repeated(models: &[&str], slo: &str, repeat: Option<usize>) -> Plan {
        plan::build(&StudyOptions {
            workloads: vec!["sleep:100ms".into()],
            models: models.iter().map(|m| m.to_string()).collect(),
            repeat: crate::plan::options::RepeatArg { repeat },
            warmup: Some(0),
            timeout: Duration::from_secs(60),
            open: OpenOptions {
                rate: Some("auto".into()),
                slo: Some(slo.into()),
                ..OpenOptions::default()
            },
            ..StudyOptions::default()
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

    /// Runs the study `plan` on `mock` into a temporary results file.
    fn study(plan: &Plan, mock: &MockExecutor) -> crate::study::StudyOutcome {
        let dir = tempfile::tempdir().unwrap();
        let mut w =
            crate::analysis::results::ResultsWriter::create("--json", &dir.path().join("r.jsonl"))
                .unwrap();
        crate::study::execute(
            plan,
            mock,
            &mut w,
            vec![],
            &crate::study::Terminal::silent(),
        )
        .unwrap()
    }

    #[test]
    fn the_study_writes_one_run_per_cell_with_its_search() {
        let plan = auto_plan(&["pool:4", "pool:8"], "p99<150ms");
        assert_eq!((plan.repeat, plan.open.as_ref().unwrap().remeasure), (1, 0));
        let mock = MockExecutor::new(2);
        let out = study(&plan, &mock);
        assert_eq!(out.runs.len(), 2);
        // Without -r, the probe at the rate found is the cell's run: nothing else ran.
        assert!(mock
            .calls()
            .iter()
            .all(|c| matches!(c.iteration, Iteration::Probe(_))));
        let sustained: Vec<f64> = out
            .analysis
            .cells
            .iter()
            .map(|c| c.rate_search.as_ref().unwrap().sustained.unwrap())
            .collect();
        assert!(sustained[1] > 1.9 * sustained[0], "{sustained:?}");
    }

    #[test]
    fn with_repeat_the_rate_found_is_measured_that_many_times_afresh() {
        let plan = auto_plan_repeated(&["pool:4", "pool:8"], "p99<150ms", Some(3));
        assert_eq!((plan.repeat, plan.open.as_ref().unwrap().remeasure), (3, 3));
        let mock = MockExecutor::new(2).jitter(0.2);
        let out = study(&plan, &mock);
        assert_eq!(out.runs.len(), 2 * 3);
        let calls = mock.calls();
        for (cell, found) in plan.cells.iter().zip(&out.analysis.cells) {
            let search = found.rate_search.as_ref().unwrap();
            let rate = search.sustained.unwrap();
            // Each cell: its probes, then three counted runs at the rate found, sized as its
            // probes, each written with the search.
            let mine: Vec<Iteration> = calls
                .iter()
                .filter(|c| c.key.model == cell.key.model)
                .map(|c| c.iteration)
                .collect();
            let probes = search.probes.len();
            assert_eq!(mine.len(), probes + 3, "{mine:?}");
            assert!(mine[..probes]
                .iter()
                .enumerate()
                .all(|(k, i)| *i == Iteration::Probe(k)));
            assert_eq!(
                mine[probes..],
                [0, 1, 2].map(Iteration::Counted),
                "{}",
                cell.key.model
            );
            let runs: Vec<&RunResult> = out
                .runs
                .iter()
                .filter(|r| r.key.model == cell.key.model)
                .collect();
            assert_eq!(runs.iter().map(|r| r.rep).collect::<Vec<_>>(), [0, 1, 2]);
            for r in &runs {
                assert_eq!(r.open.as_ref().unwrap().rate_asked, rate);
                assert_eq!(r.key.tasks, found.key.tasks);
                assert_eq!(r.rate_search.as_ref(), Some(search));
            }
            // The row is the three runs' median, not one probe.
            assert_eq!(found.runs, 3);
            let mut walls: Vec<f64> = runs.iter().map(|r| r.wall_s).collect();
            walls.sort_by(f64::total_cmp);
            assert_eq!(found.wall_median_s, Some(walls[1]));
            assert!(
                walls[0] < walls[2],
                "the jitter spreads the runs: {walls:?}"
            );
        }
    }

    #[test]
    fn with_repeat_a_cell_that_sustained_no_rate_keeps_its_last_probe() {
        // No rate gets sleep:100ms under 50 ms: nothing to measure again.
        let plan = auto_plan_repeated(&["pool:4"], "p99<50ms", Some(3));
        let mock = MockExecutor::new(2);
        let out = study(&plan, &mock);
        assert_eq!(out.runs.len(), 1);
        assert_eq!(out.runs[0].rate_search.as_ref().unwrap().sustained, None);
        assert!(mock
            .calls()
            .iter()
            .all(|c| matches!(c.iteration, Iteration::Probe(_))));
    }

    #[test]
    fn an_interrupt_between_the_runs_at_the_rate_found_keeps_those_done() {
        let plan = auto_plan_repeated(&["pool:4"], "p99<150ms", Some(3));
        let probes = search(&plan, &plan.cells[0], &MockExecutor::new(2), &mut |_, _| {})
            .unwrap()
            .unwrap()
            .0
            .probes
            .len();
        // Ctrl-C once the probes and one run at the rate found are made.
        let out = study(&plan, &MockExecutor::new(2).interrupt_after(probes + 1));
        assert!(out.interrupted);
        assert_eq!(out.runs.len(), 1);
        assert_eq!(out.runs[0].rep, 0);
    }

    #[test]
    fn repeat_zero_is_refused_with_rate_auto_too() {
        let err = plan::build(&StudyOptions {
            workloads: vec!["sleep:100ms".into()],
            models: vec!["pool:4".into()],
            repeat: crate::plan::options::RepeatArg { repeat: Some(0) },
            open: OpenOptions {
                rate: Some("auto".into()),
                slo: Some("p99<150ms".into()),
                ..OpenOptions::default()
            },
            ..StudyOptions::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("--repeat '0'"), "{err}");
    }
}
