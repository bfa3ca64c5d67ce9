//! What bounds a workload's time ([`Nature`]): declared by every workload, recorded on every
//! results line, read by the analysis and the advice.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What bounds a workload's time: the one definition, which workloads declare and the
/// results record (as the word `nature` and, for a delay, `delay_s`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Nature {
    /// Computation: parallelism is bounded by the cores.
    #[default]
    Cpu,
    /// Blocking system calls that do work in the kernel (reads): bounded by the cores too.
    BlockingIo,
    /// Waiting for a fixed time (sleep, the delay server): bounded only by concurrency.
    Delay(Duration),
    /// Network requests whose server time is unknown: no ideal can be computed.
    Network,
    /// Another program's work (`cmd:`), unknown until measured: the `seq` cell's effective
    /// cores decide whether it computes or waits when the cells are computed.
    Measured,
}

impl Nature {
    /// Whether tasks of this nature wait rather than compute, so that their ideal speedup is
    /// their concurrency, not the cores. The one definition of "waits" (analysis, advice and
    /// every report use it).
    pub fn waits(self) -> bool {
        matches!(self, Nature::Delay(_) | Nature::Network)
    }

    /// The word written in the results file.
    pub fn word(self) -> &'static str {
        match self {
            Nature::Cpu => "cpu",
            Nature::BlockingIo => "io",
            Nature::Delay(_) => "delay",
            Nature::Network => "net",
            Nature::Measured => "measured",
        }
    }

    /// The fixed delay of a delay-bound workload, seconds.
    pub fn delay_s(self) -> Option<f64> {
        match self {
            Nature::Delay(d) => Some(d.as_secs_f64()),
            _ => None,
        }
    }
}

/// How a nature stands in a results line: two fields, `nature` and `delay_s` (schema 1).
#[derive(Serialize, Deserialize)]
struct NatureFields {
    nature: String,
    #[serde(default)]
    delay_s: Option<f64>,
}

impl Serialize for Nature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        NatureFields {
            nature: self.word().to_string(),
            delay_s: self.delay_s(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Nature {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let f = NatureFields::deserialize(d)?;
        Ok(match f.nature.as_str() {
            "cpu" => Nature::Cpu,
            "io" => Nature::BlockingIo,
            // Not a time a Duration holds (negative, NaN, or past its range): no delay.
            "delay" => Nature::Delay(
                f.delay_s
                    .and_then(|d| Duration::try_from_secs_f64(d).ok())
                    .unwrap_or_default(),
            ),
            "net" => Nature::Network,
            "measured" => Nature::Measured,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "unknown nature '{other}' (allowed: cpu, io, delay, net, measured)"
                )))
            }
        })
    }
}
