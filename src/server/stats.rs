//! The server's counters: requests served, in flight now, peak in flight, requests refused
//! beyond the in-flight cap or the echo budget, connections (open now, speaking HTTP/2 or HTTP/3, refused
//! beyond the cap, closed by each timeout) and TLS handshakes, and since when; and the last
//! request `/echo` saw.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use serde::Serialize;

/// Live counters, shared by every connection.
#[derive(Debug)]
pub struct Stats {
    requests: AtomicU64,
    in_flight: AtomicI64,
    peak_in_flight: AtomicI64,
    connections: AtomicU64,
    h2_connections: AtomicU64,
    h3_connections: AtomicU64,
    tls_handshakes: AtomicU64,
    tls_failures: AtomicU64,
    open_connections: AtomicI64,
    over_capacity: AtomicU64,
    header_timeouts: AtomicU64,
    body_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    write_timeouts: AtomicU64,
    over_in_flight: AtomicU64,
    echo_over_budget: AtomicU64,
    since: Mutex<SystemTime>,
    last_echo: Mutex<Option<Echoed>>,
}

/// A request as `/echo` saw it, for `GET /echo/last`.
#[derive(Debug, Clone)]
pub struct Echoed {
    /// Its method.
    pub method: String,
    /// Its target as received (on HTTP/2, `:scheme://:authority:path`).
    pub target: String,
    /// Its headers, in order, values as sent.
    pub headers: Vec<(String, String)>,
    /// Its body: the same bytes the answer carries, so keeping it copies nothing (and it
    /// counts against the echo budget until the next request replaces it).
    pub body: Bytes,
}

/// What `GET /echo/last` shows in place of a credential's value.
pub const REDACTED: &str = "[redacted]";

/// Whether a header carries a credential that `/echo/last` must not show to whoever asks: the
/// one rule every output uses ([`crate::base::secret::is_credential_name`]).
pub fn is_credential_header(name: &str) -> bool {
    crate::base::secret::is_credential_name(name)
}

