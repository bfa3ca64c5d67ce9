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
            count: self.count.saturating_add(other.count),
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

/// The smallest value the histogram tells apart, µs.
const LOWEST_US: u64 = 1;
/// The largest value it tracks (one hour), µs.
const HIGHEST_US: u64 = 3_600_000_000;
/// Its significant decimal digits.
const SIGNIFICANT_DIGITS: u8 = 3;

/// HdrHistogram's cookie of an uncompressed V2 encoding (the only one `to_wire` writes).
const V2_COOKIE: u32 = 0x1c84_9313;
/// The deflated V2 encoding's cookie: refused (its size is not known before inflating it).
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// The V2 header: cookie, payload length, normalizing offset, digits (4 bytes each), lowest
/// and highest value, integer-to-double ratio (8 bytes each).
const V2_HEADER: usize = 40;
/// The longest a count takes in V2's LEB128 (zig-zag, at most 9 bytes).
const V2_COUNT_MAX: usize = 9;

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
        let hist = Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
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

    /// The most bytes an honest V2 encoding of this configuration takes: the header and
    /// every bucket's count at its longest. Anything longer was not written by `to_wire`.
    pub fn wire_max_bytes() -> usize {
        let buckets = LatencyRecorder::new().hist.distinct_values();
        V2_HEADER + buckets * V2_COUNT_MAX
    }

    /// A recorder read back from its wire form (outside input: another host's answer, a
    /// results file); what is wrong with it otherwise.
    ///
    /// HdrHistogram's reader allocates what the header declares (the counts for its bounds,
    /// a buffer of its payload length) before it reads a byte of the payload, so a 56-byte
    /// forgery declaring 4 GiB took the study's RSS to 4.2 GB. The encoding is therefore
    /// checked first, by hand: its length against the longest honest one (about 400 KB), the
    /// header's cookie, its payload length against the bytes present, and its bounds and
    /// digits against this recorder's own. Only then is it decoded.
    pub fn from_wire(w: &LatencyWire) -> Result<LatencyRecorder, String> {
        let max_bytes = Self::wire_max_bytes();
        let max_chars = max_bytes.div_ceil(3) * 4;
        if w.hdr_v2.len() > max_chars {
            return Err(format!(
                "a latency histogram of {} base64 characters (allowed: at most {max_chars})",
                w.hdr_v2.len()
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&w.hdr_v2)
            .map_err(|e| {
                format!(
                    "a latency histogram is not base64: {e} (allowed: base64, standard alphabet)"
                )
            })?;
        check_v2_header(&bytes, max_bytes)?;
        check_exact(&w.exact)?;
        let read: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| {
                format!("a latency histogram does not decode: {e} (allowed: HdrHistogram's V2)")
            })?;
        if read.len() != w.exact.count {
            return Err(format!(
                "a latency histogram holds {} values, its count says {} (allowed: the same number)",
                read.len(),
                w.exact.count
            ));
        }
        let mut r = LatencyRecorder::new();
        r.hist.add(&read).map_err(|e| {
            format!("a latency histogram is out of range: {e:?} (allowed: 1 µs to 1 h)")
        })?;
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

/// The V2 header of `bytes`, checked against what `to_wire` writes: an uncompressed V2
/// cookie, a payload length equal to the bytes present, no normalizing offset, this
/// recorder's bounds and digits, an integer-to-double ratio of 1.
fn check_v2_header(bytes: &[u8], max_bytes: usize) -> Result<(), String> {
    if bytes.len() > max_bytes {
        return Err(format!(
            "a latency histogram of {} bytes (allowed: at most {max_bytes})",
            bytes.len()
        ));
    }
    if bytes.len() < V2_HEADER {
        return Err(format!(
            "a latency histogram of {} bytes, shorter than its {V2_HEADER}-byte header (allowed: {V2_HEADER} to {max_bytes} bytes)",
            bytes.len()
        ));
    }
    let u32_at =
        |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let u64_at = |i: usize| (u64::from(u32_at(i)) << 32) | u64::from(u32_at(i + 4));
    match u32_at(0) {
        V2_COOKIE => {}
        V2_DEFLATE_COOKIE => {
            return Err(
                "a latency histogram is deflated (allowed: HdrHistogram's uncompressed V2)".into(),
            )
        }
        c => {
            return Err(format!(
                "a latency histogram's cookie is {c:#010x} (allowed: {V2_COOKIE:#010x}, HdrHistogram's V2)"
            ))
        }
    }
    let payload = u32_at(4) as usize;
    let present = bytes.len() - V2_HEADER;
    if payload != present {
        return Err(format!(
            "a latency histogram declares a payload of {payload} bytes and carries {present} (allowed: the bytes it carries)"
        ));
    }
    let (offset, digits, low, high) = (u32_at(8), u32_at(12), u64_at(16), u64_at(24));
    let ratio = f64::from_bits(u64_at(32));
    if offset != 0 || ratio != 1.0 {
        return Err(format!(
            "a latency histogram with normalizing offset {offset} and ratio {ratio} (allowed: 0 and 1)"
        ));
    }
    if (low, high, digits) != (LOWEST_US, HIGHEST_US, u32::from(SIGNIFICANT_DIGITS)) {
        return Err(format!(
            "a latency histogram of {low}..{high} µs at {digits} digits (allowed: {LOWEST_US}..{HIGHEST_US} µs at {SIGNIFICANT_DIGITS} digits, every host's configuration)"
        ));
    }
    check_v2_payload(&bytes[V2_HEADER..], (max_bytes - V2_HEADER) / V2_COUNT_MAX)
}

/// The payload's counts, walked as HdrHistogram's reader walks them (LEB128 of at most 9
/// bytes, zig-zag; a negative number is a run of that many empty buckets): they must end on a
/// whole number, fit in `buckets`, and hold no run of 2^63 (whose negation overflows in the
/// reader, a panic in a build with overflow checks).
fn check_v2_payload(payload: &[u8], buckets: usize) -> Result<(), String> {
    let mut at = 0usize;
    let mut index = 0u64;
    while at < payload.len() {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let Some(&b) = payload.get(at) else {
                return Err("a latency histogram's counts end in the middle of a number (allowed: whole LEB128 numbers)".into());
            };
            at += 1;
            if shift == 56 {
                value |= u64::from(b) << 56;
                break;
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let n = ((value >> 1) as i64) ^ -((value & 1) as i64);
        // `unsigned_abs`: i64::MIN's run (2^63) is counted here, not negated.
        index = if n < 0 {
            index.saturating_add(n.unsigned_abs())
        } else {
            index + 1
        };
        if index > buckets as u64 {
            return Err(format!(
                "a latency histogram's counts run past its {buckets} buckets (allowed: this recorder's configuration)"
            ));
        }
    }
    Ok(())
}

/// The exact figures beside a histogram, checked to be those of a set of values: at least
/// one, none below 1 µs (what `record_us` keeps), min ≤ max, and a sum between count × min
/// and count × max.
fn check_exact(e: &LatencyExact) -> Result<(), String> {
    let lowest = e.count.saturating_mul(e.min_us);
    let highest = e.count.saturating_mul(e.max_us);
    let ok = e.count >= 1
        && e.min_us >= LOWEST_US
        && e.min_us <= e.max_us
        && (lowest..=highest).contains(&e.sum_us);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a latency histogram's exact figures do not hold together: count {}, min {} µs, max {} µs, sum {} µs (allowed: count ≥ 1, 1 ≤ min ≤ max, count × min ≤ sum ≤ count × max)",
            e.count, e.min_us, e.max_us, e.sum_us
        ))
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

    /// A V2 header as `to_wire` writes it, with the given fields, followed by `payload`.
    fn forged(
        cookie: u32,
        declared: u32,
        low: u64,
        high: u64,
        digits: u32,
        payload: &[u8],
    ) -> LatencyWire {
        let mut b = Vec::new();
        b.extend(cookie.to_be_bytes());
        b.extend(declared.to_be_bytes());
        b.extend(0u32.to_be_bytes());
        b.extend(digits.to_be_bytes());
        b.extend(low.to_be_bytes());
        b.extend(high.to_be_bytes());
        b.extend(1.0f64.to_bits().to_be_bytes());
        b.extend(payload);
        LatencyWire {
            hdr_v2: base64::engine::general_purpose::STANDARD.encode(b),
            exact: LatencyExact {
                count: 1,
                min_us: 10,
                max_us: 10,
                sum_us: 10,
            },
        }
    }

    /// The forgery: 56 base64 characters whose header declares a 4 GiB payload. It
    /// is refused from its header, before HdrHistogram's reader allocates anything for it.
    #[test]
    fn a_histogram_declaring_more_than_it_carries_is_refused_before_decoding() {
        let w = forged(V2_COOKIE, u32::MAX, 1, HIGHEST_US, 3, &[2, 0]);
        assert_eq!(w.hdr_v2.len(), 56);
        let e = LatencyRecorder::from_wire(&w).unwrap_err();
        assert!(e.contains("4294967295") && e.contains("carries 2"), "{e}");
        // Bounds other than the recorder's own (a counts array of any size) are refused too.
        for (low, high, digits) in [(1, u64::MAX / 2, 3), (1, HIGHEST_US, 5), (2, HIGHEST_US, 3)] {
            let e = LatencyRecorder::from_wire(&forged(V2_COOKIE, 2, low, high, digits, &[2, 0]))
                .unwrap_err();
            assert!(e.contains("allowed: 1..3600000000 µs at 3 digits"), "{e}");
        }
        let e =
            LatencyRecorder::from_wire(&forged(V2_DEFLATE_COOKIE, 2, 1, HIGHEST_US, 3, &[2, 0]))
                .unwrap_err();
        assert!(e.contains("deflated"), "{e}");
        let e = LatencyRecorder::from_wire(&forged(7, 2, 1, HIGHEST_US, 3, &[2, 0])).unwrap_err();
        assert!(e.contains("cookie"), "{e}");
        // A header cut short.
        let mut short = forged(V2_COOKIE, 0, 1, HIGHEST_US, 3, &[]);
        short.hdr_v2 = base64::engine::general_purpose::STANDARD.encode([0x1c, 0x84, 0x93, 0x13]);
        assert!(LatencyRecorder::from_wire(&short)
            .unwrap_err()
            .contains("header"));
    }

    #[test]
    fn a_histogram_longer_than_any_honest_one_is_refused_before_base64_decoding() {
        let mut w = forged(V2_COOKIE, 2, 1, HIGHEST_US, 3, &[2, 0]);
        w.hdr_v2 = "A".repeat(LatencyRecorder::wire_max_bytes().div_ceil(3) * 4 + 4);
        let e = LatencyRecorder::from_wire(&w).unwrap_err();
        assert!(e.contains("base64 characters"), "{e}");
    }

    /// Every bucket full, each count at its longest: the longest honest encoding fits the cap
    /// and reads back.
    #[test]
    fn the_longest_honest_histogram_fits_the_cap() {
        let mut r = LatencyRecorder::new();
        let values: Vec<u64> = r.hist.iter_all().map(|v| v.value_iterated_to()).collect();
        assert_eq!(values.len(), r.hist.distinct_values());
        for v in values {
            r.hist.record_n(v, 1 << 61).unwrap();
        }
        assert!(r.hist.iter_all().all(|v| v.count_at_value() > 0));
        r.exact = Some(LatencyExact {
            count: r.hist.len(),
            min_us: 1,
            max_us: HIGHEST_US,
            sum_us: u64::MAX,
        });
        let w = r.to_wire().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&w.hdr_v2)
            .unwrap();
        assert!(
            bytes.len() <= LatencyRecorder::wire_max_bytes(),
            "{}",
            bytes.len()
        );
        let back = LatencyRecorder::from_wire(&w).unwrap();
        assert_eq!(back.histogram(), r.histogram());
    }

    #[test]
    fn counts_that_run_past_the_buckets_or_cannot_be_negated_are_refused() {
        // A run of 2^63 empty buckets: zig-zag of i64::MIN is u64::MAX, nine bytes.
        let min = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let e =
            LatencyRecorder::from_wire(&forged(V2_COOKIE, 9, 1, HIGHEST_US, 3, &min)).unwrap_err();
        assert!(e.contains("run past"), "{e}");
        // A run of a million empty buckets, then a count.
        let mut far = Vec::new();
        let mut z: u64 = (1_000_000u64 << 1) - 1; // zig-zag of -1,000,000
        while z >= 0x80 {
            far.push((z as u8) | 0x80);
            z >>= 7;
        }
        far.push(z as u8);
        far.push(2);
        let n = far.len() as u32;
        let e =
            LatencyRecorder::from_wire(&forged(V2_COOKIE, n, 1, HIGHEST_US, 3, &far)).unwrap_err();
        assert!(e.contains("run past"), "{e}");
        // A number cut in the middle.
        let e = LatencyRecorder::from_wire(&forged(V2_COOKIE, 1, 1, HIGHEST_US, 3, &[0x80]))
            .unwrap_err();
        assert!(e.contains("middle"), "{e}");
    }

    #[test]
    fn exact_figures_that_no_set_of_values_has_are_refused() {
        let mut r = LatencyRecorder::new();
        r.record_us(10);
        r.record_us(30);
        let good = r.to_wire().unwrap();
        assert!(LatencyRecorder::from_wire(&good).is_ok());
        for bad in [
            LatencyExact {
                min_us: 40,
                ..good.exact
            },
            LatencyExact {
                sum_us: 100,
                ..good.exact
            },
            LatencyExact {
                min_us: 0,
                sum_us: 30,
                ..good.exact
            },
            LatencyExact {
                count: 0,
                ..good.exact
            },
        ] {
            let w = LatencyWire {
                exact: bad,
                ..good.clone()
            };
            let e = LatencyRecorder::from_wire(&w).unwrap_err();
            assert!(e.contains("exact figures"), "{bad:?}: {e}");
        }
    }
}
