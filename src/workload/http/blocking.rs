//! The blocking models' client (`seq`, `thread`, `pool`, `fork`, ...): ureq, one agent per
//! workload whose keep-alive connections the worker threads share. ureq tells nothing about
//! the connection a request used, so its resolver and TLS connector leave that in a
//! thread-local for the request's thread to read.
//!
//! A traced task's phases: connect (from the resolver's call to the TLS handshake's start)
//! and TLS over `https`; wait, from the request's start (or the handshake's end) to ureq
//! returning the response's head; read, the body. ureq writes the request inside the same
//! call, so there is no send phase; over plain HTTP it shows no end of the TCP connect, so a
//! new connection's connect lies in the wait.

use std::cell::Cell;
use std::error::Error as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::ServerName;

use super::endpoint::{micros, Endpoint};
use super::request::HttpRequest;
use super::status_error;
use crate::measure::conn::ConnSample;
use crate::measure::phases::{PhaseKind, TaskPhases};
use crate::measure::{mono_ns, TaskError};
use crate::os::tls;

/// The ureq agent of one workload, made on first use.
#[derive(Default)]
pub(super) struct Client {
    agent: OnceLock<ureq::Agent>,
}

impl Client {
    fn agent(&self, ep: &Endpoint) -> &ureq::Agent {
        self.agent.get_or_init(|| {
            let idle = if ep.keepalive { 100_000 } else { 0 };
            let mut b = ureq::AgentBuilder::new()
                .timeout(ep.timeout)
                .redirects(0)
                .max_idle_connections(idle)
                .max_idle_connections_per_host(idle)
                .resolver(CountingResolver);
            if let Some(config) = &ep.tls {
                b = b.tls_connector(Arc::new(TimedTls {
                    config: config.clone(),
                }));
            }
            b.build()
        })
    }

    /// Makes `req` on the calling thread: the body bytes read; its phases into `task` when
    /// the run traces it.
    pub(super) fn fetch(
        &self,
        ep: &Endpoint,
        req: &HttpRequest,
        task: Option<&TaskPhases>,
    ) -> Result<u64, TaskError> {
        let mut r = self.agent(ep).request(&req.method, &req.url);
        // Every header the builder decided, `Host`, `User-Agent`, `Accept` and
        // `Content-Length` included: ureq adds its own only where a request has none.
        for (name, value) in &req.headers {
            r = r.set(name, value);
        }
        UREQ_CONN.with(|c| c.set(NewConn::default()));
        let asked = task.map(|_| mono_ns());
        let sent = match &req.body {
            Some(b) => r.send_bytes(b),
            None => r.call(),
        };
        let head = task.map(|_| mono_ns());
        let conn = UREQ_CONN.with(|c| c.take());
        ep.conns.record(conn.sample());
        if let (Some(t), Some(a), Some(h)) = (task, asked, head) {
            conn.record(t);
            if !matches!(sent, Err(ureq::Error::Transport(_))) {
                t.record(PhaseKind::Wait, conn.tls_end_ns.unwrap_or(a).max(a), h);
            }
        }
        let resp = match sent {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                // Drain so the connection can be reused.
                let _ = std::io::copy(&mut r.into_reader(), &mut std::io::sink());
                if let (Some(t), Some(h)) = (task, head) {
                    t.record(PhaseKind::Read, h, mono_ns());
                }
                return Err(status_error(code));
            }
            Err(ureq::Error::Transport(t)) => {
                return Err(TaskError::new(transport_kind(&t), t.to_string()))
            }
        };
        let read = std::io::copy(&mut resp.into_reader(), &mut std::io::sink()).map_err(|e| {
            let kind = if e.kind() == std::io::ErrorKind::TimedOut {
                "timeout"
            } else {
                "read"
            };
            TaskError::new(kind, e.to_string())
        });
        if let (Some(t), Some(h)) = (task, head) {
            t.record(PhaseKind::Read, h, mono_ns());
        }
        read
    }
}

/// The kind of a failed request from ureq's error: the TLS handshake's failure (which
/// [`TimedTls`] marks), a timeout (ureq turns its deadline and a socket's timeouts into
/// `TimedOut`), a connect that failed, or else a failure while reading.
fn transport_kind(t: &ureq::Transport) -> &'static str {
    let io = t.source().and_then(|s| s.downcast_ref::<std::io::Error>());
    if io
        .and_then(|e| e.get_ref())
        .is_some_and(|inner| inner.is::<TlsFailed>())
    {
        tls::KIND
    } else if io.is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut) {
        "timeout"
    } else if t.kind() == ureq::ErrorKind::ConnectionFailed {
        "connect"
    } else {
        "read"
    }
}

/// The new connection a request opened, if it opened one: when ureq's resolver was asked for
/// it, and the TLS handshake's start and end (ns).
#[derive(Debug, Clone, Copy, Default)]
struct NewConn {
    resolved_ns: Option<u64>,
    tls_start_ns: Option<u64>,
    tls_end_ns: Option<u64>,
}

impl NewConn {
    /// What opening it cost: the TCP connect is what lies between the resolver's call and the
    /// handshake's start, so it is known over TLS only.
    fn sample(&self) -> ConnSample {
        let tls_start = self.tls_start_ns;
        ConnSample {
            opened: self.resolved_ns.is_some(),
            connect_us: self.resolved_ns.zip(tls_start).map(|(a, z)| micros(a, z)),
            tls_us: tls_start.zip(self.tls_end_ns).map(|(a, z)| micros(a, z)),
        }
    }

