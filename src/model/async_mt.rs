//! `async:W`: tokio's multi-thread runtime (one worker thread per core, at most W), W tasks
//! (worker loops) taking the tasks in turn, so at most W in flight.
//!
//! CPU work runs inline on the runtime's worker threads, as it does in a naive async program:
//! it occupies a worker while it computes, so CPU speedup is bounded by the worker count.
//! Blocking I/O goes to the runtime's blocking pool (tokio's own advice), and `sleep` uses the
//! runtime's timer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::arrivals::Released;
use super::{cores, run_task_async, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::{TaskError, TaskRecord};
use crate::workload::{task_group, Workload};

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

/// Where the worker loops take their next task from.
enum Source {
    /// Every task at once: the next index is a counter.
    Closed { next: AtomicUsize, tasks: usize },
    /// Indices released, when they are due, by a timer task on the runtime itself.
    Open {
        released: Arc<Released>,
        tasks: usize,
    },
}

/// What every worker loop of a run shares, behind one pointer: where the indices come from,
/// the workload, one vector for the run's records (one record a task, none copied), and how
/// many loops have not ended.
struct Shared {
    source: Source,
    workload: Arc<dyn Workload>,
    sink: Mutex<Vec<TaskRecord>>,
    /// Loops not ended yet ([`LoopHold`]); the last to end wakes the run ([`Shared::ended`]).
    live: AtomicUsize,
    /// Woken when `live` reaches 0.
    ended: tokio::sync::Notify,
    /// Whether a loop ended in a panic, which lost the task it was running.
    lost: AtomicBool,
}

impl Shared {
    /// A closed run's next index, none when every task is taken (or the run is open).
    fn next_closed(&self) -> Option<usize> {
        match &self.source {
            Source::Closed { next, tasks } => {
                let i = next.fetch_add(1, Ordering::Relaxed);
                (i < *tasks).then_some(i)
            }
            Source::Open { .. } => None,
        }
    }

    fn keep(&self, rec: TaskRecord) {
        self.sink
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(rec);
    }

    /// Returns once every loop has ended.
    async fn all_ended(&self) {
        // `notify_one` leaves a permit when nobody waits yet, so an end between the check and
        // the wait is not missed; a permit left from before only costs one more check.
        while self.live.load(Ordering::Acquire) > 0 {
            self.ended.notified().await;
        }
    }
}

/// A worker loop's share of [`Shared`]: the loop holds it for its whole life, and its drop
/// (the loop's end, or a panic unwinding through the loop) counts the loop ended. The run
/// waits on that count instead of on every loop's `JoinHandle`: at `async:N` there is a loop a
/// task, and a vector of handles held 8 bytes a waiting task (docs/benchmarks.md §31).
struct LoopHold(Arc<Shared>);

impl std::ops::Deref for LoopHold {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl Drop for LoopHold {
    fn drop(&mut self) {
        // A task's panic is caught in `run_task_async`; a loop that still unwound lost the
        // task it was running.
        if std::thread::panicking() {
            self.0.lost.store(true, Ordering::Relaxed);
        }
        if self.0.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.ended.notify_one();
        }
    }
}

/// One worker loop of a closed run: the next index from the counter until none is left. Its
/// state is one pointer, an index and the task's future, and holds no release future (136
/// bytes, in [`open_loop`]): at async:N there is a loop per task, and a smaller future keeps
/// tokio's task cell in a smaller size class (the tasks study's 1,000,000 waiting tasks).
async fn closed_loop(shared: LoopHold) {
    while let Some(i) = shared.next_closed() {
        let rec = run_task_async(shared.workload.clone(), i).await;
        shared.keep(rec);
    }
}

/// One worker loop of an open run: each index as the release timer lets it go.
async fn open_loop(shared: LoopHold) {
    let Source::Open { released, tasks } = &shared.source else {
        return;
    };
    while let Some(i) = released.take(*tasks).await {
        let rec = run_task_async(shared.workload.clone(), i).await;
        shared.keep(rec);
    }
}

/// Runs every task on `rt` from `limit` worker loops, each taking the next index as soon as
/// its task ends (asyncio's worker-queue pattern), and collects their records by index.
///
/// Measured against the alternatives (docs/benchmarks.md, sections 3 and 9): spawning a task
/// per index from a loop that first awaits a semaphore permit cost 18.8 µs per task in
/// cross-thread wake-ups; spawning every task at once with the permit taken inside (the
/// `asyncio.gather` + semaphore pattern) cost 0.62 µs, but kept every waiting task alive (27
/// MiB at 100,000 tasks with 10,000 in flight). Worker loops cost 0.24 µs, keep only `limit`
/// tasks alive and wake nobody between two tasks.
///
/// `grouped` (the multi-thread runtime): when the workload's requests are streams over C HTTP/2
/// connections, the loops run in C task groups ([`task_group`]), each one task with its
/// connection's driver, instead of a task each.
pub(super) fn drive(
    rt: &tokio::runtime::Runtime,
    ctx: &RunCtx,
    limit: usize,
    grouped: bool,
) -> Vec<TaskRecord> {
    // Open model: the runtime's own event loop releases each index when it is due (a timer
    // task, `Arrivals::release_on_timer`); a loop that is free takes it, so the limit still
    // bounds the tasks in flight.
    let (feeder, source) = match &ctx.arrivals {
        Some(a) => {
            let released = Arc::new(Released::default());
            (
                Some((a.clone(), released.clone())),
                Source::Open {
                    released,
                    tasks: ctx.tasks,
                },
            )
        }
        None => (
            None,
            Source::Closed {
                next: AtomicUsize::new(0),
                tasks: ctx.tasks,
            },
        ),
    };
    let open = matches!(source, Source::Open { .. });
    let loops = limit.min(ctx.tasks).max(1);
    let shared = Arc::new(Shared {
        source,
        workload: ctx.workload.clone(),
        sink: Mutex::new(Vec::with_capacity(ctx.tasks)),
        // Each of the `loops` holds made below counts one down when it drops.
        live: AtomicUsize::new(loops),
        ended: tokio::sync::Notify::new(),
        lost: AtomicBool::new(false),
    });
    let hold = || LoopHold(shared.clone());
    let groups = match ctx.workload.http().and_then(|h| h.connection_groups()) {
        Some(c) if grouped => c.clamp(1, loops),
        _ => 0,
    };
    let http = ctx.workload.http().is_some();
    let mut records = rt.block_on(async {
        if http {
            // Ends with the runtime (`shutdown_background`), like every task left.
            tokio::spawn(hold_timer_wheel());
        }
        let timer = feeder.map(|(a, r)| tokio::spawn(a.release_on_timer(r)));
        let one = |shared: LoopHold| async move {
            if open {
                open_loop(shared).await
            } else {
                closed_loop(shared).await
            }
        };
        // Loops are not joined by their handles (dropped here: a vector of them would hold 8
        // bytes a waiting task) but counted by their holds; a task group is joined, since
        // what it drives (its connection) ends with it.
        let mut groups_joined = Vec::new();
        if groups > 0 {
            // Loop `i` in group `i % groups`: the loops spread evenly.
            for g in 0..groups {
                let members = (g..loops).step_by(groups).map(|_| one(hold()));
                groups_joined.push(tokio::spawn(task_group::run(g, members.collect())));
            }
        } else if open {
            for _ in 0..loops {
                tokio::spawn(open_loop(hold()));
            }
        } else {
            // Each loop spawned as itself, not through `one`: an async block holding either
            // loop is as large as the open one, and tokio's task cell (128-byte aligned) took
            // 384 bytes a waiting task instead of 256 (tests/task_allocations.rs).
            for _ in 0..loops {
                tokio::spawn(closed_loop(hold()));
            }
        }
        let mut lost = None;
        for h in groups_joined {
            if let Err(e) = h.await {
                lost = Some(("panic", e.to_string()));
            }
        }
        shared.all_ended().await;
        if lost.is_none() && shared.lost.load(Ordering::Relaxed) {
            lost = Some(("panic", "a worker loop panicked".to_string()));
        }
        let mut out = std::mem::take(&mut *shared.sink.lock().unwrap_or_else(|p| p.into_inner()));
        // A release timer that failed left the tasks it had not released unstarted.
        if let Some(t) = timer {
            let failed = match t.await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(e.to_string()),
            };
            if let Some(e) = failed {
                lost = Some(("dispatcher", format!("the release timer failed: {e}")));
            }
        }
        if let Some((kind, why)) = lost {
            let mut seen = vec![false; ctx.tasks];
            for r in &out {
                if let Some(s) = seen.get_mut(r.index()) {
                    *s = true;
                }
            }
            for (i, _) in seen.iter().enumerate().filter(|(_, s)| !**s) {
                out.push(TaskRecord::not_started(
                    i,
                    TaskError::new(kind, why.clone()),
                ));
            }
        }
        out
    });
    records.sort_unstable_by_key(|r| r.index);
    records
}

