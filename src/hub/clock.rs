//! A host's clock against the hub's, NTP's way: a few round trips to Redis's `TIME`, the one
//! with the shortest round trip kept, the hub's reading taken to fall at its middle. Two
//! offsets come of each measurement: against this host's wall clock (what is reported: "this
//! host's clock is 5 s behind the hub's"), and against its monotonic clock (what a run's start
//! is translated through, so a host whose wall clock is wrong still starts on time). The
//! uncertainty is half the round trip, plus the microsecond `TIME` is given in.

use redis::Connection;
use serde::{Deserialize, Serialize};

use crate::measure::{mono_ns, wall_ns};

/// How many round trips a measurement takes.
pub const ROUNDS: usize = 8;

/// A host's clock offset against the hub, with its uncertainty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClockOffset {
    /// The hub's wall clock minus this host's, ns (positive: this host is behind).
    pub offset_ns: i64,
    /// How far off the offset may be, ns (half the best round trip, plus `TIME`'s 1 µs).
    pub uncertainty_ns: u64,
    /// The hub's wall clock minus this host's monotonic clock, ns.
    pub mono_offset_ns: i64,
}

impl ClockOffset {
    /// The instant `hub_ns` of the hub's clock on this host's monotonic clock.
    pub fn to_local_mono(self, hub_ns: u64) -> u64 {
        (hub_ns as i64 - self.mono_offset_ns).max(0) as u64
    }

    /// The instant `mono` of this host's monotonic clock on the hub's clock.
    pub fn to_hub(self, mono: u64) -> u64 {
        (mono as i64 + self.mono_offset_ns).max(0) as u64
    }
}

/// The hub's clock now, ns since the epoch.
pub fn hub_now_ns(c: &mut Connection) -> redis::RedisResult<u64> {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c)?;
    Ok(s * 1_000_000_000 + us * 1000)
}

/// One round trip: (round trip ns, hub − wall ns, hub − mono ns).
type Sample = (u64, i64, i64);

/// Measures this host's offset against the hub over [`ROUNDS`] round trips.
pub fn measure(c: &mut Connection) -> redis::RedisResult<ClockOffset> {
    let mut samples: Vec<Sample> = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let (m0, w0) = (mono_ns(), wall_ns());
        let hub = hub_now_ns(c)?;
        let (m1, w1) = (mono_ns(), wall_ns());
        let mid = |a: u64, b: u64| (a / 2 + b / 2) as i64;
        samples.push((
            m1.saturating_sub(m0),
            hub as i64 - mid(w0, w1),
            hub as i64 - mid(m0, m1),
        ));
    }
    Ok(best(&samples))
}

/// The offset of the sample with the shortest round trip.
fn best(samples: &[Sample]) -> ClockOffset {
    let (rtt, offset_ns, mono_offset_ns) = samples
        .iter()
        .copied()
        .min_by_key(|s| s.0)
        .unwrap_or((0, 0, 0));
    ClockOffset {
        offset_ns,
        uncertainty_ns: rtt / 2 + 1000,
        mono_offset_ns,
    }
}

/// An offset as people read it: `+5.000 s ± 0.1 ms` (hub minus host).
pub fn describe(o: &ClockOffset) -> String {
    format!(
        "{:+.3} ms ± {:.3} ms",
        o.offset_ns as f64 / 1e6,
        o.uncertainty_ns as f64 / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_round_trip_wins_and_instants_translate_both_ways() {
        let o = best(&[(900_000, 5, 50), (100_000, 7, 70), (300_000, 9, 90)]);
        assert_eq!(
            o,
            ClockOffset {
                offset_ns: 7,
                uncertainty_ns: 51_000,
                mono_offset_ns: 70
            }
        );
        assert_eq!(o.to_hub(o.to_local_mono(1_000_000)), 1_000_000);
        assert_eq!(describe(&o), "+0.000 ms ± 0.051 ms");
    }
}
