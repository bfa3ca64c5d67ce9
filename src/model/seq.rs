//! `seq`: every task in turn on the calling thread, the baseline every speedup is measured
//! against.

use super::{run_task, Entry, Model, ModelOutcome, RunCtx};

pub(super) const ENTRY: Entry = Entry {
    name: "seq",
    takes_workers: false,
    help: "one task after another on one thread: the baseline",
    build: |_| Box::new(Seq),
};

/// Sequential execution.
pub struct Seq;

impl Model for Seq {
    fn spec(&self) -> String {
        "seq".into()
    }
    fn workers(&self) -> Option<usize> {
        None
    }
    fn parallelism(&self, _tasks: usize) -> usize {
        1
    }
    /// One worker, the calling thread: every record's worker is 0.
    fn lanes(&self) -> super::Lanes {
        super::Lanes::Worker
    }
    fn is_baseline(&self) -> bool {
        true
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        let records = match &ctx.arrivals {
            // One at a time from a queue: a task that arrives while the previous one runs
            // waits for it, and that wait is its queue time.
            Some(a) => {
                let _releasing = a.releasing();
                (0..a.tasks())
                    .map(|i| {
                        a.wait_if_idle(i);
                        run_task(&*ctx.workload, i)
                    })
                    .collect()
            }
            None => (0..ctx.tasks)
                .map(|i| run_task(&*ctx.workload, i))
                .collect(),
        };
        ModelOutcome {
            records,
            ..Default::default()
        }
    }
}
