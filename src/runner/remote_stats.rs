//! The counters of a concur delay server started elsewhere (`concur serve`) that `--url`
//! points at, read over HTTP around each run as the in-process server's are read in memory:
//! `POST /stats/reset` before the run, `GET /stats` after it, so that each run records the
//! server's peak in-flight during that run only (the peak `/stats` shows is since the last
//! reset, not per run).
//!
//! The server is outside input: every answer is bounded (a few seconds, [`LIMIT`] bytes) and
//! must parse as concur's own counters, or it is not used. Whether `--url` is a concur server
//! is found once, before any run, by its `GET /stats`: a server of another kind (any other
//! answer, or none) gets nothing more from us, and its runs' server peak stays empty.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::server::StatsSnapshot;
use crate::workload::http::small_request;
use crate::workload::WorkloadOptions;

/// The most bytes an answer of `/stats` may have (concur's is under 1 KiB).
pub const LIMIT: u64 = 64 * 1024;

/// How long one request to `/stats` may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// A concur server's counters, reached over HTTP.
pub struct RemoteStats {
    base_url: String,
    /// Only what TLS needs (`--cacert`, `-k`): no header or body of the tasks' is sent.
    tls: WorkloadOptions,
    /// Whether the counters were reset before the current run: only then is the peak the
    /// run's own.
    reset: AtomicBool,
}

/// Concur's counters in `body`, or why it is not them.
fn counters(status: u16, body: &[u8]) -> Result<StatsSnapshot, String> {
    if status != 200 {
        return Err(format!("answered {status}"));
    }
    let s: StatsSnapshot =
        serde_json::from_slice(body).map_err(|e| format!("answered something else ({e})"))?;
    if s.peak_in_flight < 0 || s.in_flight < 0 {
        return Err("answered negative counts".into());
    }
    Ok(s)
}

impl RemoteStats {
    /// The counters of the server at `base_url` when it is a concur server that lets us
    /// reset them (`POST /stats/reset` answers loopback peers only); otherwise `Err` with a
    /// note to show when it is one that does not (`None` for a server of another kind,
    /// about which there is nothing to say: its column stays empty as it always did).
    pub fn probe(base_url: &str, opts: &WorkloadOptions) -> Result<RemoteStats, Option<String>> {
        let tls = WorkloadOptions {
            ca_pem: opts.ca_pem.clone(),
            insecure: opts.insecure,
            ..WorkloadOptions::default()
        };
        let r = RemoteStats {
            base_url: base_url.to_string(),
            tls,
            reset: AtomicBool::new(false),
        };
        r.get("GET", "/stats").map_err(|_| None)?;
        r.get("POST", "/stats/reset").map_err(|why| {
            Some(format!(
                "the server at {base_url} is concur's, but its POST /stats/reset {why}, so a run's own peak in-flight cannot be told from its counters: the server-peak column stays empty"
            ))
        })?;
        Ok(r)
    }

    /// `METHOD path`'s counters.
    fn get(&self, method: &str, path: &str) -> Result<StatsSnapshot, String> {
        let (status, body) =
            small_request(method, &self.base_url, path, &self.tls, TIMEOUT, LIMIT)?;
        counters(status, &body)
    }

    /// Resets the counters before a run.
    pub fn reset(&self) {
        let ok = self.get("POST", "/stats/reset").is_ok();
        self.reset.store(ok, Ordering::Release);
    }

    /// The peak in-flight since [`RemoteStats::reset`], if that reset took and the counters
    /// can be read now.
    pub fn peak_in_flight(&self) -> Option<i64> {
        if !self.reset.swap(false, Ordering::AcqRel) {
            return None;
        }
        self.get("GET", "/stats").ok().map(|s| s.peak_in_flight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_concur_counters_are_read() {
        let ok = br#"{"requests":3,"in_flight":0,"peak_in_flight":2,"since":1}"#;
        assert_eq!(counters(200, ok).map(|s| s.peak_in_flight), Ok(2));
        assert!(counters(403, ok).is_err());
        for other in [
            &b"ok"[..],
            br#"{"requests":3}"#,
            br#"{"requests":3,"in_flight":0,"peak_in_flight":-1,"since":1}"#,
            br#"{"requests":3,"in_flight":0,"peak_in_flight":2.5,"since":1}"#,
            br#"[1,2]"#,
            b"",
        ] {
            assert!(
                counters(200, other).is_err(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}
