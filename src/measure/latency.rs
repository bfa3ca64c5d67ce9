//! Per-task latency in an HDR histogram: constant memory at any task count. A run on another
//! host sends its histogram back whole ([`LatencyWire`]: HdrHistogram's V2 encoding, with the
//! exact count, min, max and sum beside it), so that a row merged from several hosts has the
//! percentiles one histogram of every request would give, not an average of percentiles.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
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

/// What the histogram cannot say exactly (it keeps 3 significant digits): the count, the
/// smallest and largest value and the sum, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyExact {
    /// How many latencies were recorded.
    pub count: u64,
    /// The smallest, µs.
    pub min_us: u64,
    /// The largest, µs.
    pub max_us: u64,
    /// Their sum, µs.
    pub sum_us: u64,
}

impl LatencyExact {
    /// Both sets as one.
    pub fn merged(self, other: LatencyExact) -> LatencyExact {
        LatencyExact {
            count: self.count + other.count,
            min_us: self.min_us.min(other.min_us),
            max_us: self.max_us.max(other.max_us),
            sum_us: self.sum_us.saturating_add(other.sum_us),
        }
    }
}

/// A recorder as it travels between hosts: the histogram in HdrHistogram's V2 encoding
/// (uncompressed, base64) and the exact figures beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyWire {
    /// The histogram, V2-encoded, base64 (standard alphabet).
    pub hdr_v2: String,
    /// Count, min, max and sum, exact.
    #[serde(flatten)]
    pub exact: LatencyExact,
}

/// Records latencies (microseconds) and summarises them.
#[derive(Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    exact: Option<LatencyExact>,
}

impl std::fmt::Debug for LatencyRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LatencyRecorder({:?})", self.exact)
    }
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
        LatencyRecorder { hist, exact: None }
    }

    /// Adds one latency in microseconds (values beyond the range are clamped to it in the
    /// histogram; the exact figures keep them).
    pub fn record_us(&mut self, us: u64) {
        let us = us.max(1);
        self.hist.saturating_record(us);
        let one = LatencyExact {
            count: 1,
            min_us: us,
            max_us: us,
            sum_us: us,
        };
        self.exact = Some(self.exact.map_or(one, |e| e.merged(one)));
    }

    /// Count, min, max and sum, exact; `None` when nothing was recorded.
    pub fn exact(&self) -> Option<LatencyExact> {
        self.exact
    }

    /// The histogram itself (for comparing two recorders bucket by bucket).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Adds every value of `other`, bucket by bucket: exactly what recording them here would
    /// have given.
    pub fn add(&mut self, other: &LatencyRecorder) {
        // Both are made by `new`, with one configuration: adding cannot fail on bounds.
        let _ = self.hist.add(&other.hist);
        self.exact = match (self.exact, other.exact) {
            (Some(a), Some(b)) => Some(a.merged(b)),
            (a, b) => a.or(b),
        };
    }

    /// The recorder as it travels; `None` when nothing was recorded.
    pub fn to_wire(&self) -> Option<LatencyWire> {
        let exact = self.exact?;
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&self.hist, &mut bytes).ok()?;
        Some(LatencyWire {
            hdr_v2: base64::engine::general_purpose::STANDARD.encode(bytes),
            exact,
        })
    }

    /// A recorder read back from its wire form; what is wrong with it otherwise.
    pub fn from_wire(w: &LatencyWire) -> Result<LatencyRecorder, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&w.hdr_v2)
            .map_err(|e| format!("a latency histogram is not base64: {e}"))?;
        let read: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("a latency histogram does not decode: {e:?}"))?;
        if read.len() != w.exact.count {
            return Err(format!(
                "a latency histogram holds {} values, its count says {}",
                read.len(),
                w.exact.count
            ));
        }
        let mut r = LatencyRecorder::new();
        r.hist
            .add(&read)
            .map_err(|e| format!("a latency histogram is out of range: {e:?}"))?;
        r.exact = Some(w.exact);
        Ok(r)
    }

    /// The percentiles, or `None` when nothing was recorded.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.hist.is_empty() {
            return None;
        }
        // A percentile is its bucket's highest value, which may lie above the largest value
        // recorded: it is held within the exact min and max, so no percentile ever reads
        // above the maximum (Locust's #1563).
        let (lo, hi) = self
            .exact
            .map_or((0, self.hist.max()), |e| (e.min_us, e.max_us));
        let q = |q: f64| self.hist.value_at_quantile(q).clamp(lo, hi);
        Some(LatencySummary {
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            max: hi,
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

    /// Three hosts' recorders, sent over the wire and added, are one recorder of every value:
    /// the same buckets, the same exact figures, the same percentiles.
    #[test]
    fn hosts_merged_over_the_wire_equal_one_recorder_of_everything() {
        let mut all = LatencyRecorder::new();
        let mut hosts = vec![
            LatencyRecorder::new(),
            LatencyRecorder::new(),
            LatencyRecorder::new(),
        ];
        let mut x: u64 = 12345;
        for i in 0..30_000usize {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let us = 50 + (x >> 33) % 2_000_000;
            all.record_us(us);
            hosts[i % 3].record_us(us);
        }
        let mut merged = LatencyRecorder::new();
        for h in &hosts {
            let wire = h.to_wire().unwrap();
            let text = serde_json::to_string(&wire).unwrap();
            let back: LatencyWire = serde_json::from_str(&text).unwrap();
            merged.add(&LatencyRecorder::from_wire(&back).unwrap());
        }
        assert_eq!(merged.histogram(), all.histogram());
        assert_eq!(merged.exact(), all.exact());
        assert_eq!(merged.summary(), all.summary());
        assert_eq!(merged.exact().unwrap().count, 30_000);
        let s = merged.summary().unwrap();
        assert!(s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.p999 && s.p999 <= s.max);
        assert_eq!(s.max, merged.exact().unwrap().max_us);
    }

    /// 106,599 µs falls in a bucket whose highest value is 106,623: the percentiles stop at
    /// the exact maximum.
    #[test]
    fn no_percentile_reads_above_the_maximum() {
        let mut r = LatencyRecorder::new();
        for us in [106_367, 106_400, 106_599] {
            r.record_us(us);
        }
        let s = r.summary().unwrap();
        assert_eq!((s.p999, s.max), (106_599, 106_599), "{s:?}");
    }

    #[test]
    fn a_wire_histogram_whose_count_disagrees_is_refused() {
        let mut r = LatencyRecorder::new();
        r.record_us(10);
        let mut w = r.to_wire().unwrap();
        w.exact.count = 2;
        assert!(LatencyRecorder::from_wire(&w)
            .unwrap_err()
            .contains("count"));
        w.hdr_v2 = "not base64!".into();
        assert!(LatencyRecorder::from_wire(&w).is_err());
    }
}
