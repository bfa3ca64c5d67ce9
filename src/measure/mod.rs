//! What is measured: a monotonic clock shared by all processes, per-task records, latency
//! histograms, per-child rusage and process-tree memory.

pub mod conn;
pub mod lanes;
pub mod latency;
pub mod live;
pub mod memory;
pub mod open;
pub mod phases;
pub mod rusage;
pub mod schedule;
pub mod series;
pub mod slack;
pub mod wakeups;

use serde::{Deserialize, Serialize};

/// Nanoseconds on `CLOCK_MONOTONIC`: comparable across the processes of one machine, so a
/// forked or spawned task's start and end line up with its parent's timeline.
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The wall clock (`CLOCK_REALTIME`), ns since the epoch: what other hosts' clocks are held
/// against (`hub::clock`); never for durations.
pub fn wall_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// How long the calling thread has waited on a run queue, runnable but not running, since it
/// started, ns: the second field of `/proc/thread-self/schedstat` (the kernel's
/// `sched_info.run_delay`; Documentation/scheduler/sched-stats.rst). Time the machine kept the
/// thread off the cores, not time it spent in its own code or asleep. `None` where the kernel
/// keeps no such file (no `CONFIG_SCHED_INFO`). A read of a /proc file: for a run's start and
/// end, never per task.
pub fn runqueue_wait_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// What [`runqueue_wait_ns`] reads, for another thread or process than the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiter {
    /// Every thread of a process (summed): a worker process of ours.
    Process(u32),
    /// One thread of this process, by its kernel thread id (`gettid`).
    Thread(i32),
}

/// How long `who` has waited on a run queue since it started, ns (for a process, its threads
/// that are alive now, summed): [`runqueue_wait_ns`] for a thread or process other than the
/// caller. `None` when it has ended or the kernel keeps no count. A read of /proc files per
/// thread: for a run's start and end, never per task.
pub fn runqueue_wait_of_ns(who: Waiter) -> Option<u64> {
    fn second_field(path: &std::path::Path) -> Option<u64> {
        let text = std::fs::read_to_string(path).ok()?;
        text.split_whitespace().nth(1)?.parse().ok()
    }
    match who {
        Waiter::Thread(tid) => second_field(std::path::Path::new(&format!(
            "/proc/self/task/{tid}/schedstat"
        ))),
        Waiter::Process(pid) => {
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
            let mut sum = None;
            for t in tasks.flatten() {
                if let Some(ns) = second_field(&t.path().join("schedstat")) {
                    sum = Some(sum.unwrap_or(0) + ns);
                }
            }
            sum
        }
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; both clocks used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Why one task failed: a short kind (`panic`, `io`, `spawn`, `crash`) and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    /// A short machine-readable kind.
    pub kind: String,
    /// A one-line human-readable reason.
    pub message: String,
}

impl TaskError {
    /// Builds a task error, keeping the message to one short line.
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        let mut message: String = message.into().replace('\n', " ");
        if message.len() > 300 {
            let mut cut = 300;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        TaskError {
            kind: kind.into(),
            message,
        }
    }
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// One task as it ran: when (on [`mono_ns`]), what it produced, or why it failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Index of the task in its run, 0-based ([`TaskRecord::index`] reads it as a `usize`). 32
    /// bits beside the lane's 32 make the record 48 bytes, not 56: every task's record is held
    /// to the run's end, and a run has at most `plan::MAX_TASKS` (1,000,000) tasks.
    pub index: u32,
    /// Start, nanoseconds on the monotonic clock.
    pub start_ns: u64,
    /// End, nanoseconds on the monotonic clock.
    pub end_ns: u64,
    /// Bytes produced (the checksum's share), 0 when failed.
    pub bytes: u64,
    /// The failure, if any.
    pub error: Option<Box<TaskError>>,
    /// When the task was due (open-model runs) or enqueued (job queues), nanoseconds on the
    /// monotonic clock: latency is measured from here, queueing is `start_ns - sched_ns`.
    /// Non-zero (no time on that clock is 0), so that the record is 48 bytes, not 56: every
    /// task's record is held to the run's end (8 MB less at a million tasks). Read and written
    /// through [`TaskRecord::sched`] and [`TaskRecord::set_sched`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_ns: Option<std::num::NonZeroU64>,
    /// The lane that ran it: a worker's number, or the task's own index for a thread or a
    /// process per task, or a slot assigned after the run ([`lanes::Lanes`] says which).
    #[serde(default)]
    pub worker: u32,
}

impl TaskRecord {
    /// A task that ran from `start_ns` to `end_ns` and produced nothing (tests' records).
    #[cfg(test)]
    pub(crate) fn ran(index: usize, start_ns: u64, end_ns: u64) -> Self {
        TaskRecord {
            index: task_index(index),
            start_ns,
            end_ns,
            bytes: 0,
            error: None,
            sched_ns: None,
            worker: 0,
        }
    }

    /// A task that never ran (its thread or process could not be created).
    pub fn not_started(index: usize, error: TaskError) -> Self {
        let now = mono_ns();
        TaskRecord {
            index: task_index(index),
            start_ns: now,
            end_ns: now,
            bytes: 0,
            error: Some(Box::new(error)),
            sched_ns: None,
            worker: 0,
        }
    }
}

/// A task's index as a record keeps it ([`TaskRecord::index`]): a run's tasks are far fewer
/// than 2^32 (`plan::MAX_TASKS`); an index past that would read as `u32::MAX`.
#[inline]
pub fn task_index(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

impl TaskRecord {
    /// The task's index in its run.
    #[inline]
    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// When the task was due or enqueued, if that was recorded ([`TaskRecord::sched_ns`]).
    #[inline]
    pub fn sched(&self) -> Option<u64> {
        self.sched_ns.map(std::num::NonZeroU64::get)
    }

    /// Records when the task was due or enqueued; `None` (or 0, never a time on the
    /// monotonic clock) records nothing.
    #[inline]
    pub fn set_sched(&mut self, ns: Option<u64>) {
        self.sched_ns = ns.and_then(std::num::NonZeroU64::new);
    }

    /// The record as one JSON line, short enough (< 4 KiB) for one atomic pipe write.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).unwrap_or_else(|e| {
            format!("{{\"index\":{},\"start_ns\":0,\"end_ns\":0,\"bytes\":0,\"error\":{{\"kind\":\"encode\",\"message\":\"{e}\"}}}}", self.index)
        });
        line.push('\n');
        line
    }

    /// Parses a line written by [`TaskRecord::to_line`].
    pub fn from_line(line: &str) -> Option<Self> {
        serde_json::from_str(line.trim()).ok()
    }
}

