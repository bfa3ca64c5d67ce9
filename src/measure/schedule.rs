//! An open run's asked arrivals (`--rate`): the rate, constant or a ramp, and when task `i`
//! is due. Plain data and arithmetic, carried in the run request and read by the model's
//! dispatcher (`model::arrivals`) and by the measurements of open runs (`measure::open`).

use serde::{Deserialize, Serialize};

/// The asked arrival rate: tasks per second, constant or rising linearly over the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The rate at the start, tasks per second (of the whole schedule, every host's share
    /// together).
    pub from: f64,
    /// The rate at the end, tasks per second (equal to `from` for a constant rate).
    pub to: f64,
    /// How many tasks are released (by this host: its share of the segment).
    pub tasks: usize,
    /// Which share of the whole schedule this one is: one host's every K-th arrival.
    #[serde(default, skip_serializing_if = "Segment::is_whole")]
    pub segment: Segment,
}

/// One host's share of an arrival schedule split over K hosts (k6's execution segments): the
/// arrivals `index`, `index + of`, `index + 2 of`… of the whole schedule of `whole_tasks`, so
/// that the hosts' shares together are exactly the schedule one host would have followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Which share, from 0.
    pub index: usize,
    /// How many shares (hosts).
    pub of: usize,
    /// The whole schedule's task count.
    pub whole_tasks: usize,
}

impl Default for Segment {
    fn default() -> Self {
        Segment::WHOLE
    }
}

impl Segment {
    /// The whole schedule (`whole_tasks` 0: the schedule's own `tasks`).
    pub const WHOLE: Segment = Segment {
        index: 0,
        of: 1,
        whole_tasks: 0,
    };

    /// Whether this is the whole schedule.
    pub fn is_whole(&self) -> bool {
        self.of <= 1
    }

    /// How many of `n` items share `index` of `of` gets when they are dealt round-robin.
    pub fn share(index: usize, of: usize, n: usize) -> usize {
        if of == 0 || index >= n {
            return 0;
        }
        (n - index).div_ceil(of)
    }

    /// The whole schedule's (or batch's) index of this share's `i`-th item.
    pub fn global(&self, i: usize) -> usize {
        self.index + i * self.of.max(1)
    }
}

impl Schedule {
    /// A constant rate of `rate` tasks per second for `tasks` tasks.
    pub fn fixed(rate: f64, tasks: usize) -> Self {
        Schedule {
            from: rate,
            to: rate,
            tasks,
            segment: Segment::WHOLE,
        }
    }

    /// Share `index` of `of` of this (whole) schedule.
    pub fn segment(&self, index: usize, of: usize) -> Schedule {
        Schedule {
            tasks: Segment::share(index, of, self.tasks),
            segment: Segment {
                index,
                of,
                whole_tasks: self.tasks,
            },
            ..*self
        }
    }

    /// The whole schedule's task count.
    fn whole_tasks(&self) -> usize {
        if self.segment.is_whole() {
            self.tasks
        } else {
            self.segment.whole_tasks
        }
    }

    /// How many shares the whole schedule is split into.
    fn shares(&self) -> f64 {
        self.segment.of.max(1) as f64
    }

    /// Whether the rate changes over the run.
    pub fn is_ramp(&self) -> bool {
        self.from != self.to
    }

    /// The mean asked rate over the run, tasks per second (this share's).
    pub fn mean_rate(&self) -> f64 {
        (self.from + self.to) / 2.0 / self.shares()
    }

    /// How long the schedule lasts, seconds: `tasks / mean rate` of the whole schedule (the
    /// last task is released one inter-arrival gap before this).
    pub fn span_s(&self) -> f64 {
        self.whole_tasks() as f64 / ((self.from + self.to) / 2.0)
    }

    /// The asked rate `t_s` seconds into the run (this share's).
    pub fn rate_at(&self, t_s: f64) -> f64 {
        let f = (t_s / self.span_s()).clamp(0.0, 1.0);
        (self.from + (self.to - self.from) * f) / self.shares()
    }

    /// When task `i` is released, nanoseconds after `t0`. With the rate rising linearly from
    /// A to B over T seconds, the tasks released by time t are `A t + k t² / 2` (`k = (B-A)/T`),
    /// and task i goes at the t where that reaches i.
    /// For a share, `i` counts its own tasks: the whole schedule's task `index + i × of`.
    pub fn offset_ns(&self, i: usize) -> u64 {
        let i = self.segment.global(i) as f64;
        let a = self.from;
        let k = (self.to - self.from) / self.span_s();
        let t = if k.abs() < 1e-12 {
            i / a
        } else {
            ((a * a + 2.0 * k * i).max(0.0).sqrt() - a) / k
        };
        (t * 1e9).round() as u64
    }
}

/// What a run request carries for an open-model run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OpenRun {
    /// When tasks are released.
    pub schedule: Schedule,
    /// The time series' interval, microseconds (also the live lines' period).
    pub interval_us: u64,
    /// The release timer's grain, microseconds (`--grain`): each task is released at the first
    /// tick of that grain (counted from the run's start) at or after its due time. 0: each at
    /// its own due time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grain_us: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Split over K hosts, the shares' send times together are the one-host schedule's, each
    /// exactly once, for a constant rate and a ramp; each share asks 1/K of the rate.
    #[test]
    fn shares_together_are_the_whole_schedule() {
        for whole in [
            Schedule::fixed(1000.0, 1001),
            Schedule {
                from: 100.0,
                to: 900.0,
                tasks: 2000,
                segment: Segment::WHOLE,
            },
        ] {
            for k in 1..=4 {
                let mut union: Vec<u64> = Vec::new();
                for index in 0..k {
                    let s = whole.segment(index, k);
                    assert!((s.mean_rate() * k as f64 - whole.mean_rate()).abs() < 1e-9);
                    assert_eq!(s.span_s(), whole.span_s());
                    union.extend((0..s.tasks).map(|i| s.offset_ns(i)));
                }
                union.sort_unstable();
                let one: Vec<u64> = (0..whole.tasks).map(|i| whole.offset_ns(i)).collect();
                assert_eq!(union, one, "{k} shares of {whole:?}");
            }
        }
        assert_eq!(Segment::share(2, 3, 2), 0);
        assert_eq!(Segment::share(0, 3, 10), 4);
        assert_eq!(Segment::share(2, 3, 10), 3);
    }
}
