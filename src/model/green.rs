//! `green:W`: W stackful coroutines on `may`, gevent's model: blocking-style code, no OS
//! thread per task. The coroutines share one scheduler thread (gevent's single hub; it also
//! keeps thread-locals safe, see may issue #6) and take task indices from a shared counter,
//! like a gevent pool of W greenlets. Sockets are `may`'s own, so a coroutine waiting for the
//! network yields to the others; CPU work runs inline and blocks the hub, as in gevent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{Entry, Model, ModelOutcome, RunCtx};
use crate::measure::{mono_ns, TaskError, TaskRecord};
use crate::workload::{Nature, Workload};

pub(super) const ENTRY: Entry = Entry {
    name: "green",
    takes_workers: true,
    help: "W stackful coroutines on may with its own socket I/O (gevent's model; http, sleep, CPU work)",
    build: |w| Box::new(Green { workers: w.unwrap_or(1) }),
};

/// Why green cannot run `w`, in the words of what `w` does. A coroutine gives way only at
/// may's own sockets and timers (the `http` and `sleep` workloads use them) and at its end
/// (CPU work runs inline, as in gevent); any other wait holds the one scheduler thread, and a
/// tokio future has no tokio runtime to drive it there.
fn refusal(w: &dyn Workload) -> String {
    let what = if w.nature() == Nature::BlockingIo {
        "it makes blocking std I/O calls, which would stall every coroutine on green's one scheduler thread"
    } else if !w.portable() {
        // A closure of the library user's (`Lab::task`, `Lab::async_task`) not declared CPU.
        "green (stackful coroutines on the may runtime) cannot drive a tokio future, and this workload of your program is not declared CPU work: an async closure needs tokio's runtime, and a blocking call would stall every coroutine on green's one scheduler thread (run it under async or async-local; if its tasks only compute, declare Nature::Cpu)"
    } else {
        "its tasks wait in blocking calls (a cmd: task on its command's output and exit), which would stall every coroutine on green's one scheduler thread"
    };
    format!("{what}; green runs http, sleep and CPU workloads")
}

/// Memory mappings one coroutine takes: its stack and the guard page below it.
const MAPPINGS_PER_COROUTINE: usize = 2;
/// Mappings kept free for the rest of the process (the allocator, the runtime, libraries).
const MAPPINGS_SPARE: usize = 1000;

/// Whether `coroutines` stacks fit under the kernel's limit on a process's memory mappings:
/// past it, may's stack allocation fails inside its scheduler thread, which dies, and the run
/// would wait for its coroutines until the timeout. Refused up front instead, in numbers.
fn mappings_for(coroutines: usize) -> Result<(), String> {
    let limit = crate::os::maps::max_map_count();
    let used = crate::os::maps::mappings_in_use();
    let (Some(limit), Some(used)) = (limit, used) else {
        return Ok(());
    };
    let need = coroutines.saturating_mul(MAPPINGS_PER_COROUTINE);
    if used + need + MAPPINGS_SPARE > limit {
        return Err(format!(
            "could create none of {coroutines} coroutines: their stacks need about {need} memory mappings and vm.max_map_count is {limit} ({used} in use); at most about {} coroutines fit (sysctl vm.max_map_count raises the limit)",
            limit.saturating_sub(used + MAPPINGS_SPARE) / MAPPINGS_PER_COROUTINE
        ));
    }
    Ok(())
}

/// A pool of W coroutines on one scheduler thread.
pub struct Green {
    workers: usize,
}

/// Coroutine stack size in bytes: room for the HTTP client and `mail`'s formatting.
const STACK_BYTES: usize = 256 << 10;