/// How a child process that was to report a task ended without reporting it.
pub fn describe_exit(usage: &rusage::ChildUsage) -> String {
    match (usage.exit_code, usage.signal) {
        (_, Some(sig)) => format!("killed by {}", rusage::signal_name(sig)),
        (Some(code), _) => format!("exited with code {code} without a report"),
        _ => "ended without a report".into(),
    }
}

/// The most tasks a run's timeline keeps unless `--trace-tasks` says otherwise; longer runs
/// are sampled evenly down to it.
pub const TRACE_TASKS_DEFAULT: usize = 10_000;

/// The largest `--trace-tasks`: a million tasks' timeline is tens of MB of results file.
pub const TRACE_TASKS_MAX: usize = 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every task's record is held to the run's end: a field added to it is paid a task, at a
    /// million tasks 8 MB a word, in the tasks study's memory.
    #[test]
    fn a_task_record_is_48_bytes() {
        assert_eq!(std::mem::size_of::<TaskRecord>(), 48);
    }

    #[test]
    fn a_record_keeps_when_it_was_due_and_no_time_is_none() {
        let mut r = TaskRecord::ran(0, 5, 9);
        assert_eq!(r.sched(), None);
        r.set_sched(Some(3));
        assert_eq!(r.sched(), Some(3));
        r.set_sched(Some(0));
        assert_eq!(r.sched(), None);
        let line = r.to_line();
        assert!(!line.contains("sched_ns"), "{line}");
        r.set_sched(Some(7));
        let back: TaskRecord = serde_json::from_str(r.to_line().trim()).unwrap();
        assert_eq!(back.sched(), Some(7));
    }
}
