//! `sleep:DURATION`: wait a fixed time. Blocking models sleep their thread (with the GIL
//! released, as an interpreter does); green ones on may's timer; async models on concur's
//! precise timer ([`super::timer`]).

use std::sync::Arc;
use std::time::Duration;

use super::{Entry, Nature, TaskError, TaskFuture, Workload, WorkloadOptions};
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

/// One task's wait on the precise timer, as a task's future: 24 bytes on the heap (an async
/// block around it took 56), at a million waiting tasks a size class less each.
struct SleepTask(super::timer::Sleep);

impl std::future::Future for SleepTask {
    type Output = Result<u64, TaskError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|()| Ok(0))
    }
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
        // The precise timer, not tokio's (whose millisecond ticks would make every wake-up 1 to
        // 2 ms late, and show the runtime's timer where the model's cost is measured).
        Box::pin(SleepTask(super::timer::sleep(self.d)))
    }
}