impl Model for Green {
    fn spec(&self) -> String {
        format!("green:{}", self.workers)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.workers)
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.workers.min(tasks)
    }
    fn check(&self, w: &dyn Workload, gil: bool) -> Result<(), String> {
        if gil {
            return Err("the interpreter-lock emulation parks OS threads, which would stall every coroutine of the hub; run green without --gil".into());
        }
        if !w.supports_green() {
            return Err(refusal(w));
        }
        Ok(())
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        // may's scheduler, built at the first spawn below (inside the run's time), fills a pool
        // of ready coroutines with their stacks: 1,000 by default, 15 ms to over 100 ms on a
        // loaded 2-core machine, which delayed an open run's first tasks past their due
        // times and every run's wall. The run needs its W coroutines only.
        may::config()
            .set_workers(1)
            .set_pool_capacity(self.workers.min(ctx.tasks).max(1))
            .set_stack_size(STACK_BYTES / std::mem::size_of::<usize>());
        let coroutines = self.workers.min(ctx.tasks);
        if let Err(why) = mappings_for(coroutines) {
            return ModelOutcome {
                records: super::never_started(0..ctx.tasks, &why),
                threads_created: 0,
                processes_created: 0,
                error: Some(why),
            };
        }
        let next = Arc::new(AtomicUsize::new(0));
        let records = Arc::new(Mutex::new(Vec::with_capacity(ctx.tasks)));
        let n = ctx.tasks;
        let mut handles = Vec::with_capacity(coroutines);
        for _ in 0..coroutines {
            let (next, records, w) = (next.clone(), records.clone(), ctx.workload.clone());
            let arrivals = ctx.arrivals.clone();
            let body = move || {
                // Every coroutine runs on may's one worker thread, which releases them all:
                // timed from the first coroutine's start to the last one's end.
                let _releasing = arrivals.as_ref().map(|a| a.releasing());
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    // Open model: the coroutines take arrivals in order; a free one sleeps (on the
                    // hub's timer, yielding to the others) until its task is due, a busy pool
                    // leaves the task waiting, which is its queue time.
                    if let Some(a) = &arrivals {
                        let due = a.release_ns(i);
                        let now = mono_ns();
                        if now < due {
                            may::coroutine::sleep(std::time::Duration::from_nanos(due - now));
                            a.released(i);
                        }
                    }
                    crate::measure::live::started();
                    let start_ns = mono_ns();
                    let rec = super::record(i, start_ns, w.task_green(i));
                    records.lock().unwrap_or_else(|p| p.into_inner()).push(rec);
                }
            };
            // SAFETY: may's spawn is unsafe because coroutines may migrate between worker
            // threads, which would break thread-locals; we run a single worker thread
            // (set_workers(1) above), so a coroutine never changes threads.
            handles.push(unsafe { may::coroutine::spawn(body) });
        }
        let mut error = None;
        for h in handles {
            if h.join().is_err() {
                error = Some("a coroutine panicked".to_string());
            }
        }
        let mut records = std::mem::take(&mut *records.lock().unwrap_or_else(|p| p.into_inner()));
        if records.len() < n {
            let done: std::collections::HashSet<usize> =
                records.iter().map(TaskRecord::index).collect();
            records.extend((0..n).filter(|i| !done.contains(i)).map(|i| {
                TaskRecord::not_started(i, TaskError::new("panic", "its coroutine panicked"))
            }));
        }
        ModelOutcome {
            records,
            threads_created: 1,
            processes_created: 0,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::custom::FnWorkload;

    #[test]
    fn a_refusal_says_what_the_workload_does() {
        let green = Green { workers: 2 };
        let why = |w: &dyn Workload| green.check(w, false).expect_err("refused");
        let opts = Default::default();
        let read = crate::workload::parse("read", &opts).expect("read");
        assert!(why(&*read).contains("blocking std I/O"), "{}", why(&*read));
        let cmd = crate::workload::parse("cmd:true", &opts).expect("cmd");
        assert!(why(&*cmd).contains("blocking calls"), "{}", why(&*cmd));
        let closure = FnWorkload::future("green-async", Nature::Measured, |i| async move { i });
        let said = why(&closure);
        assert!(said.contains("cannot drive a tokio future"), "{said}");
        assert!(!said.contains("makes blocking std I/O"), "{said}");
        let cpu = FnWorkload::future("green-cpu", Nature::Cpu, |i| async move { i });
        assert_eq!(green.check(&cpu, false), Ok(()));
    }

    #[test]
    fn coroutines_past_the_mapping_limit_are_refused_in_numbers() {
        assert_eq!(mappings_for(10), Ok(()));
        let why = mappings_for(10_000_000).expect_err("20 million mappings");
        assert!(
            why.contains("10000000 coroutines") && why.contains("vm.max_map_count"),
            "{why}"
        );
    }
}
