//! Studies: the plan (matrix of cells), the built-in presets, the fresh-process runner, the
//! child side of a run, machine metadata, and the analysis from runs to cells.

pub mod child;
pub mod machine;
pub mod plan;
pub mod presets;
pub mod runner;

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub use plan::{Plan, RunOptions};

use crate::analysis::results::{Line, Meta, ResultsWriter, RunResult, RunStatus, SCHEMA};
use crate::analysis::{self, Analysis};
use crate::error::{Error, Result};

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

fn progress_bar(total: u64, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:30} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left  {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Runs every cell of `plan` (warm-ups first, then `repeat` rounds over the cells, alternating
/// direction so drift spreads evenly), writing each run to `writer` as it finishes and the
/// cells at the end. `progress` shows a bar on stderr.
pub fn execute(
    plan: &Plan,
    writer: &mut ResultsWriter,
    command: Vec<String>,
    progress: bool,
    server: Option<&crate::server::Stats>,
) -> Result<StudyOutcome> {
    let exe: PathBuf =
        std::env::current_exe().map_err(|e| Error::io("finding our own binary", e))?;
    let machine = machine::machine();
    let meta = Meta {
        schema: SCHEMA,
        concur: crate::VERSION.into(),
        started: machine::now_rfc3339(),
        machine: machine.clone(),
        command,
        notes: plan.notes.clone(),
    };
    writer.write(&Line::Meta(meta.clone()))?;
    crate::interrupt::install_interrupt_handler();
    let total = plan.cells.len() * (plan.warmup + plan.repeat);
    let bar = progress_bar(total as u64, progress);
    let mut runs = Vec::with_capacity(plan.cells.len() * plan.repeat);
    let mut interrupted = false;
    'warm: for cell in &plan.cells {
        for _ in 0..plan.warmup {
            if crate::interrupt::interrupted() {
                interrupted = true;
                break 'warm;
            }
            bar.set_message(format!(
                "warm-up {} {}",
                cell.key.workload,
                cell.key.label()
            ));
            runner::run_once(&exe, plan, cell, 0, server);
            bar.inc(1);
        }
    }
    'rounds: for rep in 0..plan.repeat {
        if interrupted {
            break;
        }
        let order: Vec<_> = if rep % 2 == 0 {
            plan.cells.iter().collect()
        } else {
            plan.cells.iter().rev().collect()
        };
        for cell in order {
            if crate::interrupt::interrupted() {
                interrupted = true;
                break 'rounds;
            }
            bar.set_message(format!("{} {}", cell.key.workload, cell.key.label()));
            let run = runner::run_once(&exe, plan, cell, rep, server);
            if run.status == RunStatus::Interrupted {
                interrupted = true;
                break 'rounds;
            }
            writer.write(&Line::Run(run.clone()))?;
            runs.push(run);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let mut analysis = analysis::analyze(&runs, machine.cores);
    if machine::loaded(&machine) {
        analysis.warnings.insert(
            0,
            format!(
                "the machine was {:.0}% busy with other work when the study started: timings may be inflated",
                100.0 * machine.cpu_busy.unwrap_or(0.0)
            ),
        );
    }
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
