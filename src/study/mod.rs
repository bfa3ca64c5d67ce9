//! Studies: the plan (matrix of cells), the built-in presets, the fresh-process runner, the
//! child side of a run, machine metadata, and the analysis from runs to cells.

pub(crate) mod bind;
pub(crate) mod conduct;
pub mod search;

pub use crate::plan::{Plan, StudyOptions};
pub use crate::runner::in_process::InProcessExecutor;

pub use crate::runner::{Executor, Iteration, ProcessExecutor, StudyServer};

pub use crate::os::terminal::{Feedback, Terminal};

use crate::analysis::results::{Line, Meta, ResultsWriter, RunResult, RunStatus, SCHEMA};
use crate::analysis::{self, Analysis};
use crate::base::error::Result;

/// What a study produced.
#[derive(Debug, Clone)]
pub struct StudyOutcome {
    /// The meta line written.
    pub meta: Meta,
    /// Every counted run, in the order run.
    pub runs: Vec<RunResult>,
    /// Cells and warnings.
    pub analysis: Analysis,
    /// Whether the user stopped the study early (the finished runs are all kept).
    pub interrupted: bool,
}

/// The results' meta line for a study starting now on `machine`: the one place it is made.
pub fn meta(
    machine: crate::analysis::results::Machine,
    command: &[String],
    notes: Vec<String>,
    hosts: Vec<crate::analysis::results::MetaHost>,
) -> Meta {
    Meta {
        schema: SCHEMA,
        concur: crate::base::version::VERSION.into(),
        started: crate::runner::machine::now_rfc3339(),
        machine,
        // The command line may hold a Redis password (--jobs-backend): never recorded.
        command: command
            .iter()
            .map(|a| crate::base::secret::mask_credentials(a))
            .collect(),
        allocator: crate::base::allocator::allocator().map(str::to_string),
        notes,
        hosts,
    }
}

/// Runs every cell of `plan` through `executor` (warm-ups first, then `repeat` rounds over the
/// cells, alternating direction so drift spreads evenly), writing each counted run to `writer`
/// as it finishes and the cells at the end, showing its progress on `terminal`. An interrupt
/// stops the study before the next run; the runs finished so far are kept.
pub fn execute(
    plan: &Plan,
    executor: &dyn Executor,
    writer: &mut ResultsWriter,
    command: Vec<String>,
    terminal: &Terminal,
) -> Result<StudyOutcome> {
    let machine = executor.machine();
    let meta = meta(
        machine.clone(),
        &command,
        plan.notes.clone(),
        executor.hosts(),
    );
    writer.write(&Line::Meta(meta.clone()))?;
    let auto = plan
        .open
        .as_ref()
        .is_some_and(|o| matches!(o.rate, crate::plan::rate::Rate::Auto(_)));
    // `--rate auto` makes one search per cell, without warm-ups, then `-r N` runs at the rate
    // found, if asked.
    let total = if auto {
        plan.cells.len() * plan.repeat
    } else {
        plan.cells.len() * (plan.warmup + plan.repeat)
    };
    let per_cell = if auto {
        plan.repeat
    } else {
        plan.warmup + plan.repeat
    };
    terminal.cells(
        format!("study '{}'", plan.name),
        plan.cells
            .iter()
            .map(|c| {
                let label = format!("{} {}", c.key.workload, c.key.label());
                (label, per_cell as u64)
            })
            .collect(),
    );
    terminal.start(total as u64);
    executor.show_live(terminal.clone());
    if auto {
        return execute_auto(plan, executor, writer, meta, machine, terminal);
    }
    let mut runs = Vec::with_capacity(plan.cells.len() * plan.repeat);
    let mut interrupted = false;
    let mut hooks = CellHooks::new(plan, executor);
    'warm: for (i, cell) in plan.cells.iter().enumerate() {
        for w in 0..plan.warmup {
            if executor.interrupted() {
                interrupted = true;
                break 'warm;
            }
            terminal.doing(format!(
                "warm-up {} {}",
                cell.key.workload,
                cell.key.label()
            ));
            terminal.cell(i);
            let run = hooks.run(i, Iteration::Warmup(w), false);
            terminal.ran(i, shown(&run, false));
            terminal.advance();
        }
    }
    'rounds: for rep in 0..plan.repeat {
        if interrupted {
            break;
        }
        let order: Vec<_> = if rep % 2 == 0 {
            plan.cells.iter().enumerate().collect()
        } else {
            plan.cells.iter().enumerate().rev().collect()
        };
        for (i, cell) in order {
            if executor.interrupted() {
                interrupted = true;
                break 'rounds;
            }
            terminal.doing(format!("{} {}", cell.key.workload, cell.key.label()));
            terminal.cell(i);
            let run = hooks.run(i, Iteration::Counted(rep), rep + 1 == plan.repeat);
            if run.status == RunStatus::Interrupted {
                interrupted = true;
                break 'rounds;
            }
            writer.write(&Line::Run(run.clone()))?;
            terminal.ran(i, shown(&run, true));
            runs.push(run);
            terminal.advance();
        }
    }
    // Cells set up but not cleaned up (an interrupted study) are cleaned up all the same.
    for why in hooks.finish() {
        terminal.warning(why);
    }
    finish(writer, meta, &machine, runs, interrupted, terminal)
}

