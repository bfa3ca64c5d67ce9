//! `sleep:DURATION`: wait a fixed time. Blocking models sleep their thread (with the GIL
//! released, as an interpreter does); green ones on may's timer; async models on concur's
//! precise timer ([`super::timer`]).

use std::sync::Arc;
use std::time::Duration;

use super::{AsyncTask, Entry, Nature, TaskError, TaskFuture, Workload, WorkloadOptions};
use crate::base::units;
use crate::workload::gil;

pub(super) const ENTRY: Entry = Entry {
    name: "sleep",
    usage: "sleep:DURATION",
    help: "wait DURATION (100ms, 2s, 500us); delay-bound: scales with concurrency, not cores",
    parse,
};

fn parse(args: &str, _: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    if args.is_empty() {
        return Err("missing DURATION".into());
    }
    let d = units::parse_duration(args)?;
    if d > Duration::from_secs(3600) {
        return Err(format!("DURATION '{args}' is above the maximum of 1 hour"));
    }
    Ok(Arc::new(Sleep { d }))
}

/// A fixed wait.
pub struct Sleep {
    d: Duration,
}

impl Workload for Sleep {
    fn spec(&self) -> String {
        format!("sleep:{}", units::fmt_duration_spec(self.d))
    }
    fn nature(&self) -> Nature {
        Nature::Delay(self.d)
    }
    fn wait(&self) -> Option<Duration> {
        Some(self.d)
    }
    fn task(&self, _index: usize) -> Result<u64, TaskError> {
        gil::released(|| std::thread::sleep(self.d));
        Ok(0)
    }
    fn task_green(&self, _index: usize) -> Result<u64, TaskError> {
        may::coroutine::sleep(self.d);
        Ok(0)
    }
    fn supports_green(&self) -> bool {
        true
    }
    fn task_async(self: Arc<Self>, _index: usize) -> TaskFuture {
        Box::pin(AsyncTask::wait(self.d))
    }
    fn start_async(self: Arc<Self>, _index: usize) -> AsyncTask {
        // The precise timer, not tokio's (whose millisecond ticks would make every wake-up 1 to
        // 2 ms late, and show the runtime's timer where the model's cost is measured), held
        // inside the model's task: no box (24 bytes, 32 in jemalloc's class) a waiting task
        // (docs/benchmarks.md §31).
        AsyncTask::wait(self.d)
    }
}
