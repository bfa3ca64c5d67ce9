//! HdrHistogram's V2 encoding read from scratch, without the `hdrhistogram` crate: the
//! merged-latency check must not use the code that merges (concur's `LatencyRecorder` and the
//! crate under it), or a bug there would agree with itself.
//!
//! The format, from HdrHistogram's own description (`HistogramLogFormat`, the Java and C
//! encoders): a 40-byte big-endian header (cookie, payload length, normalizing index offset,
//! significant digits, lowest and highest trackable value, integer-to-double ratio), then the
//! counts in index order as zig-zag LEB128 `i64`s, a negative one standing for that many
//! empty slots.

#![allow(dead_code)]

use base64::Engine;
use serde_json::Value;

/// The uncompressed V2 cookie.
const COOKIE: u32 = 0x1c84_9313;

/// One histogram as decoded: its parameters and its counts by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hdr {
    pub digits: u32,
    pub lowest: u64,
    pub highest: u64,
    pub counts: Vec<u64>,
}

/// Decodes `hdr_v2` (base64 of an uncompressed V2 encoding), panicking on anything else.
pub fn decode(b64: &str) -> Hdr {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    assert!(
        bytes.len() >= 40,
        "a V2 header is 40 bytes: {}",
        bytes.len()
    );
    let u32_at = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap());
    assert_eq!(u32_at(0), COOKIE, "an uncompressed V2 cookie");
    let len = u32_at(4) as usize;
    assert_eq!(u32_at(8), 0, "no normalizing offset");
    let digits = u32_at(12);
    let (lowest, highest) = (u64_at(16), u64_at(24));
    assert_eq!(f64::from_bits(u64_at(32)), 1.0, "integer-to-double ratio");
    let payload = &bytes[40..];
    assert_eq!(payload.len(), len, "the payload length the header declares");
    let mut counts = Vec::new();
    let mut at = 0;
    while at < payload.len() {
        // LEB128, at most 9 bytes (the ninth carries 8 bits).
        let mut raw: u64 = 0;
        let mut shift = 0;
        loop {
            let b = payload[at];
            at += 1;
            if shift == 56 {
                raw |= (b as u64) << 56;
                break;
            }
            raw |= ((b & 0x7f) as u64) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let v = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
        if v < 0 {
            counts.extend(std::iter::repeat_n(0, v.unsigned_abs() as usize));
        } else {
            counts.push(v as u64);
        }
    }
    Hdr {
        digits,
        lowest,
        highest,
        counts,
    }
}

impl Hdr {
    /// The sub-bucket count's magnitude: enough binary sub-buckets for `digits` decimal
    /// digits (2 * 10^digits, rounded up to a power of two), halved.
    fn half_magnitude(&self) -> u32 {
        let needed = 2 * 10u64.pow(self.digits);
        (64 - (needed - 1).leading_zeros()) - 1
    }

    fn unit_magnitude(&self) -> u32 {
        63 - self.lowest.leading_zeros()
    }

    /// The smallest and largest value that index `i` stands for.
    pub fn range(&self, i: usize) -> (u64, u64) {
        let half_mag = self.half_magnitude();
        let half = 1u64 << half_mag;
        let i = i as u64;
        let (bucket, sub) = match (i >> half_mag).checked_sub(1) {
            None => (0, i & (half - 1)),
            Some(b) => (b, (i & (half - 1)) + half),
        };
        let shift = bucket + self.unit_magnitude() as u64;
        let low = sub << shift;
        (low, low + (1u64 << shift) - 1)
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other` slot by slot (both must have the same parameters).
    pub fn add(&mut self, other: &Hdr) {
        assert_eq!(
            (self.digits, self.lowest, self.highest),
            (other.digits, other.lowest, other.highest),
            "histograms of one configuration"
        );
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// The `q` quantile as HdrHistogram states it: the highest value of the slot holding the
    /// value of rank ceil(q * total) (at least 1), held within the exact `[min, max]`.
    pub fn quantile(&self, q: f64, min: u64, max: u64) -> u64 {
        let rank = ((q * self.total() as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return self.range(i).1.clamp(min, max);
            }
        }
        panic!("rank {rank} beyond the {} values", self.total());
    }
}

/// The exact figures of a wire histogram (`count`, `min_us`, `max_us`, `sum_us`).
fn exact(v: &Value) -> (u64, u64, u64, u64) {
    let f = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("no {k} in the histogram {v}"))
    };
    (f("count"), f("min_us"), f("max_us"), f("sum_us"))
}

/// Checks the percentiles `latency_us` (a run line's or a part's) against `h` with the exact
/// `min` and `max`.
fn assert_percentiles(what: &str, latency_us: &Value, h: &Hdr, min: u64, max: u64) {
    for (key, q) in [("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999)] {
        assert_eq!(
            latency_us[key].as_u64(),
            Some(h.quantile(q, min, max)),
            "{what}: {key} of {latency_us}"
        );
    }
    assert_eq!(
        latency_us["max"].as_u64(),
        Some(max),
        "{what}: {latency_us}"
    );
}

/// A hub run line's merged latency checked without concur's histogram code: each host
/// part's histogram decoded here must give that host's own reported percentiles (so the
/// decoding is right); their slot-by-slot sum must be the merged histogram the run carries,
/// count every task that ended well, and give the run's percentiles; the exact count, min,
/// max and sum must be the parts' combined.
pub fn assert_merged_latency_is_the_hosts_added(run: &Value) {
    let hub = &run["hub"];
    let parts = hub["parts"].as_array().expect("parts");
    assert_eq!(
        Some(parts.len() as u64),
        run["hosts"].as_u64(),
        "one part per host: {run}"
    );
    let mut sum: Option<Hdr> = None;
    let (mut count, mut min, mut max, mut total_us) = (0, u64::MAX, 0, 0);
    for p in parts {
        let wire = &p["latency_hdr"];
        let h = decode(wire["hdr_v2"].as_str().expect("hdr_v2"));
        let (c, lo, hi, s) = exact(wire);
        assert_eq!(h.total(), c, "{}: its histogram holds its count", p["host"]);
        assert_eq!(
            Some(c),
            p["run"]["tasks_ok"].as_u64(),
            "{}: a latency per task that ended well",
            p["host"]
        );
        assert_percentiles(
            &format!("host {}", p["host"]),
            &p["run"]["latency_us"],
            &h,
            lo,
            hi,
        );
        (count, min, max, total_us) = (count + c, min.min(lo), max.max(hi), total_us + s);
        match &mut sum {
            None => sum = Some(h),
            Some(a) => a.add(&h),
        }
    }
    let sum = sum.expect("at least one part");
    let wire = &hub["latency_hdr"];
    let mut merged = decode(wire["hdr_v2"].as_str().expect("the merged hdr_v2"));
    // Trailing empty slots are not encoded: compare what is counted.
    let mut expected = sum.clone();
    let n = merged.counts.len().max(expected.counts.len());
    merged.counts.resize(n, 0);
    expected.counts.resize(n, 0);
    assert!(
        merged == expected,
        "the merged histogram is not the parts' sum: {run}"
    );
    assert_eq!(exact(wire), (count, min, max, total_us), "{run}");
    assert_eq!(Some(count), run["tasks_ok"].as_u64(), "{run}");
    assert_percentiles("the merged run", &run["latency_us"], &sum, min, max);
}
