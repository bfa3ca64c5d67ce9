//! Per-task latency in an HDR histogram: constant memory at any task count.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Percentiles of task latency in microseconds, as written to the results file.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

/// Records latencies (microseconds) and summarises them.
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder covering 1 µs to one hour at 3 significant digits.
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, 3_600_000_000, 3)
            .expect("constant bounds 1 µs..1 h at 3 digits are valid");
        LatencyRecorder { hist }
    }

    /// Adds one latency in microseconds (values beyond the range are clamped to it).
    pub fn record_us(&mut self, us: u64) {
        self.hist.saturating_record(us.max(1));
    }

    /// The percentiles, or `None` when nothing was recorded.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.hist.is_empty() {
            return None;
        }
        Some(LatencySummary {
            p50: self.hist.value_at_quantile(0.50),
            p90: self.hist.value_at_quantile(0.90),
            p99: self.hist.value_at_quantile(0.99),
            p999: self.hist.value_at_quantile(0.999),
            max: self.hist.max(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_uniform_set() {
        let mut r = LatencyRecorder::new();
        for us in 1..=1000 {
            r.record_us(us);
        }
        let s = r.summary().unwrap();
        assert!((495..=505).contains(&s.p50), "{s:?}");
        assert!((985..=995).contains(&s.p99), "{s:?}");
        assert_eq!(s.max, 1000);
        assert!(LatencyRecorder::new().summary().is_none());
    }
}
