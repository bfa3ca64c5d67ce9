//! Connections an HTTP client opened or reused, and what opening them cost (TCP connect, TLS
//! handshake), recorded by whichever client ran the tasks.

use std::sync::atomic::{AtomicU64, Ordering};
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

/// HTTP: the connections a run's client opened and reused, and what opening them cost: the
/// one summary, from the recorder through the child's report and an agent's answer to the
/// run lines and, from the median run, the cell lines.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Connections {
    /// Connections the run's client opened; null when it cannot tell (tasks in other
    /// processes) or the workload is not http.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_opened: Option<u64>,
    /// HTTP: requests sent on a connection that was already open (0 with `--no-keepalive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_reused: Option<u64>,
    /// HTTP: TCP connect time per new connection, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_us: Option<LatencySummary>,
    /// HTTPS: TLS handshake time per new connection, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_us: Option<LatencySummary>,
    /// HTTP: the version the requests went out in, where the client tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_version: Option<HttpVersion>,
    /// HTTP/2: the most streams (requests) open at once on one connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_streams_per_connection: Option<u64>,
    /// HTTP/2: the server's `SETTINGS_MAX_CONCURRENT_STREAMS`, when the client tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_max_concurrent_streams: Option<u64>,
}

/// An HTTP version as the results record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HttpVersion {
    /// HTTP/1.1.
    #[serde(rename = "1.1")]
    Http1,
    /// HTTP/2.
    #[serde(rename = "2")]
    Http2,
    /// HTTP/3 (over QUIC).
    #[serde(rename = "3")]
    Http3,
}

#[derive(Default)]
struct Inner {
    opened: u64,
    connect: Option<LatencyRecorder>,
    tls: Option<LatencyRecorder>,
    http_version: Option<HttpVersion>,
    server_max_streams: Option<u64>,
}

/// Collects [`ConnSample`]s from any thread. What every request records (a reused connection,
/// the streams open now) are atomics: the clients' threads never wait on each other for them.
/// A new connection, rare and slow anyway, takes the lock.
#[derive(Default)]
pub struct ConnRecorder {
    inner: Mutex<Inner>,
    reused: AtomicU64,
    /// The most streams open at once on one connection; 0 until one was.
    peak_streams: AtomicU64,
}

impl ConnRecorder {
    /// Adds one request's connection.
    pub fn record(&self, s: ConnSample) {
        if !s.opened {
            self.reused.fetch_add(1, Ordering::Relaxed);
            if s.connect_us.is_none() && s.tls_us.is_none() {
                return;
            }
        }
        let mut i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        i.opened += u64::from(s.opened);
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

    /// The version a connection speaks, as it was negotiated (recorded once per connection).
    pub fn http_version(&self, v: HttpVersion) {
        let mut i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        i.http_version = Some(v);
    }

    /// Streams open on one HTTP/2 connection now; the run keeps the peak.
    pub fn streams_open(&self, n: u64) {
        self.peak_streams.fetch_max(n, Ordering::Relaxed);
    }

    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, as a connection received it.
    pub fn server_max_streams(&self, n: u64) {
        let mut i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        i.server_max_streams = Some(n);
    }

    /// The summary, or `None` when no request was recorded in this process (the tasks ran in
    /// other processes: `fork`, `spawn`).
    pub fn summary(&self) -> Option<Connections> {
        let i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let reused = self.reused.load(Ordering::Relaxed);
        if i.opened + reused == 0 {
            return None;
        }
        let peak = self.peak_streams.load(Ordering::Relaxed);
        Some(Connections {
            connections_opened: Some(i.opened),
            connections_reused: Some(reused),
            connect_us: i.connect.as_ref().and_then(|h| h.summary()),
            tls_us: i.tls.as_ref().and_then(|h| h.summary()),
            http_version: i.http_version,
            peak_streams_per_connection: (peak > 0).then_some(peak),
            server_max_concurrent_streams: i.server_max_streams,
        })
    }
}