/// How far ahead [`hold_timer_wheel`] keeps its deadline.
const WHEEL_HOLD: std::time::Duration = std::time::Duration::from_millis(250);

/// Keeps one deadline in the runtime's timer wheel for the whole run, [`WHEEL_HOLD`] ahead: run
/// beside the tasks of an HTTP workload, whose every request registers a timeout.
///
/// tokio's timer unparks its driver (an eventfd write) whenever a timer is registered earlier
/// than the earliest deadline the driver parked with, and always when it parked with none. An
/// HTTP request registers its timeout, and when requests do not overlap (an open run of a few
/// thousand a second, a closed one with few in flight) the wheel is empty each time: every
/// request would write the eventfd, and the driver's next `epoll_wait` return for it alone.
/// With this deadline in the wheel, a timeout later than it (the request timeout's default is 30 s)
/// registers without a wake-up; the hold itself wakes the runtime four times a second.
async fn hold_timer_wheel() {
    loop {
        tokio::time::sleep(WHEEL_HOLD).await;
    }
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
        .thread_stack_size(ctx.recipe.settings.stack_size)
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
    grouped: bool,
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
    let records = drive(&rt, ctx, limit, grouped);
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
        run_on(&mut builder, ctx, self.limit, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run waits for its loops by their holds: it returns once every loop has ended,
    /// however they end, and a loop that unwound is a lost task.
    #[test]
    fn the_run_waits_for_every_hold_and_a_panic_is_seen() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("runtime");
        for panics in [false, true] {
            let loops = 50;
            let shared = Arc::new(Shared {
                source: Source::Closed {
                    next: AtomicUsize::new(0),
                    tasks: 0,
                },
                workload: crate::workload::parse("fib:1", &Default::default()).expect("fib"),
                sink: Mutex::new(Vec::new()),
                live: AtomicUsize::new(loops),
                ended: tokio::sync::Notify::new(),
                lost: AtomicBool::new(false),
            });
            let finished = Arc::new(AtomicUsize::new(0));
            rt.block_on(async {
                for i in 0..loops {
                    let (hold, finished) = (LoopHold(shared.clone()), finished.clone());
                    tokio::spawn(async move {
                        let _hold = hold;
                        // Every loop waits once, so that the run has to wait for them.
                        tokio::task::yield_now().await;
                        if panics && i == 7 {
                            panic!("a loop's own panic");
                        }
                        finished.fetch_add(1, Ordering::SeqCst);
                    });
                }
                shared.all_ended().await;
            });
            assert_eq!(shared.live.load(Ordering::SeqCst), 0);
            let others = loops - usize::from(panics);
            assert_eq!(finished.load(Ordering::SeqCst), others);
            assert_eq!(shared.lost.load(Ordering::SeqCst), panics);
        }
    }
}
