//! `rayon:W`: rayon's work-stealing pool of W threads over the task range.

use rayon::prelude::*;

use super::{Entry, Model, ModelOutcome, RunCtx};
use crate::measure::lanes::Lanes;
use crate::measure::TaskRecord;
use crate::workload::Workload;

/// Runs task `i` on a thread of the pool and records that thread's index as its worker
/// (rayon keeps it in a thread-local: no system call).
fn run_task(w: &dyn Workload, i: usize) -> TaskRecord {
    let rec = super::run_task(w, i);
    TaskRecord {
        worker: rayon::current_thread_index().unwrap_or(0) as u32,
        ..rec
    }
}

pub(super) const ENTRY: Entry = Entry {
    name: "rayon",
    takes_workers: true,
    help: "rayon's work-stealing pool of W threads (the reference work stealer)",
    build: |w| {
        Box::new(RayonPool {
            workers: w.unwrap_or(1),
        })
    },
};

/// A rayon pool.
pub struct RayonPool {
    workers: usize,
}

impl Model for RayonPool {
    fn spec(&self) -> String {
        format!("rayon:{}", self.workers)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.workers)
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.workers.min(tasks)
    }
    fn lanes(&self) -> Lanes {
        Lanes::Worker
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        let pool = match rayon::ThreadPoolBuilder::new()
            .num_threads(self.workers)
            .stack_size(ctx.recipe.settings.stack_size)
            .build()
        {
            Ok(p) => p,
            Err(e) => {
                return ModelOutcome {
                    error: Some(format!(
                        "could not build a rayon pool of {}: {e}",
                        self.workers
                    )),
                    ..Default::default()
                }
            }
        };
        if let Some(a) = &ctx.arrivals {
            // Open model: each task is spawned onto the pool when it is due (from this thread,
            // outside the pool, so no worker is spent waiting for arrivals).
            let (tx, rx) = crossbeam_channel::unbounded();
            a.dispatch(|i| {
                let (tx, w) = (tx.clone(), ctx.workload.clone());
                pool.spawn(move || {
                    let _ = tx.send(run_task(&*w, i));
                });
                true
            });
            drop(tx);
            return ModelOutcome {
                records: rx.iter().collect(),
                threads_created: self.workers,
                processes_created: 0,
                error: None,
            };
        }
        let w = &ctx.workload;
        let records = pool.install(|| {
            (0..ctx.tasks)
                .into_par_iter()
                .with_max_len(1)
                .map(|i| run_task(&**w, i))
                .collect()
        });
        ModelOutcome {
            records,
            threads_created: self.workers,
            processes_created: 0,
            error: None,
        }
    }
}
