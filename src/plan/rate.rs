//! Open-model settings (`--rate`, `--duration`, `--interval`, `--slo`): their types and
//! parsers. [`crate::plan::build`] calls these once; nothing downstream re-validates.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::measure::latency::LatencySummary;
use crate::measure::schedule::{OpenRun, Schedule};

/// The highest rate accepted, tasks per second.
pub const MAX_RATE: f64 = 1_000_000.0;

/// How long one probe of `--rate auto` lasts unless `--duration` says otherwise.
pub const PROBE_DURATION: Duration = Duration::from_secs(2);

/// How long an open run lasts when neither `-n` nor `--duration` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(5);

/// The asked rate.
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    /// A constant rate, tasks per second.
    Fixed(f64),
    /// A rate rising linearly from the first to the second over the run.
    Ramp(f64, f64),
    /// Search for the highest rate that keeps the SLO (`--rate auto`).
    Auto(Slo),
}

/// Which latency percentile an SLO bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantile {
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// 99.9th percentile.
    P999,
    /// Largest.
    Max,
}

impl Quantile {
    /// Its name in an SLO (`p99`).
    pub fn name(self) -> &'static str {
        match self {
            Quantile::P50 => "p50",
            Quantile::P90 => "p90",
            Quantile::P99 => "p99",
            Quantile::P999 => "p999",
            Quantile::Max => "max",
        }
    }

    /// Its value in a summary, µs.
    pub fn of(self, s: &LatencySummary) -> u64 {
        match self {
            Quantile::P50 => s.p50,
            Quantile::P90 => s.p90,
            Quantile::P99 => s.p99,
            Quantile::P999 => s.p999,
            Quantile::Max => s.max,
        }
    }
}

/// A latency objective: `p99<100ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// The percentile.
    pub quantile: Quantile,
    /// Its bound (inclusive).
    pub limit: Duration,
    /// As the user wrote it.
    pub text: String,
}

impl Slo {
    /// Whether a run's corrected latency keeps the objective.
    pub fn kept(&self, latency: &LatencySummary) -> bool {
        self.quantile.of(latency) as u128 <= self.limit.as_micros()
    }
}

/// The validated open-model settings of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenPlan {
    /// The asked rate.
    pub rate: Rate,
    /// `--duration`: how long each run's releases last (sets each cell's task count).
    pub duration: Option<Duration>,
    /// The time series' interval.
    pub interval: Duration,
    /// `--grain`: the release timer's grain (none: each task at its own time).
    pub grain: Option<Duration>,
    /// `--rate auto -r N`: after each cell's search, N fresh runs at the rate found, which make
    /// its row (the probe that found the rate is not among them: it was kept because it
    /// passed). 0 (no `-r`): that probe is the cell's one run.
    pub remeasure: usize,
}

impl OpenPlan {
    /// Whether this is `--rate auto`.
    pub fn is_auto(&self) -> bool {
        matches!(self.rate, Rate::Auto(_))
    }
}

impl OpenPlan {
    /// The run request's schedule for a cell of `tasks` tasks (`None` for `auto`, whose probes
    /// each get a fixed rate of their own).
    pub fn run(&self, tasks: usize) -> Option<OpenRun> {
        let schedule = match self.rate {
            Rate::Fixed(r) => Schedule::fixed(r, tasks),
            Rate::Ramp(a, b) => Schedule {
                from: a,
                to: b,
                tasks,
                segment: crate::measure::schedule::Segment::WHOLE,
            },
            Rate::Auto(_) => return None,
        };
        Some(OpenRun {
            schedule,
            interval_us: self.interval.as_micros().max(1) as u64,
            grain_us: self.grain.map_or(0, |g| g.as_micros() as u64),
        })
    }

    /// The mean asked rate, for fixed rates and ramps.
    pub fn mean_rate(&self) -> Option<f64> {
        match self.rate {
            Rate::Fixed(r) => Some(r),
            Rate::Ramp(a, b) => Some((a + b) / 2.0),
            Rate::Auto(_) => None,
        }
    }
}

