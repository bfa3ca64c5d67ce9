//! How late the wake-ups of tasks that only wait came: each task's end after its due time
//! (its start plus the wait), and how long the run took to start every task. The `tasks`
//! study's columns, for concur's own models and for other runtimes' programs alike (those
//! report the same figures on their `CONCUR` line).

use serde::{Deserialize, Serialize};

use super::latency::{LatencyRecorder, LatencySummary};
use super::slack::Slack;
use super::TaskRecord;

/// A closed run of a waiting workload (`sleep:D`): its wake-ups' lateness and the time to
/// start all its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Wakeups {
    /// From the run's start (its model's, or the program's own) to the last task's start, s.
    pub start_all_s: f64,
    /// Each task's end after its due time (start + the wait), µs: percentiles of the tasks
    /// that ended well (a wake-up before its due time counts at the histogram's floor, 1 µs).
    pub late_us: LatencySummary,
    /// What the kernel may add to one wait of D in the primitive the row's tasks wait in
    /// ([`super::slack`]): the figure its lateness is read beside. Absent where the
    /// primitive is not known (a user's `--peer` program), and in files from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<Slack>,
}

impl Wakeups {
    /// The wake-ups of `records` (each waited `wait_ns`) in a run that started at `t0_ns`;
    /// `None` when no task ended well.
    pub fn measure(records: &[TaskRecord], t0_ns: u64, wait_ns: u64) -> Option<Wakeups> {
        let mut late = LatencyRecorder::new();
        let mut last_start = None::<u64>;
        for r in records.iter().filter(|r| r.error.is_none()) {
            last_start = Some(last_start.map_or(r.start_ns, |s| s.max(r.start_ns)));
            let due = r.start_ns.saturating_add(wait_ns);
            late.record_us(r.end_ns.saturating_sub(due) / 1000);
        }
        Some(Wakeups {
            start_all_s: last_start?.saturating_sub(t0_ns) as f64 / 1e9,
            late_us: late.summary()?,
            slack: None,
        })
    }

    /// The worse of two (a run over several hosts: the slowest start, each percentile's
    /// worst host, the larger slack; not one histogram of every task).
    pub fn worst(a: Option<Wakeups>, b: Option<Wakeups>) -> Option<Wakeups> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Wakeups {
                start_all_s: a.start_all_s.max(b.start_all_s),
                late_us: LatencySummary {
                    p50: a.late_us.p50.max(b.late_us.p50),
                    p90: a.late_us.p90.max(b.late_us.p90),
                    p99: a.late_us.p99.max(b.late_us.p99),
                    p999: a.late_us.p999.max(b.late_us.p999),
                    max: a.late_us.max.max(b.late_us.max),
                },
                slack: match (a.slack, b.slack) {
                    (Some(x), Some(y)) => Some(if y.ns > x.ns { y } else { x }),
                    (x, y) => x.or(y),
                },
            }),
            (a, b) => a.or(b),
        }
    }

    /// Why figures that came from outside (an external program's `CONCUR` line, an agent's
    /// answer) cannot be wake-ups: a start that is not a finite, non-negative time, or
    /// percentiles out of order.
    pub fn check(&self) -> Result<(), String> {
        let l = &self.late_us;
        if !(self.start_all_s.is_finite() && self.start_all_s >= 0.0) {
            return Err(format!(
                "start_all_s {} is not a time in seconds",
                self.start_all_s
            ));
        }
        if !(l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max) {
            return Err(format!(
                "late_us {{p50 {}, p90 {}, p99 {}, p999 {}, max {}}} is not in increasing order",
                l.p50, l.p90, l.p99, l.p999, l.max
            ));
        }
        self.slack.map_or(Ok(()), |s| s.check())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::TaskError;

    fn rec(index: usize, start_ns: u64, end_ns: u64) -> TaskRecord {
        TaskRecord::ran(index, start_ns, end_ns)
    }

    #[test]
    fn lateness_is_the_end_after_start_plus_wait_and_start_all_runs_to_the_last_start() {
        let wait = 10_000_000; // 10 ms
        let mut records = vec![
            rec(0, 1_000_000, 11_000_000 + 250_000),
            rec(1, 3_000_000, 13_000_000 + 1_500_000),
            // Woke early (a coarse timer): counts at the floor, not as a huge unsigned lateness.
            rec(2, 2_000_000, 11_000_000),
        ];
        records.push(TaskRecord::not_started(
            3,
            TaskError::new("spawn", "EAGAIN"),
        ));
        let w = Wakeups::measure(&records, 500_000, wait).expect("measured");
        assert_eq!(w.start_all_s, 2.5e-3);
        assert_eq!(w.late_us.max, 1500);
        assert_eq!(w.late_us.p50, 250);
        assert!(Wakeups::measure(&records[3..], 0, wait).is_none());
    }

    #[test]
    fn worst_takes_each_figure_from_the_worse_host() {
        let a = Wakeups::measure(&[rec(0, 0, 10_300_000)], 0, 10_000_000);
        let b = Wakeups::measure(&[rec(0, 2_000_000, 12_100_000)], 0, 10_000_000);
        let w = Wakeups::worst(a, b).expect("both");
        assert_eq!((w.start_all_s, w.late_us.max), (2e-3, 300));
        assert_eq!(Wakeups::worst(None, b), b);
    }

    #[test]
    fn figures_from_outside_are_checked() {
        let mut w = Wakeups::measure(&[rec(0, 0, 10_300_000)], 0, 10_000_000).expect("one");
        assert_eq!(w.check(), Ok(()));
        w.late_us.p50 = w.late_us.max + 1;
        assert!(w.check().unwrap_err().contains("increasing order"));
        w.late_us.p50 = 0;
        w.start_all_s = f64::NAN;
        assert!(w.check().unwrap_err().contains("start_all_s NaN"));
    }
}
