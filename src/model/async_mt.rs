//! `async:W`: tokio's multi-thread runtime (one worker thread per core, at most W), at most W
//! tasks in flight through a semaphore.
//!
//! CPU work runs inline on the runtime's worker threads, as it does in a naive async program:
//! it occupies a worker while it computes, so CPU speedup is bounded by the worker count.
//! Blocking I/O goes to the runtime's blocking pool (tokio's own advice), and `sleep` uses the
//! runtime's timer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{cores, execute_async, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::{TaskError, TaskRecord};

pub(super) const ENTRY: Entry = Entry {
    name: "async",
    takes_workers: true,
    help: "tokio multi-thread runtime, at most W tasks in flight (CPU work inline, blocking I/O on the blocking pool)",
    build: |w| Box::new(AsyncMultiThread { limit: w.unwrap_or(1) }),
};

/// A tokio multi-thread runtime with a concurrency limit.
pub struct AsyncMultiThread {
    limit: usize,
}

/// Spawns every task on `rt` at once, each waiting for one of `limit` semaphore permits
/// before it starts (the classic `asyncio.gather` + `async with semaphore` pattern), and
/// collects their records.
pub(super) fn drive(rt: &tokio::runtime::Runtime, ctx: &RunCtx, limit: usize) -> Vec<TaskRecord> {
    // Open model: a thread of its own releases each index when it is due, and the runtime
    // spawns the task as it arrives; the semaphore still bounds it to `limit` in flight.
    let feed = ctx.arrivals.as_ref().map(|a| a.feed());
    let (feeder, rx) = match feed {
        Some((f, rx)) => (Some(f), Some(rx)),
        None => (None, None),
    };
    let records = rt.block_on(async {
        let sem = Arc::new(Semaphore::new(limit));
        let task = |i: usize| {
            let (sem, w) = (sem.clone(), ctx.workload.clone());
            tokio::spawn(async move {
                let _permit = sem.acquire().await;
                execute_async(w, i).await
            })
        };
        let handles: Vec<_> = match rx {
            Some(mut rx) => {
                let mut hs = Vec::with_capacity(ctx.tasks);
                while let Some(i) = rx.recv().await {
                    hs.push(task(i));
                }
                hs
            }
            None => (0..ctx.tasks).map(task).collect(),
        };
        let mut out = Vec::with_capacity(ctx.tasks);
        for (i, h) in handles.into_iter().enumerate() {
            out.push(h.await.unwrap_or_else(|e| {
                TaskRecord::not_started(i, TaskError::new("panic", e.to_string()))
            }));
        }
        out
    });
    if let Some(f) = feeder {
        let _ = f.join();
    }
    records
}

/// Builds a runtime with the run's stack size and a timer, counting the threads it starts
/// (workers and blocking-pool threads); the error is the run's reason.
pub(super) fn build_counted(
    builder: &mut tokio::runtime::Builder,
    ctx: &RunCtx,
) -> Result<(tokio::runtime::Runtime, Arc<AtomicUsize>), String> {
    let started = Arc::new(AtomicUsize::new(0));
    let counter = started.clone();
    builder
        .thread_stack_size(ctx.stack_size)
        .enable_all()
        .on_thread_start(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
    builder
        .build()
        .map(|rt| (rt, started))
        .map_err(|e| format!("could not start the tokio runtime: {e}"))
}

/// Builds the runtime, runs every task on it and reports the threads it started.
pub(super) fn run_on(
    builder: &mut tokio::runtime::Builder,
    ctx: &RunCtx,
    limit: usize,
) -> ModelOutcome {
    let (rt, started) = match build_counted(builder, ctx) {
        Ok(x) => x,
        Err(why) => {
            return ModelOutcome {
                error: Some(why),
                ..Default::default()
            }
        }
    };
    let records = drive(&rt, ctx, limit);
    // Every task has finished; closing the idle connections of a process that is about to
    // exit is not the model's work.
    rt.shutdown_background();
    ModelOutcome {
        records,
        threads_created: started.load(Ordering::Relaxed),
        processes_created: 0,
        error: None,
    }
}

impl Model for AsyncMultiThread {
    fn spec(&self) -> String {
        format!("async:{}", self.limit)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.limit)
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.limit.min(tasks)
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(self.limit.min(cores()));
        run_on(&mut builder, ctx, self.limit)
    }
}
