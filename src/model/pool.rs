//! `pool:W`: a hand-written pool of W threads over a crossbeam channel, the classic's
//! `Queue` + workers pattern.

use super::os_thread;
use super::{never_started, run_task, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::lanes::Lanes;
use crate::measure::TaskRecord;

pub(super) const ENTRY: Entry = Entry {
    name: "pool",
    takes_workers: true,
    help: "W threads taking tasks from one channel (the classic Queue pattern)",
    build: |w| {
        Box::new(Pool {
            workers: w.unwrap_or(1),
        })
    },
};

/// A fixed pool of threads over a channel.
pub struct Pool {
    workers: usize,
}

impl Model for Pool {
    fn spec(&self) -> String {
        format!("pool:{}", self.workers)
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
        let (tx, rx) = crossbeam_channel::unbounded::<usize>();
        if ctx.arrivals.is_none() {
            for i in 0..ctx.tasks {
                // The receiver is alive (we hold it), so send cannot fail.
                let _ = tx.send(i);
            }
        }
        let mut threads = Vec::with_capacity(self.workers);
        let mut error = None;
        for k in 0..self.workers {
            let (rx, w) = (rx.clone(), ctx.workload.clone());
            let lane = k as u32;
            match os_thread::spawn(ctx.recipe.settings.stack_size, move || {
                rx.iter()
                    .map(|i| TaskRecord {
                        worker: lane,
                        ..run_task(&*w, i)
                    })
                    .collect::<Vec<_>>()
            }) {
                Ok(t) => threads.push(t),
                Err(e) => {
                    error = Some(format!(
                        "could create {k} of {} pool threads: {e}",
                        self.workers
                    ));
                    break;
                }
            }
        }
        let created = threads.len();
        // Open model: each task is submitted to the queue when it is due; the W threads take
        // them as they free up, so arrivals beyond W wait in the channel.
        if let Some(a) = &ctx.arrivals {
            a.dispatch(|i| tx.send(i).is_ok());
        }
        drop(tx);
        let mut records: Vec<TaskRecord> = Vec::with_capacity(ctx.tasks);
        for t in threads {
            match t.join() {
                Ok(mut rs) => records.append(&mut rs),
                Err(_) => error = Some("a pool thread panicked".into()),
            }
        }
        // With no worker at all, the queued tasks never ran.
        let reason = error.clone().unwrap_or_default();
        records.extend(never_started(rx.try_iter(), &reason));
        ModelOutcome {
            records,
            threads_created: created,
            processes_created: 0,
            error,
        }
    }
}
