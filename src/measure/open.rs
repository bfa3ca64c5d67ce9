//! What an open-model run measures beyond a closed one: the asked and achieved rates, the
//! three per-task times (latency from the scheduled time, service, queue), the dispatcher's
//! lag, and the time series.

use serde::{Deserialize, Serialize};

use super::latency::{LatencyRecorder, LatencySummary};
use super::series::{series, SeriesPoint};
use super::TaskRecord;
use crate::measure::schedule::Schedule;

/// Achieved over asked rate below which a run fell behind (it could not keep the pace).
pub const KEPT_UP: f64 = 0.99;

/// An open-model run's (or cell's) own measures, on run and cell lines of arrival runs only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenStats {
    /// The asked rate, tasks per second (a ramp's mean).
    pub rate_asked: f64,
    /// A ramp's start and end rates, tasks per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ramp: Option<[f64; 2]>,
    /// Completions per second over the span of completions (`(n - 1) / (last end - first
    /// end)`): independent of how long one task takes, so a short run that keeps up reads as
    /// the asked rate.
    pub rate_achieved: Option<f64>,
    /// Whether the achieved rate stayed below 99% of the asked one.
    pub behind: bool,
    /// Service time (ended - started) percentiles, µs.
    pub service_us: Option<LatencySummary>,
    /// Queue time (started - scheduled) percentiles, µs.
    pub queue_us: Option<LatencySummary>,
    /// The dispatcher's lag behind the schedule at each release, µs.
    pub lag_us: Option<LatencySummary>,
    /// The release timer's grain, µs (`--grain`); absent when each task was released at its
    /// own time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grain_us: Option<u64>,
    /// How long the releasing thread waited on a run queue, runnable but kept off the cores,
    /// while it released the run's tasks, µs (`Arrivals::releaser_runnable_us`): how much of
    /// `lag_us` the machine, not the model, can have taken. Absent where not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub releaser_runnable_us: Option<u64>,
    /// How long the workers holding the lock a release takes (the job queue's) waited on a
    /// run queue while the run's tasks were released, µs, summed over them
    /// (`Arrivals::lock_holders_runnable_us`): how much longer a release could wait for that
    /// lock by the machine's doing. Only the queue models'; absent where not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_holders_runnable_us: Option<u64>,
    /// One point per interval (on run lines; cells leave it out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesPoint>,
}

impl OpenStats {
    /// The rate the releases were asked to keep over their own span, which the achieved
    /// rate is held against (for a constant rate, the rate itself).
    pub fn pace(schedule: &Schedule) -> f64 {
        let n = schedule.tasks;
        if n < 2 {
            return schedule.mean_rate();
        }
        let span = schedule.offset_ns(n - 1) as f64 / 1e9;
        if span <= 0.0 {
            schedule.mean_rate()
        } else {
            (n - 1) as f64 / span
        }
    }

    /// Measures `records` (their `sched_ns` filled in) against `schedule`, released from
    /// `t0_ns`; `corrected` receives the latency from the scheduled time of every task that
    /// ended well (the run's `latency_us`).
    pub fn measure(
        records: &[TaskRecord],
        schedule: &Schedule,
        t0_ns: u64,
        interval_ns: u64,
        lag_us: Option<LatencySummary>,
        corrected: &mut LatencyRecorder,
    ) -> OpenStats {
        let (mut service, mut queue) = (LatencyRecorder::new(), LatencyRecorder::new());
        let mut ends: Vec<u64> = Vec::with_capacity(records.len());
        for r in records.iter().filter(|r| r.error.is_none()) {
            let sched = r.sched().unwrap_or(r.start_ns);
            // Coordinated omission: the caller's wait starts when the request was due, not
            // when a busy client got round to sending it (wrk2, oha --latency-correction).
            corrected.record_us(r.end_ns.saturating_sub(sched) / 1000);
            service.record_us(r.end_ns.saturating_sub(r.start_ns) / 1000);
            queue.record_us(r.start_ns.saturating_sub(sched) / 1000);
            ends.push(r.end_ns);
        }
        ends.sort_unstable();
        let achieved = match (ends.first(), ends.last()) {
            (Some(&a), Some(&b)) if ends.len() >= 2 && b > a => {
                Some((ends.len() - 1) as f64 / ((b - a) as f64 / 1e9))
            }
            _ => None,
        };
        let pace = Self::pace(schedule);
        OpenStats {
            rate_asked: schedule.mean_rate(),
            rate_ramp: schedule.is_ramp().then_some([schedule.from, schedule.to]),
            rate_achieved: achieved,
            behind: achieved.is_some_and(|a| a < KEPT_UP * pace),
            service_us: service.summary(),
            queue_us: queue.summary(),
            lag_us,
            grain_us: None,
            releaser_runnable_us: None,
            lock_holders_runnable_us: None,
            series: series(records, t0_ns, interval_ns, |t| schedule.rate_at(t)),
        }
    }
}
