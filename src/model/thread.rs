//! `thread`: one OS thread per task. All threads are created first and wait at a gate, then
//! start together and are joined: N threads really are alive at once, so the OS's limits show
//! (the classic's 10,000-thread failure). When creation fails, the threads already created
//! still run and are joined, and the run reports "could create K of N threads: OS-ERROR".

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::os_thread;
use super::{never_started, run_task, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::{TaskError, TaskRecord};

pub(super) const ENTRY: Entry = Entry {
    name: "thread",
    takes_workers: false,
    help: "one OS thread per task, all created, then started together, then joined (--stack-size)",
    build: |_| Box::new(ThreadPerTask),
};

/// One OS thread per task.
pub struct ThreadPerTask;

/// A one-shot gate that many threads wait on until it opens: a futex word, so opening it
/// wakes every waiter with one system call and no lock for them to fight over.
#[derive(Default)]
pub(crate) struct Gate {
    open: AtomicU32,
}

impl Gate {
    /// Blocks until the gate opens.
    pub(crate) fn wait(&self) {
        while self.open.load(Ordering::Acquire) == 0 {
            // SAFETY: FUTEX_WAIT on a live AtomicU32 that outlives the call; it returns at
            // once if the word is no longer 0, and spurious wake-ups are re-checked.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.open.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    0u32,
                    std::ptr::null::<libc::timespec>(),
                );
            }
        }
    }
    /// Opens the gate for every waiter, now and later.
    pub(crate) fn open(&self) {
        self.open.store(1, Ordering::Release);
        // SAFETY: FUTEX_WAKE on the same live word wakes every waiter.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.open.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
}

impl Model for ThreadPerTask {
    fn spec(&self) -> String {
        "thread".into()
    }
    fn workers(&self) -> Option<usize> {
        None
    }
    fn parallelism(&self, tasks: usize) -> usize {
        tasks
    }
    fn lanes(&self) -> super::Lanes {
        super::Lanes::Thread
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        if let Some(a) = &ctx.arrivals {
            return open(ctx, a);
        }
        let gate = Arc::new(Gate::default());
        let mut threads = Vec::with_capacity(ctx.tasks);
        let mut error = None;
        for i in 0..ctx.tasks {
            let (gate, w) = (gate.clone(), ctx.workload.clone());
            match os_thread::spawn(ctx.recipe.settings.stack_size, move || {
                gate.wait();
                run_task(&*w, i)
            }) {
                Ok(t) => threads.push((i, t)),
                Err(e) => {
                    error = Some(format!("could create {i} of {} threads: {e}", ctx.tasks));
                    break;
                }
            }
        }
        gate.open();
        let created = threads.len();
        let mut records: Vec<TaskRecord> = threads.into_iter().map(|(i, t)| join(i, t)).collect();
        if let Some(reason) = &error {
            records.extend(never_started(created..ctx.tasks, reason));
        }
        ModelOutcome {
            records,
            threads_created: created,
            processes_created: 0,
            error,
        }
    }
}

/// Task `i`'s record from its thread; a thread that panicked outside the task's guard is a
/// failed task.
fn join(i: usize, t: os_thread::OsThread<TaskRecord>) -> TaskRecord {
    t.join()
        .unwrap_or_else(|_| TaskRecord::not_started(i, TaskError::new("panic", "thread panicked")))
}

/// Open model: one new thread per arrival, created when the task is due (its creation cost
/// is part of the task's queue time). Finished threads are joined as the run goes, so only the
/// tasks in flight hold a thread: a long run at a modest rate never piles up exited threads.
fn open(ctx: &RunCtx, a: &crate::model::arrivals::Arrivals) -> ModelOutcome {
    let mut running: std::collections::HashMap<usize, os_thread::OsThread<TaskRecord>> =
        std::collections::HashMap::new();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<usize>();
    let mut records: Vec<TaskRecord> = Vec::with_capacity(ctx.tasks);
    let mut error = None;
    let mut created = 0;
    a.dispatch(|i| {
        for k in done_rx.try_iter() {
            if let Some(t) = running.remove(&k) {
                records.push(join(k, t));
            }
        }
        let (w, done) = (ctx.workload.clone(), done_tx.clone());
        match os_thread::spawn(ctx.recipe.settings.stack_size, move || {
            let rec = run_task(&*w, i);
            // The dispatcher joins this thread once it reads the index; it is exiting by then.
            let _ = done.send(i);
            rec
        }) {
            Ok(t) => {
                running.insert(i, t);
                created += 1;
                true
            }
            Err(e) => {
                error = Some(format!("could create {i} of {} threads: {e}", ctx.tasks));
                false
            }
        }
    });
    records.extend(running.into_iter().map(|(i, t)| join(i, t)));
    if let Some(reason) = &error {
        records.extend(never_started(created..ctx.tasks, reason));
    }
    ModelOutcome {
        records,
        threads_created: created,
        processes_created: 0,
        error,
    }
}
