//! An open run's asked arrivals (`--rate`): the rate, constant or a ramp, and when task `i`
//! is due. Plain data and arithmetic, carried in the run request and read by the model's
//! dispatcher (`model::arrivals`) and by the measurements of open runs (`measure::open`).

use serde::{Deserialize, Serialize};

/// The asked arrival rate: tasks per second, constant or rising linearly over the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The rate at the start, tasks per second.
    pub from: f64,
    /// The rate at the end, tasks per second (equal to `from` for a constant rate).
    pub to: f64,
    /// How many tasks are released.
    pub tasks: usize,
}

impl Schedule {
    /// A constant rate of `rate` tasks per second for `tasks` tasks.
    pub fn fixed(rate: f64, tasks: usize) -> Self {
        Schedule {
            from: rate,
            to: rate,
            tasks,
        }
    }

    /// Whether the rate changes over the run.
    pub fn is_ramp(&self) -> bool {
        self.from != self.to
    }

    /// The mean asked rate over the run, tasks per second.
    pub fn mean_rate(&self) -> f64 {
        (self.from + self.to) / 2.0
    }

    /// How long the schedule lasts, seconds: `tasks / mean rate` (the last task is released
    /// one inter-arrival gap before this).
    pub fn span_s(&self) -> f64 {
        self.tasks as f64 / self.mean_rate()
    }

    /// The asked rate `t_s` seconds into the run.
    pub fn rate_at(&self, t_s: f64) -> f64 {
        let f = (t_s / self.span_s()).clamp(0.0, 1.0);
        self.from + (self.to - self.from) * f
    }

    /// When task `i` is released, nanoseconds after `t0`. With the rate rising linearly from
    /// A to B over T seconds, the tasks released by time t are `A t + k t² / 2` (`k = (B-A)/T`),
    /// and task i goes at the t where that reaches i.
    pub fn offset_ns(&self, i: usize) -> u64 {
        let i = i as f64;
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
}
