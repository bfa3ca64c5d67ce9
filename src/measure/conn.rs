//! Connections an HTTP client opened or reused, and what opening them cost (TCP connect, TLS
//! handshake), recorded by whichever client ran the tasks.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::latency::{LatencyRecorder, LatencySummary};

/// One request's connection: new or reused; for a new one, the microseconds spent connecting
/// and in the TLS handshake where the client can tell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConnSample {
    /// Whether the request opened a connection (false: it reused a kept one).
    pub opened: bool,
    /// TCP connect time, µs.
    pub connect_us: Option<u64>,
    /// TLS handshake time, µs.
    pub tls_us: Option<u64>,
}

/// What a run's connections were, as written to the results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnSummary {
    /// Connections opened.
    pub opened: u64,
    /// Requests sent on a connection that was already open.
    pub reused: u64,
    /// Connect time per new connection, µs.
    pub connect_us: Option<LatencySummary>,
    /// TLS handshake time per new connection, µs.
    pub tls_us: Option<LatencySummary>,
}

#[derive(Default)]
struct Inner {
    opened: u64,
    reused: u64,
    connect: Option<LatencyRecorder>,
    tls: Option<LatencyRecorder>,
}

/// Collects [`ConnSample`]s from any thread; the lock is taken once per request, far below
/// the cost of the request itself.
#[derive(Default)]
pub struct ConnRecorder {
    inner: Mutex<Inner>,
}

impl ConnRecorder {
    /// Adds one request's connection.
    pub fn record(&self, s: ConnSample) {
        let mut i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if s.opened {
            i.opened += 1;
        } else {
            i.reused += 1;
        }
        // The histograms are made on first use: a run over kept connections needs none.
        if let Some(us) = s.connect_us {
            i.connect
                .get_or_insert_with(LatencyRecorder::new)
                .record_us(us);
        }
        if let Some(us) = s.tls_us {
            i.tls.get_or_insert_with(LatencyRecorder::new).record_us(us);
        }
    }

    /// The summary, or `None` when no request was recorded in this process (the tasks ran in
    /// other processes: `fork`, `spawn`).
    pub fn summary(&self) -> Option<ConnSummary> {
        let i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if i.opened + i.reused == 0 {
            return None;
        }
        Some(ConnSummary {
            opened: i.opened,
            reused: i.reused,
            connect_us: i.connect.as_ref().and_then(|h| h.summary()),
            tls_us: i.tls.as_ref().and_then(|h| h.summary()),
        })
    }
}
