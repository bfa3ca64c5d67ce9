//! Where the clients connect and what they record about it: the server's address (resolved
//! once, on first use), TLS, the request timeout, keep-alive, HTTP/2 (`--http2`,
//! `--connections`), HTTP/3 (`--http3`), and the account of connections opened and reused (`connect_us`, `tls_us`,
//! the HTTP version and streams).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::pki_types::ServerName;

use super::spec::Target;
use crate::measure::conn::ConnRecorder;
use crate::measure::TaskError;
use crate::os::tls;
use crate::workload::WorkloadOptions;

/// The server of an `http:` workload, as every client connects to it.
pub(super) struct Endpoint {
    /// `HOST:PORT` to resolve.
    pub(super) connect: String,
    /// The name TLS sends and verifies.
    pub(super) server_name: ServerName<'static>,
    /// The rustls config of `https://` targets, made once (the system's roots are read then).
    pub(super) tls: Option<Arc<rustls::ClientConfig>>,
    /// With `--http2`, the same config offering `h2` before `http/1.1` by ALPN, for the client
    /// that speaks HTTP/2 (hyper); the others keep [`Endpoint::tls`], which offers only 1.1.
    pub(super) tls_h2: Option<Arc<rustls::ClientConfig>>,
    /// `--http2`: speak HTTP/2 (h2c by prior knowledge over TCP, `h2` by ALPN over TLS).
    pub(super) http2: bool,
    /// `--http3`: speak HTTP/3 (QUIC over UDP to the URL's host and port, `h3` by ALPN).
    pub(super) http3: bool,
    /// With `--http2` or `--http3`: how many connections carry the streams (`--connections`, 1 by default).
    pub(super) connections: usize,
    /// How long one request may take, connect to last body byte.
    pub(super) timeout: Duration,
    /// Whether connections are kept for the next request.
    pub(super) keepalive: bool,
    /// The connections this process's tasks opened and reused.
    pub(super) conns: ConnRecorder,
    addr: OnceLock<Result<SocketAddr, String>>,
}

impl Endpoint {
    /// The endpoint of `target`, with TLS set up from `opts` (`--cacert`, `-k`) for `https://`.
    pub(super) fn new(target: &Target, opts: &WorkloadOptions) -> Result<Endpoint, String> {
        let tls = if target.tls {
            Some(Arc::new(tls::client_config(
                opts.insecure,
                opts.ca_pem.as_deref(),
            )?))
        } else {
            None
        };
        let tls_h2 = match &tls {
            Some(config) if opts.http2 => Some(Arc::new(tls::offer_http2(config))),
            _ => None,
        };
        Ok(Endpoint {
            connect: target.connect.clone(),
            server_name: target.server_name.clone(),
            tls,
            tls_h2,
            http2: opts.http2,
            http3: opts.http3,
            connections: opts.connections.unwrap_or(1).max(1),
            timeout: Duration::from_millis(opts.request_timeout_ms.max(1)),
            keepalive: opts.keepalive,
            conns: ConnRecorder::default(),
            addr: OnceLock::new(),
        })
    }

    /// The server's address, resolved by the calling thread the first time.
    pub(super) fn addr(&self) -> Result<SocketAddr, TaskError> {
        self.addr
            .get_or_init(|| {
                self.connect
                    .to_socket_addrs()
                    .map_err(|e| format!("cannot resolve '{}': {e}", self.connect))?
                    .next()
                    .ok_or_else(|| format!("'{}' resolves to no address", self.connect))
            })
            .clone()
            .map_err(|e| TaskError::new("connect", e))
    }

    /// [`Endpoint::addr`] without blocking the event loop: a name is resolved by tokio's
    /// resolver (getaddrinfo on the blocking pool) the first time, then cached alike.
    pub(super) async fn addr_async(&self) -> Result<SocketAddr, TaskError> {
        if let Some(cached) = self.addr.get() {
            return cached.clone().map_err(|e| TaskError::new("connect", e));
        }
        let resolved = match tokio::net::lookup_host(self.connect.as_str()).await {
            Ok(mut addrs) => addrs
                .next()
                .ok_or_else(|| format!("'{}' resolves to no address", self.connect)),
            Err(e) => Err(format!("cannot resolve '{}': {e}", self.connect)),
        };
        self.addr
            .get_or_init(|| resolved)
            .clone()
            .map_err(|e| TaskError::new("connect", e))
    }
}

/// `request` within the endpoint's request timeout (connect to last body byte).
pub(super) async fn timed(
    ep: &Endpoint,
    request: impl std::future::Future<Output = Result<u64, TaskError>>,
) -> Result<u64, TaskError> {
    match tokio::time::timeout(ep.timeout, request).await {
        Ok(r) => r,
        Err(_elapsed) => Err(TaskError::new(
            "timeout",
            format!(
                "no full response within {}",
                crate::base::units::fmt_secs(ep.timeout.as_secs_f64())
            ),
        )),
    }
}

/// Microseconds from `from_ns` to `to_ns` (monotonic nanoseconds), for connect and TLS times.
pub(super) fn micros(from_ns: u64, to_ns: u64) -> u64 {
    to_ns.saturating_sub(from_ns) / 1000
}