impl Echoed {
    /// As JSON: method, target, headers (an object; with `redact`, credentials' values
    /// replaced by [`REDACTED`]) and body (as text, invalid UTF-8 replaced).
    pub fn to_json(&self, redact: bool) -> serde_json::Value {
        let headers: serde_json::Map<String, serde_json::Value> = self
            .headers
            .iter()
            .map(|(n, v)| {
                let v = if redact && is_credential_header(n) {
                    REDACTED
                } else {
                    v.as_str()
                };
                (n.clone(), v.into())
            })
            .collect();
        let body = String::from_utf8_lossy(&self.body);
        // A credential in the query (`?access_token=`) or in a form field (`password=`) is
        // hidden as a header's is (`***`, as everywhere concur shows text).
        let (target, body) = if redact {
            let mask = crate::base::secret::mask_credentials;
            (mask(&self.target), mask(&body))
        } else {
            (self.target.clone(), body.into_owned())
        };
        serde_json::json!({
            "method": self.method,
            "target": target,
            "headers": headers,
            "body": body,
        })
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            requests: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            peak_in_flight: AtomicI64::new(0),
            connections: AtomicU64::new(0),
            h2_connections: AtomicU64::new(0),
            h3_connections: AtomicU64::new(0),
            tls_handshakes: AtomicU64::new(0),
            tls_failures: AtomicU64::new(0),
            open_connections: AtomicI64::new(0),
            over_capacity: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            body_timeouts: AtomicU64::new(0),
            idle_timeouts: AtomicU64::new(0),
            write_timeouts: AtomicU64::new(0),
            over_in_flight: AtomicU64::new(0),
            echo_over_budget: AtomicU64::new(0),
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
    /// Connections accepted since `since` (TCP, over TLS also those whose handshake failed; and
    /// QUIC connections, those whose handshake failed too).
    #[serde(default)]
    pub connections: u64,
    /// Of `connections`, those that spoke HTTP/2 (h2c by prior knowledge, or h2 by ALPN).
    #[serde(default)]
    pub h2_connections: u64,
    /// Of `connections`, those that spoke HTTP/3 (QUIC connections whose handshake completed,
    /// `concur serve --http3`).
    #[serde(default)]
    pub h3_connections: u64,
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
    /// Requests answered 503 because `--max-in-flight` requests were in flight.
    #[serde(default)]
    pub over_in_flight: u64,
    /// `/echo` requests answered 503 because their body would have taken the bodies held
    /// past `--echo-budget`.
    #[serde(default)]
    pub echo_over_budget: u64,
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

    /// Counts a connection that speaks HTTP/3.
    pub fn h3_connection(&self) {
        self.h3_connections.fetch_add(1, Ordering::Relaxed);
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

    /// Counts a request refused because `--max-in-flight` requests were in flight.
    pub fn over_in_flight(&self) {
        self.over_in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an `/echo` request refused because the echo budget was spent.
    pub fn echo_over_budget(&self) {
        self.echo_over_budget.fetch_add(1, Ordering::Relaxed);
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
    pub fn set_last_echo(&self, seen: Echoed) {
        // The one it replaces is dropped outside the lock.
        let _old = self
            .last_echo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(seen);
    }

    /// The last request `/echo` saw, whole (credentials included: for this process's own
    /// tests and studies; `GET /echo/last` shows [`Stats::last_echo_redacted`]).
    pub fn last_echo(&self) -> Option<serde_json::Value> {
        self.last_echo_json(false)
    }

    /// The last request `/echo` saw, credential headers' values replaced by `REDACTED`:
    /// what `GET /echo/last` shows to any client.
    pub fn last_echo_redacted(&self) -> Option<serde_json::Value> {
        self.last_echo_json(true)
    }

    fn last_echo_json(&self, redact: bool) -> Option<serde_json::Value> {
        let seen = self
            .last_echo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        seen.map(|e| e.to_json(redact))
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
            h3_connections: self.h3_connections.load(Ordering::Relaxed),
            tls_handshakes: self.tls_handshakes.load(Ordering::Relaxed),
            tls_failures: self.tls_failures.load(Ordering::Relaxed),
            open_connections: self.open_connections.load(Ordering::Acquire),
            over_capacity: self.over_capacity.load(Ordering::Relaxed),
            header_timeouts: self.header_timeouts.load(Ordering::Relaxed),
            body_timeouts: self.body_timeouts.load(Ordering::Relaxed),
            idle_timeouts: self.idle_timeouts.load(Ordering::Relaxed),
            write_timeouts: self.write_timeouts.load(Ordering::Relaxed),
            over_in_flight: self.over_in_flight.load(Ordering::Relaxed),
            echo_over_budget: self.echo_over_budget.load(Ordering::Relaxed),
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
        self.h3_connections.store(0, Ordering::Relaxed);
        self.tls_handshakes.store(0, Ordering::Relaxed);
        self.tls_failures.store(0, Ordering::Relaxed);
        for c in [
            &self.over_capacity,
            &self.header_timeouts,
            &self.body_timeouts,
            &self.idle_timeouts,
            &self.write_timeouts,
            &self.over_in_flight,
            &self.echo_over_budget,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.peak_in_flight
            .store(self.in_flight.load(Ordering::Acquire), Ordering::Release);
        *self.since.lock().unwrap_or_else(|p| p.into_inner()) = SystemTime::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_headers_are_known_by_name_in_any_case() {
        for name in [
            "authorization",
            "Proxy-Authorization",
            "COOKIE",
            "set-cookie",
            "X-Api-Key",
            "x-auth-token",
            "Client-Secret",
        ] {
            assert!(is_credential_header(name), "{name}");
        }
        for name in ["x-monkey", "author", "keyboard", "accept", "x-secrets"] {
            assert!(!is_credential_header(name), "{name}");
        }
    }

    #[test]
    fn the_last_echo_is_whole_in_process_and_redacted_for_clients() {
        let s = Stats::default();
        s.set_last_echo(Echoed {
            method: "POST".into(),
            target: "/echo".into(),
            headers: vec![
                ("authorization".into(), "Bearer t".into()),
                ("x-other".into(), "two".into()),
            ],
            body: Bytes::from_static(b"hi"),
        });
        let whole = s.last_echo().unwrap();
        assert_eq!(whole["headers"]["authorization"], "Bearer t");
        let shown = s.last_echo_redacted().unwrap();
        assert_eq!(shown["headers"]["authorization"], REDACTED);
        assert_eq!(shown["headers"]["x-other"], "two");
        assert_eq!(shown["body"], "hi");
    }
}
