//! The server's counters: requests served, in flight now, peak in flight, connections and
//! TLS handshakes, and since when; and the last request `/echo` saw.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Serialize;

/// Live counters, shared by every connection.
#[derive(Debug)]
pub struct Stats {
    requests: AtomicU64,
    in_flight: AtomicI64,
    peak_in_flight: AtomicI64,
    connections: AtomicU64,
    tls_handshakes: AtomicU64,
    tls_failures: AtomicU64,
    since: Mutex<SystemTime>,
    last_echo: Mutex<Option<serde_json::Value>>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            requests: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            peak_in_flight: AtomicI64::new(0),
            connections: AtomicU64::new(0),
            tls_handshakes: AtomicU64::new(0),
            tls_failures: AtomicU64::new(0),
            since: Mutex::new(SystemTime::now()),
            last_echo: Mutex::new(None),
        }
    }
}

/// A snapshot of the counters, as `GET /stats` returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StatsSnapshot {
    /// Requests answered (or dropped mid-delay) since `since`.
    pub requests: u64,
    /// Requests being handled now.
    pub in_flight: i64,
    /// Most requests handled at once since `since`.
    pub peak_in_flight: i64,
    /// When counting started (epoch seconds): server start or the last reset.
    pub since: u64,
    /// Connections accepted since `since` (TCP; over TLS also those whose handshake failed).
    #[serde(default)]
    pub connections: u64,
    /// TLS handshakes completed since `since`.
    #[serde(default)]
    pub tls_handshakes: u64,
    /// TLS handshakes that failed or timed out since `since`.
    #[serde(default)]
    pub tls_failures: u64,
}

/// Counts one request as in flight until dropped (also when the client goes away mid-delay
/// and the handler is dropped).
pub struct InFlight<'a> {
    stats: &'a Stats,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.stats.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Stats {
    /// Counts a request in; it counts out when the guard drops.
    pub fn enter(&self) -> InFlight<'_> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::AcqRel);
        InFlight { stats: self }
    }

    /// Counts an accepted connection.
    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a completed TLS handshake.
    pub fn tls_handshake(&self) {
        self.tls_handshakes.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failed TLS handshake.
    pub fn tls_failed(&self) {
        self.tls_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Keeps the last request `/echo` saw (`GET /echo/last` shows it).
    pub fn set_last_echo(&self, seen: serde_json::Value) {
        *self.last_echo.lock().unwrap_or_else(|p| p.into_inner()) = Some(seen);
    }

    /// The last request `/echo` saw.
    pub fn last_echo(&self) -> Option<serde_json::Value> {
        self.last_echo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let since = *self.since.lock().unwrap_or_else(|p| p.into_inner());
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Acquire),
            peak_in_flight: self.peak_in_flight.load(Ordering::Acquire),
            connections: self.connections.load(Ordering::Relaxed),
            tls_handshakes: self.tls_handshakes.load(Ordering::Relaxed),
            tls_failures: self.tls_failures.load(Ordering::Relaxed),
            since: since
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }

    /// Starts counting again: requests to 0, the peak to what is in flight now.
    pub fn reset(&self) {
        self.requests.store(0, Ordering::Relaxed);
        self.connections.store(0, Ordering::Relaxed);
        self.tls_handshakes.store(0, Ordering::Relaxed);
        self.tls_failures.store(0, Ordering::Relaxed);
        self.peak_in_flight
            .store(self.in_flight.load(Ordering::Acquire), Ordering::Release);
        *self.since.lock().unwrap_or_else(|p| p.into_inner()) = SystemTime::now();
    }
}
