//! `async-local:W`: one single-threaded tokio event loop (like asyncio, or gevent's hub), at
//! most W tasks in flight. CPU work blocks the loop: no two tasks compute at once, and the
//! table shows it. Blocking I/O goes to the runtime's blocking pool, as asyncio's
//! `run_in_executor` does.

use super::async_mt::run_on;
use super::{Entry, Model, ModelOutcome, RunCtx};

pub(super) const ENTRY: Entry = Entry {
    name: "async-local",
    takes_workers: true,
    help: "one single-threaded tokio event loop, at most W tasks in flight (CPU work blocks it)",
    build: |w| {
        Box::new(AsyncLocal {
            limit: w.unwrap_or(1),
        })
    },
};

/// A current-thread tokio runtime with a concurrency limit.
pub struct AsyncLocal {
    limit: usize,
}

impl Model for AsyncLocal {
    fn spec(&self) -> String {
        format!("async-local:{}", self.limit)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.limit)
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.limit.min(tasks)
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        run_on(
            &mut tokio::runtime::Builder::new_current_thread(),
            ctx,
            self.limit,
            false,
        )
    }
}