/// What the live view shows of a finished run (`counted`: not a warm-up).
fn shown(run: &RunResult, counted: bool) -> crate::os::live::RunDone {
    crate::os::live::RunDone {
        counted,
        wall_s: run.wall_s,
        tasks: (run.tasks_ok + run.tasks_failed) as u64,
        cpu_s: run.user_s + run.sys_s,
        pss_kib: run.tree_pss_kib,
        p50_us: run.latency_us.as_ref().map(|l| l.p50),
        p99_us: run.latency_us.as_ref().map(|l| l.p99),
    }
}

/// hyperfine's hooks around a study's runs: `--setup` before a cell's first run, `--prepare`
/// and `--conclude` around each run, `--cleanup` after its last. A failing hook fails the
/// runs it guards (status `hook`, the hook's reason as the error); the study goes on.
struct CellHooks<'a> {
    plan: &'a Plan,
    executor: &'a dyn Executor,
    /// Per cell: `None` until set up, then how `--setup` went.
    set_up: Vec<Option<std::result::Result<(), String>>>,
    cleaned: Vec<bool>,
}

impl<'a> CellHooks<'a> {
    fn new(plan: &'a Plan, executor: &'a dyn Executor) -> Self {
        CellHooks {
            plan,
            executor,
            set_up: vec![None; plan.cells.len()],
            cleaned: vec![false; plan.cells.len()],
        }
    }

    /// One run of cell `i` with its hooks; `last` runs `--cleanup` after it.
    fn run(&mut self, i: usize, iteration: Iteration, last: bool) -> RunResult {
        use crate::plan::Hook;
        let cell = &self.plan.cells[i];
        let setup = self.set_up[i]
            .get_or_insert_with(|| self.executor.hook(self.plan, cell, Hook::Setup))
            .clone();
        let failed = |why: String| {
            let mut run = crate::runner::convert::template(
                cell,
                iteration.rep(),
                RunStatus::Hook,
                0.0,
                Some(why),
            );
            run.tasks_failed = cell.key.tasks;
            run
        };
        let mut run = match setup.and_then(|_| self.executor.hook(self.plan, cell, Hook::Prepare)) {
            Err(why) => failed(why),
            Ok(()) => {
                let mut run = self.executor.run(self.plan, cell, iteration);
                if run.status != RunStatus::Interrupted {
                    if let Err(why) = self.executor.hook(self.plan, cell, Hook::Conclude) {
                        run.status = RunStatus::Hook;
                        run.error = Some(why);
                    }
                }
                run
            }
        };
        if last && run.status != RunStatus::Interrupted {
            if let Some(why) = self.cleanup(i) {
                run.status = RunStatus::Hook;
                run.error.get_or_insert(why);
            }
        }
        run
    }