    /// Its connect and TLS phases, where it has them.
    fn record(&self, task: &TaskPhases) {
        if let (Some(a), Some(t)) = (self.resolved_ns, self.tls_start_ns) {
            task.record(PhaseKind::Connect, a, t);
            if let Some(z) = self.tls_end_ns {
                task.record(PhaseKind::Tls, t, z);
            }
        }
    }
}

thread_local! {
    /// The connection of the request this thread is making. Blocking threads only: never
    /// read inside a coroutine.
    static UREQ_CONN: Cell<NewConn> = const { Cell::new(NewConn { resolved_ns: None, tls_start_ns: None, tls_end_ns: None }) };
}

/// ureq's resolver, counting new connections (ureq resolves once per connection it opens).
struct CountingResolver;

impl ureq::Resolver for CountingResolver {
    fn resolve(&self, netloc: &str) -> std::io::Result<Vec<SocketAddr>> {
        UREQ_CONN.with(|c| {
            c.set(NewConn {
                resolved_ns: Some(mono_ns()),
                ..NewConn::default()
            })
        });
        netloc.to_socket_addrs().map(|a| a.collect())
    }
}

/// One request of concur's own, not a task's (reading a server's `/stats`): `METHOD` of
/// `path` on `base_url`, TLS set up from `opts` (`--cacert`, `-k`) as the tasks' is, no
/// redirect, no proxy, within `timeout`; its status and body, or why there was none. The body
/// is read to at most `limit` bytes: a longer one is an error, never a larger buffer.
pub(crate) fn small_request(
    method: &str,
    base_url: &str,
    path: &str,
    opts: &crate::workload::WorkloadOptions,
    timeout: std::time::Duration,
    limit: u64,
) -> Result<(u16, Vec<u8>), String> {
    let target = super::spec::read_url(path, Some(base_url))?;
    let ep = Endpoint::new(&target, opts)?;
    let mut b = ureq::AgentBuilder::new()
        .timeout(timeout)
        .redirects(0)
        .max_idle_connections(0);
    if let Some(config) = &ep.tls {
        b = b.tls_connector(Arc::new(TimedTls {
            config: config.clone(),
        }));
    }
    let scheme = if target.tls { "https" } else { "http" };
    let url = format!("{scheme}://{}{}", target.host, target.path);
    let answer = match b.build().request(method, &url).call() {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(ureq::Error::Transport(t)) => return Err(t.to_string()),
    };
    let status = answer.status();
    let mut body = Vec::new();
    answer
        .into_reader()
        .take(limit.saturating_add(1))
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    if body.len() as u64 > limit {
        return Err(format!("its answer is over {limit} bytes"));
    }
    Ok((status, body))
}

/// ureq's TLS: rustls with our config, the handshake done at once (ureq's own does it on the
/// first write) so that its time and its failure are the handshake's.
struct TimedTls {
    config: Arc<rustls::ClientConfig>,
}

/// A TLS handshake that failed, as the error ureq carries back: its type, not its text, tells
/// [`transport_kind`] that the failure was TLS's.
#[derive(Debug)]
struct TlsFailed(String);

impl std::fmt::Display for TlsFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TLS handshake failed: {}", self.0)
    }
}

impl std::error::Error for TlsFailed {}

/// A TLS stream for ureq.
#[derive(Debug)]
struct UreqTls(rustls::StreamOwned<rustls::ClientConnection, Box<dyn ureq::ReadWrite>>);

impl Read for UreqTls {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for UreqTls {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl ureq::ReadWrite for UreqTls {
    fn socket(&self) -> Option<&std::net::TcpStream> {
        self.0.sock.socket()
    }
}

impl ureq::TlsConnector for TimedTls {
    fn connect(
        &self,
        dns_name: &str,
        mut io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let t0 = mono_ns();
        let fail = |e: String| ureq::Error::from(std::io::Error::other(TlsFailed(e)));
        let name = ServerName::try_from(dns_name.trim_matches(['[', ']']).to_string())
            .map_err(|e| fail(e.to_string()))?;
        let mut conn = rustls::ClientConnection::new(self.config.clone(), name)
            .map_err(|e| fail(e.to_string()))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut io)
                .map_err(|e| fail(tls::handshake_failure(&e)))?;
        }
        let now = mono_ns();
        UREQ_CONN.with(|c| {
            c.set(NewConn {
                tls_start_ns: Some(t0),
                tls_end_ns: Some(now),
                ..c.get()
            })
        });
        Ok(Box::new(UreqTls(rustls::StreamOwned::new(conn, io))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport(e: std::io::Error) -> ureq::Transport {
        match ureq::Error::from(e) {
            ureq::Error::Transport(t) => t,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn kinds_come_from_the_error_types() {
        let tls_failed = std::io::Error::other(TlsFailed("UnknownIssuer".into()));
        assert_eq!(transport_kind(&transport(tls_failed)), tls::KIND);
        let slow = std::io::Error::new(std::io::ErrorKind::TimedOut, "too slow");
        assert_eq!(transport_kind(&transport(slow)), "timeout");
        // A text that merely says so is not a timeout.
        let said = std::io::Error::other("the handshake timed out, it says");
        assert_eq!(transport_kind(&transport(said)), "read");
    }

    #[test]
    fn a_closed_port_is_a_connect_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = ureq::get(&format!("http://127.0.0.1:{port}/"))
            .call()
            .unwrap_err();
        let ureq::Error::Transport(t) = e else {
            panic!("{e}")
        };
        assert_eq!(transport_kind(&t), "connect");
    }
}
