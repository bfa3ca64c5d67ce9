//! The per-interval time series of an open-model run: what completed in each interval, how
//! many tasks were in flight (arrived, not yet ended) at its end, and the latency of the
//! tasks that completed in it.

use serde::{Deserialize, Serialize};

use super::TaskRecord;

/// One interval of an open-model run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// End of the interval, seconds from the first scheduled release.
    pub t_s: f64,
    /// Tasks that ended well in the interval.
    pub done: u64,
    /// Tasks that failed in the interval.
    pub errors: u64,
    /// Tasks arrived (due) and not yet ended at the interval's end: the queue plus the ones
    /// running. It grows without bound when a model falls behind.
    pub in_flight: u64,
    /// Median latency (from the scheduled time) of the tasks that ended well in it, µs.
    pub p50_us: Option<u64>,
    /// 99th percentile of the same, µs.
    pub p99_us: Option<u64>,
    /// The asked rate in the middle of the interval, tasks per second.
    pub rate_asked: f64,
}

fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let k = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[k - 1])
}

/// The series of `records` (each with its `sched_ns`) in intervals of `interval_ns` from
/// `t0_ns`, up to the last task's end; `rate_at(t_s)` is the asked rate at time `t_s`.
pub fn series(
    records: &[TaskRecord],
    t0_ns: u64,
    interval_ns: u64,
    rate_at: impl Fn(f64) -> f64,
) -> Vec<SeriesPoint> {
    let interval_ns = interval_ns.max(1);
    let Some(last_end) = records.iter().map(|r| r.end_ns).max() else {
        return vec![];
    };
    let buckets = (last_end.saturating_sub(t0_ns) / interval_ns + 1) as usize;
    let mut lat: Vec<Vec<u64>> = vec![vec![]; buckets];
    let mut errors = vec![0u64; buckets];
    let mut due: Vec<u64> = Vec::with_capacity(records.len());
    let mut ends: Vec<u64> = Vec::with_capacity(records.len());
    for r in records {
        let sched = r.sched().unwrap_or(r.start_ns);
        due.push(sched);
        ends.push(r.end_ns);
        let b = (r.end_ns.saturating_sub(t0_ns) / interval_ns) as usize;
        let b = b.min(buckets - 1);
        match r.error {
            None => lat[b].push(r.end_ns.saturating_sub(sched) / 1000),
            Some(_) => errors[b] += 1,
        }
    }
    due.sort_unstable();
    ends.sort_unstable();
    (0..buckets)
        .map(|b| {
            let end = t0_ns + (b as u64 + 1) * interval_ns;
            let arrived = due.partition_point(|&d| d <= end) as u64;
            let ended = ends.partition_point(|&e| e <= end) as u64;
            let l = &mut lat[b];
            l.sort_unstable();
            let mid_s = (b as f64 + 0.5) * interval_ns as f64 / 1e9;
            SeriesPoint {
                t_s: (b as u64 + 1) as f64 * interval_ns as f64 / 1e9,
                done: l.len() as u64,
                errors: errors[b],
                in_flight: arrived.saturating_sub(ended),
                p50_us: quantile(l, 0.50),
                p99_us: quantile(l, 0.99),
                rate_asked: rate_at(mid_s),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_count_completions_queue_and_latency() {
        // Two tasks due at 0 and 0.5 s; the first ends at 0.2 s, the second at 1.5 s.
        let rec = |i, sched: u64, end: u64| TaskRecord {
            index: i,
            start_ns: sched,
            end_ns: end,
            bytes: 1,
            error: None,
            sched_ns: std::num::NonZeroU64::new(sched),
            worker: 0,
        };
        let s = series(
            &[rec(0, 0, 200_000_000), rec(1, 500_000_000, 1_500_000_000)],
            0,
            1_000_000_000,
            |_| 2.0,
        );
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].done, s[0].in_flight, s[0].p50_us),
            (1, 1, Some(200_000))
        );
        assert_eq!(
            (s[1].done, s[1].in_flight, s[1].p99_us),
            (1, 0, Some(1_000_000))
        );
        assert_eq!(s[1].t_s, 2.0);
    }
}