    /// `--cleanup` of cell `i` if it was set up and not cleaned up yet; the reason if it failed.
    fn cleanup(&mut self, i: usize) -> Option<String> {
        if self.cleaned[i] || !matches!(self.set_up[i], Some(Ok(()))) {
            return None;
        }
        self.cleaned[i] = true;
        let cell = &self.plan.cells[i];
        self.executor
            .hook(self.plan, cell, crate::plan::Hook::Cleanup)
            .err()
    }

    /// Cleans up every cell still set up; the reasons of the cleanups that failed.
    fn finish(&mut self) -> Vec<String> {
        (0..self.plan.cells.len())
            .filter_map(|i| self.cleanup(i))
            .collect()
    }
}

/// Ends a study: clears the bar, analyses the runs and writes the cell lines.
fn finish(
    writer: &mut ResultsWriter,
    meta: Meta,
    machine: &crate::analysis::results::Machine,
    runs: Vec<RunResult>,
    interrupted: bool,
    terminal: &Terminal,
) -> Result<StudyOutcome> {
    terminal.clear();
    let analysis = analysis::analyze(&runs, machine);
    for c in &analysis.cells {
        writer.write(&Line::Cell(c.clone()))?;
    }
    Ok(StudyOutcome {
        meta,
        runs,
        analysis,
        interrupted,
    })
}

