//! One host's share of a cell's tasks when a study runs over several hosts: the host runs
//! tasks `0..share` of its model, and each is the whole cell's task `index + i × of` (dealt
//! round-robin, as an open cell's arrivals are), so that the hosts' tasks together are
//! exactly the cell's, each once, and a workload whose task depends on its index (a user's
//! function, `{rand}` in a URL) produces the same checksum as on one host.

use std::sync::Arc;

use super::{AsyncTask, HttpRequest, HttpTasks, Nature, TaskError, TaskFuture, Workload};
use crate::measure::schedule::Segment;

/// A workload whose task `i` is the inner workload's task `segment.global(i)`.
pub struct Segmented {
    inner: Arc<dyn Workload>,
    segment: Segment,
}

impl Segmented {
    /// `inner`'s share `segment`; the whole workload when the segment is whole.
    pub fn wrap(inner: Arc<dyn Workload>, segment: Segment) -> Arc<dyn Workload> {
        if segment.is_whole() {
            return inner;
        }
        Arc::new(Segmented { inner, segment })
    }
}

impl Workload for Segmented {
    fn spec(&self) -> String {
        self.inner.spec()
    }
    fn nature(&self) -> Nature {
        self.inner.nature()
    }
    fn task(&self, index: usize) -> Result<u64, TaskError> {
        self.inner.task(self.segment.global(index))
    }
    fn task_async(self: Arc<Self>, index: usize) -> TaskFuture {
        self.inner.clone().task_async(self.segment.global(index))
    }
    fn start_async(self: Arc<Self>, index: usize) -> AsyncTask {
        self.inner.clone().start_async(self.segment.global(index))
    }
    fn task_green(&self, index: usize) -> Result<u64, TaskError> {
        self.inner.task_green(self.segment.global(index))
    }
    fn wait(&self) -> Option<std::time::Duration> {
        self.inner.wait()
    }
    fn supports_green(&self) -> bool {
        self.inner.supports_green()
    }
    fn acquire(&self) -> Result<(), String> {
        self.inner.acquire()
    }
    fn gil_governs(&self) -> bool {
        self.inner.gil_governs()
    }
    fn http(&self) -> Option<&dyn HttpTasks> {
        self.inner.http().map(|_| self as &dyn HttpTasks)
    }
    fn portable(&self) -> bool {
        self.inner.portable()
    }
}

/// The inner workload's requests, task `i` being its task `segment.global(i)`.
impl HttpTasks for Segmented {
    fn needs_server(&self) -> bool {
        self.inner.http().is_some_and(|h| h.needs_server())
    }
    fn url(&self, index: usize) -> Option<String> {
        self.inner.http()?.url(self.segment.global(index))
    }
    fn http_request(&self, index: usize) -> Option<HttpRequest> {
        self.inner.http()?.http_request(self.segment.global(index))
    }
    fn only_url_varies(&self) -> bool {
        self.inner.http().is_some_and(|h| h.only_url_varies())
    }
    fn connection_groups(&self) -> Option<usize> {
        self.inner.http()?.connection_groups()
    }
    fn connection_recorder(&self) -> Option<&crate::measure::conn::ConnRecorder> {
        self.inner.http()?.connection_recorder()
    }
    fn connections(&self) -> Option<crate::measure::conn::Connections> {
        self.inner.http()?.connections()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three shares of ten tasks are the ten tasks, each once.
    #[test]
    fn shares_run_every_task_once() {
        let w = super::super::parse("spin:1", &Default::default()).unwrap();
        let mut seen = Vec::new();
        for index in 0..3 {
            let seg = Segment {
                index,
                of: 3,
                whole_tasks: 10,
            };
            let s = Segmented::wrap(w.clone(), seg);
            assert_eq!(s.spec(), w.spec());
            seen.extend((0..Segment::share(index, 3, 10)).map(|i| seg.global(i)));
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    /// A share is the inner workload in every question a run asks of it: a share of
    /// `sleep:D` is a wait of D (so a host's run records its wake-ups, as one host's does),
    /// and what the inner one needs from the world is checked for the share too.
    #[test]
    fn a_share_answers_for_its_workload() {
        let seg = Segment {
            index: 1,
            of: 2,
            whole_tasks: 10,
        };
        let sleep = super::super::parse("sleep:5ms", &Default::default()).unwrap();
        let share = Segmented::wrap(sleep, seg);
        assert_eq!(share.wait(), Some(std::time::Duration::from_millis(5)));
        let missing = super::super::parse("cmd:concur-no-such-program", &Default::default());
        let share = Segmented::wrap(missing.unwrap(), seg);
        let why = share.acquire().unwrap_err();
        assert!(why.contains("concur-no-such-program"), "{why}");
    }
}