const RATE_FORM: &str = "a rate in tasks per second above 0 (e.g. 500 or 2.5), a ramp A..B that does not fall (100..2000), or auto (with --slo)";

fn number(text: &str, whole: &str) -> Result<f64> {
    match text.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= MAX_RATE => Ok(r),
        _ => Err(Error::flag(
            "--rate",
            format!("--rate '{whole}': must be {RATE_FORM}; at most {MAX_RATE}"),
        )),
    }
}

/// Parses `--rate`: `R`, `A..B` or `auto` (which needs `slo`).
pub fn parse_rate(text: &str, slo: Option<&str>) -> Result<Rate> {
    let t = text.trim();
    if t == "auto" {
        let Some(slo) = slo else {
            return Err(Error::flag(
                "--rate",
                "--rate auto needs --slo, the latency to keep (e.g. --slo 'p99<100ms')",
            ));
        };
        return Ok(Rate::Auto(parse_slo(slo)?));
    }
    if slo.is_some() {
        return Err(Error::flag(
            "--slo",
            format!("--slo applies to --rate auto only, not to --rate '{text}'"),
        ));
    }
    match t.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (number(a, text)?, number(b, text)?);
            if b < a {
                return Err(Error::flag(
                    "--rate",
                    format!("--rate '{text}': a ramp A..B rises (or stays): B must be at least A"),
                ));
            }
            Ok(if a == b {
                Rate::Fixed(a)
            } else {
                Rate::Ramp(a, b)
            })
        }
        None => Ok(Rate::Fixed(number(t, text)?)),
    }
}

/// Parses an SLO: `p50|p90|p99|p999|max` then `<` or `<=` then a duration (`p99<100ms`).
pub fn parse_slo(text: &str) -> Result<Slo> {
    let bad = || {
        Error::flag("--slo", format!(
            "--slo '{text}': must be PERCENTILE<DURATION with PERCENTILE one of p50, p90, p99, p999, max (e.g. 'p99<100ms')"
        ))
    };
    let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let (q, limit) = t
        .split_once("<=")
        .or_else(|| t.split_once('<'))
        .ok_or_else(bad)?;
    let quantile = match q {
        "p50" => Quantile::P50,
        "p90" => Quantile::P90,
        "p99" => Quantile::P99,
        "p999" | "p99.9" => Quantile::P999,
        "max" => Quantile::Max,
        _ => return Err(bad()),
    };
    let limit = crate::base::units::parse_duration(limit).map_err(|_| bad())?;
    if limit.is_zero() {
        return Err(bad());
    }
    Ok(Slo {
        quantile,
        limit,
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_ramps_and_slos_parse_and_bad_ones_are_named() {
        assert_eq!(parse_rate("50", None).unwrap(), Rate::Fixed(50.0));
        assert_eq!(
            parse_rate("100..2000", None).unwrap(),
            Rate::Ramp(100.0, 2000.0)
        );
        let Rate::Auto(slo) = parse_rate("auto", Some("p99<150ms")).unwrap() else {
            panic!()
        };
        assert_eq!(
            (slo.quantile, slo.limit),
            (Quantile::P99, Duration::from_millis(150))
        );
        for (rate, slo, needle) in [
            ("0", None, "'0'"),
            ("-3", None, "'-3'"),
            ("fast", None, "'fast'"),
            ("NaN", None, "'NaN'"),
            ("2000..100", None, "'2000..100'"),
            ("auto", None, "needs --slo"),
            ("auto", Some("p99 100ms"), "'p99 100ms'"),
            ("auto", Some("p42<1s"), "'p42<1s'"),
            ("10", Some("p99<1s"), "auto only"),
        ] {
            let e = parse_rate(rate, slo).unwrap_err().to_string();
            assert!(e.contains(needle), "{rate} {slo:?}: {e}");
            assert!(!e.contains('\n'));
        }
    }
}