/// `--rate auto`: one search per cell (no warm-up: the probes warm up). Without `-r`, the
/// probe at each cell's sustained rate is its run; with `-r N`, N fresh runs at that rate are
/// (a probe kept for passing would flatter the row), so the row is their median. Every run
/// written carries its cell's search. A cell that sustained no rate has its last probe as
/// its one run: there is no rate to measure again.
fn execute_auto(
    plan: &Plan,
    executor: &dyn Executor,
    writer: &mut ResultsWriter,
    meta: Meta,
    machine: crate::analysis::results::Machine,
    terminal: &Terminal,
) -> Result<StudyOutcome> {
    let mut runs = Vec::with_capacity(plan.cells.len());
    let mut interrupted = false;
    for (i, cell) in plan.cells.iter().enumerate() {
        if executor.interrupted() {
            interrupted = true;
            break;
        }
        terminal.doing(format!(
            "searching {} {}",
            cell.key.workload, cell.key.model
        ));
        terminal.cell(i);
        let quantile = match plan.open.as_ref().map(|o| &o.rate) {
            Some(crate::plan::rate::Rate::Auto(slo)) => slo.quantile.name(),
            _ => "latency",
        };
        let mut each = |c: &crate::plan::CellPlan, p: &crate::analysis::results::Probe| {
            let text = format!(
                "rate auto {} {}: {:.1}/s asked, {} achieved, {} {}: {}",
                c.key.workload,
                c.key.model,
                p.rate,
                p.achieved.map_or("-".into(), |a| format!("{a:.1}/s")),
                quantile,
                p.latency_us
                    .map_or("-".into(), |l| crate::base::units::fmt_secs(l as f64 / 1e6)),
                if p.ok { "kept" } else { "missed" }
            );
            terminal.line(text);
        };
        let Some((found, probe)) = search::search(plan, cell, executor, &mut each)? else {
            interrupted = executor.interrupted();
            if interrupted {
                break;
            }
            terminal.advance_by(plan.repeat as u64);
            continue;
        };
        let remeasure = plan.open.as_ref().map_or(0, |o| o.remeasure);
        let mut keep = |mut run: RunResult| -> Result<()> {
            run.rate_search = Some(found.clone());
            writer.write(&Line::Run(run.clone()))?;
            terminal.ran(i, shown(&run, true));
            runs.push(run);
            terminal.advance();
            Ok(())
        };
        match found.sustained.filter(|_| remeasure > 0) {
            None => {
                keep(probe)?;
                terminal.advance_by(plan.repeat.saturating_sub(1) as u64);
            }
            Some(rate) => {
                terminal.doing(format!(
                    "{} {} at {rate:.1}/s",
                    cell.key.workload, cell.key.model
                ));
                for rep in 0..remeasure {
                    if executor.interrupted() {
                        interrupted = true;
                        break;
                    }
                    let run = search::run_at(plan, cell, rate, Iteration::Counted(rep), executor)?;
                    if run.status == RunStatus::Interrupted {
                        interrupted = true;
                        break;
                    }
                    keep(run)?;
                }
            }
        }
        if interrupted {
            break;
        }
    }
    finish(writer, meta, &machine, runs, interrupted, terminal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::mock::{mock_plan, MockCall, MockExecutor};

    /// Runs `plan` on `mock` into a temporary results file; returns the outcome and the
    /// file's lines.
    fn study(plan: &Plan, mock: &MockExecutor) -> (StudyOutcome, Vec<Line>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut w = ResultsWriter::create("--json", &path).unwrap();
        let out = execute(
            plan,
            mock,
            &mut w,
            vec!["concur".into(), "test".into()],
            &Terminal::silent(),
        )
        .unwrap();
        let lines = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (out, lines)
    }

    fn call(plan: &Plan, cell: usize, iteration: Iteration) -> MockCall {
        MockCall {
            key: plan.cells[cell].key.clone(),
            iteration,
        }
    }

    fn two_cells(repeat: usize, warmup: usize) -> Plan {
        let mut p = mock_plan(&["fib:20"], &["seq", "pool:2"], &[4], repeat);
        p.warmup = warmup;
        p
    }

    #[test]
    fn warms_up_each_cell_then_alternates_the_order_of_the_rounds() {
        use Iteration::{Counted, Warmup};
        let plan = two_cells(3, 2);
        let mock = MockExecutor::new(2);
        let (out, _) = study(&plan, &mock);
        let want = vec![
            call(&plan, 0, Warmup(0)),
            call(&plan, 0, Warmup(1)),
            call(&plan, 1, Warmup(0)),
            call(&plan, 1, Warmup(1)),
            call(&plan, 0, Counted(0)),
            call(&plan, 1, Counted(0)),
            call(&plan, 1, Counted(1)),
            call(&plan, 0, Counted(1)),
            call(&plan, 0, Counted(2)),
            call(&plan, 1, Counted(2)),
        ];
        assert_eq!(mock.calls(), want);
        assert!(!out.interrupted);
        // Warm-ups are not counted.
        let reps: Vec<(String, usize)> = out
            .runs
            .iter()
            .map(|r| (r.key.model.clone(), r.rep))
            .collect();
        let seq = || "seq".to_string();
        let pool = || "pool:2".to_string();
        assert_eq!(
            reps,
            [
                (seq(), 0),
                (pool(), 0),
                (pool(), 1),
                (seq(), 1),
                (seq(), 2),
                (pool(), 2)
            ]
        );
    }

    #[test]
    fn writes_meta_then_one_line_per_counted_run_then_the_cells() {
        let plan = two_cells(3, 1);
        let (out, lines) = study(&plan, &MockExecutor::new(2));
        assert_eq!(lines.len(), 1 + 6 + 2);
        let Line::Meta(meta) = &lines[0] else {
            panic!("first line {:?}", lines[0])
        };
        assert_eq!(meta.schema, SCHEMA);
        assert_eq!(meta.machine.cores, 2);
        assert_eq!(meta.command, ["concur", "test"]);
        let runs: Vec<&RunResult> = lines[1..7]
            .iter()
            .map(|l| match l {
                Line::Run(r) => r,
                other => panic!("expected a run line, got {other:?}"),
            })
            .collect();
        assert_eq!(runs, out.runs.iter().collect::<Vec<_>>());
        for (line, cell) in lines[7..].iter().zip(&out.analysis.cells) {
            assert_eq!(line, &Line::Cell(cell.clone()));
        }
        assert_eq!(out.analysis.cells[0].runs, 3);
        assert_eq!(out.analysis.cells[1].key.model, "pool:2");
    }

    #[test]
    fn an_interrupt_between_runs_keeps_the_finished_ones() {
        let plan = two_cells(3, 0);
        let mock = MockExecutor::new(2).interrupt_after(3);
        let (out, lines) = study(&plan, &mock);
        assert!(out.interrupted);
        assert_eq!(mock.calls().len(), 3);
        assert_eq!(out.runs.len(), 3);
        let run_lines = lines.iter().filter(|l| matches!(l, Line::Run(_))).count();
        let cell_lines = lines.iter().filter(|l| matches!(l, Line::Cell(_))).count();
        assert_eq!((run_lines, cell_lines), (3, 2));
        assert_eq!(out.analysis.cells[0].runs, 1);
        assert_eq!(out.analysis.cells[1].runs, 2);
    }

    #[test]
    fn a_run_interrupted_midway_is_dropped_and_the_study_stops() {
        let plan = two_cells(3, 0);
        let mock = MockExecutor::new(2).interrupt_during(2);
        let (out, lines) = study(&plan, &mock);
        assert!(out.interrupted);
        assert_eq!(mock.calls().len(), 3);
        assert_eq!(out.runs.len(), 2);
        assert!(out.runs.iter().all(|r| r.status == RunStatus::Ok));
        assert_eq!(
            lines.iter().filter(|l| matches!(l, Line::Run(_))).count(),
            2
        );
    }

    #[test]
    fn an_interrupt_during_the_warm_ups_counts_nothing() {
        let plan = two_cells(3, 2);
        let mock = MockExecutor::new(2).interrupt_after(1);
        let (out, lines) = study(&plan, &mock);
        assert!(out.interrupted);
        assert_eq!(mock.calls().len(), 1);
        assert!(out.runs.is_empty() && out.analysis.cells.is_empty());
        assert_eq!(lines.len(), 1);
    }

    #[test]
    fn a_failing_prepare_hook_fails_every_run_and_the_study_goes_on() {
        let plan = two_cells(2, 1);
        let mock = MockExecutor::new(2).failing_hook(crate::plan::Hook::Prepare);
        let (out, _) = study(&plan, &mock);
        assert!(
            mock.calls().is_empty(),
            "no run is made after a failed --prepare"
        );
        assert_eq!(out.runs.len(), 4);
        assert!(out.runs.iter().all(|r| r.status == RunStatus::Hook
            && r.error.as_deref() == Some("--prepare 'mock' exited with code 3: mock hook")));
    }

    #[test]
    fn a_failing_cleanup_hook_fails_each_cells_last_run() {
        let plan = two_cells(2, 0);
        let mock = MockExecutor::new(2).failing_hook(crate::plan::Hook::Cleanup);
        let (out, _) = study(&plan, &mock);
        let statuses: Vec<RunStatus> = out.runs.iter().map(|r| r.status).collect();
        assert_eq!(
            statuses,
            [
                RunStatus::Ok,
                RunStatus::Ok,
                RunStatus::Hook,
                RunStatus::Hook
            ]
        );
    }

    #[test]
    fn failed_runs_are_written_and_counted() {
        use crate::runner::mock::MockEnd;
        let plan = mock_plan(&["fib:20"], &["seq", "thread", "fork"], &[4], 2);
        let mock = MockExecutor::new(2)
            .failing("thread", MockEnd::Crash)
            .failing("fork", MockEnd::Timeout);
        let (out, _) = study(&plan, &mock);
        assert!(!out.interrupted);
        assert_eq!(out.runs.len(), 6);
        let cell = |m: &str| {
            out.analysis
                .cells
                .iter()
                .find(|c| c.key.model == m)
                .unwrap()
        };
        assert_eq!(cell("thread").runs_failed, 2);
        assert_eq!(
            cell("thread").error.as_deref(),
            Some("killed by SIGSEGV: mock: segfault")
        );
        assert_eq!(
            cell("fork").error.as_deref(),
            Some("timed out after 60.000 s")
        );
        assert_eq!(cell("seq").runs_failed, 0);
    }
}
