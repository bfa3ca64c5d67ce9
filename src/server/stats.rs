//! The server's counters: requests served, in flight now, peak in flight, connections (open
//! now, speaking HTTP/2, refused beyond the cap, closed by each timeout) and TLS handshakes, and since when;
//! and the last request `/echo` saw.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;

/// Live counters, shared by every connection.
#[derive(Debug)]
pub struct Stats {
    requests: AtomicU64,
    in_flight: AtomicI64,
    peak_in_flight: AtomicI64,
    connections: AtomicU64,
    h2_connections: AtomicU64,
    tls_handshakes: AtomicU64,
    tls_failures: AtomicU64,
    open_connections: AtomicI64,
    over_capacity: AtomicU64,
    header_timeouts: AtomicU64,
    body_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    write_timeouts: AtomicU64,
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
            h2_connections: AtomicU64::new(0),
            tls_handshakes: AtomicU64::new(0),
            tls_failures: AtomicU64::new(0),
            open_connections: AtomicI64::new(0),
            over_capacity: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            body_timeouts: AtomicU64::new(0),
            idle_timeouts: AtomicU64::new(0),
            write_timeouts: AtomicU64::new(0),
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
    /// Of `connections`, those that spoke HTTP/2 (h2c by prior knowledge, or h2 by ALPN).
    #[serde(default)]
    pub h2_connections: u64,
    /// TLS handshakes completed since `since`.
    #[serde(default)]
    pub tls_handshakes: u64,
    /// TLS handshakes that failed or timed out since `since`.
    #[serde(default)]
    pub tls_failures: u64,
    /// Connections open now (a gauge: not reset).
    #[serde(default)]
    pub open_connections: i64,
    /// Connections answered 503 (or closed at once) because `--max-connections` were open.
    #[serde(default)]
    pub over_capacity: u64,
    /// Connections closed because a request's headers took longer than `--header-timeout`.
    #[serde(default)]
    pub header_timeouts: u64,
    /// Requests answered 408 because their body took longer than `--body-timeout`.
    #[serde(default)]
    pub body_timeouts: u64,
    /// Connections closed after `--idle-timeout` without a request.
    #[serde(default)]
    pub idle_timeouts: u64,
    /// Connections closed because the client took no bytes for `--write-timeout`.
    #[serde(default)]
    pub write_timeouts: u64,
}

/// Which timeout closed a connection (or cut a request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// `--header-timeout`.
    Header,
    /// `--body-timeout`.
    Body,
    /// `--idle-timeout`.
    Idle,
    /// `--write-timeout`.
    Write,
}

/// Counts one connection as open until dropped.
#[must_use]
pub struct OpenConnection {
    stats: Arc<Stats>,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.stats.open_connections.fetch_sub(1, Ordering::AcqRel);
    }
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

    /// Counts an accepted connection; it counts as open until the guard drops.
    pub fn connection_opened(self: &Arc<Self>) -> OpenConnection {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.open_connections.fetch_add(1, Ordering::AcqRel);
        OpenConnection {
            stats: self.clone(),
        }
    }

    /// Counts a connection that speaks HTTP/2.
    pub fn h2_connection(&self) {
        self.h2_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections open now.
    pub fn open_connections(&self) -> i64 {
        self.open_connections.load(Ordering::Acquire)
    }

    /// Counts a connection refused because the cap was reached.
    pub fn over_capacity(&self) {
        self.over_capacity.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection or request cut by `which` timeout.
    pub fn timed_out(&self, which: Timeout) {
        let counter = match which {
            Timeout::Header => &self.header_timeouts,
            Timeout::Body => &self.body_timeouts,
            Timeout::Idle => &self.idle_timeouts,
            Timeout::Write => &self.write_timeouts,
        };
        counter.fetch_add(1, Ordering::Relaxed);
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
            h2_connections: self.h2_connections.load(Ordering::Relaxed),
            tls_handshakes: self.tls_handshakes.load(Ordering::Relaxed),
            tls_failures: self.tls_failures.load(Ordering::Relaxed),
            open_connections: self.open_connections.load(Ordering::Acquire),
            over_capacity: self.over_capacity.load(Ordering::Relaxed),
            header_timeouts: self.header_timeouts.load(Ordering::Relaxed),
            body_timeouts: self.body_timeouts.load(Ordering::Relaxed),
            idle_timeouts: self.idle_timeouts.load(Ordering::Relaxed),
            write_timeouts: self.write_timeouts.load(Ordering::Relaxed),
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
        self.h2_connections.store(0, Ordering::Relaxed);
        self.tls_handshakes.store(0, Ordering::Relaxed);
        self.tls_failures.store(0, Ordering::Relaxed);
        for c in [
            &self.over_capacity,
            &self.header_timeouts,
            &self.body_timeouts,
            &self.idle_timeouts,
            &self.write_timeouts,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.peak_in_flight
            .store(self.in_flight.load(Ordering::Acquire), Ordering::Release);
        *self.since.lock().unwrap_or_else(|p| p.into_inner()) = SystemTime::now();
    }
}
