//! HTTP/3 for the tokio clients (`async`, `async-local`, `--http3`): QUIC by quinn over UDP to
//! the URL's host and port, HTTP/3 framing and QPACK by h3 (h3-quinn between them), TLS 1.3 by
//! the same rustls config and verifier as every other client (`os/tls.rs`), offering `h3` by
//! ALPN.
//!
//! As with `--http2`, the requests in flight are streams over `--connections` connections (1
//! unless given), each connection a slot that is opened on first use and again when its
//! connection died or the server began to go away; with `--no-keepalive` every request opens a
//! connection of its own. Each connection has a UDP socket of its own (a quinn endpoint), as
//! each HTTP/2 connection has a TCP socket: one endpoint for every connection would put all
//! their packets through one socket and one driver task.
//!
//! QUIC has no handshake apart from TLS's: a new connection records its handshake as its TLS
//! time (`tls_us`, the `tls` phase) and no connect time. A request the server did not process
//! (a GOAWAY came first, or the stream was refused with H3_REQUEST_REJECTED) goes again on a
//! live or new connection, up to [`ATTEMPTS`] times, as RFC 9114 §4.1.1 allows; one it may
//! have processed fails with the reason.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use h3::error::{Code, StreamError};

use super::endpoint::{micros, Endpoint};
use super::request::{HttpRequest, RequestBuilder};
use super::slots::{Shared, Slot, Slots};
use crate::measure::conn::{ConnSample, HttpVersion};
use crate::measure::phases::{PhaseKind, TaskPhases};
use crate::measure::{mono_ns, TaskError};
use crate::os::tls;
use crate::workload::task_group;

/// How many times a request the server did not process is sent in all.
const ATTEMPTS: usize = 3;

/// The request sender of one connection.
type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// The HTTP/3 connections of one workload.
pub(super) struct Client {
    /// QUIC's client config: the endpoint's rustls config offering `h3`.
    quic: quinn::ClientConfig,
    /// One per connection that carries streams (`--connections`).
    slots: Slots<H3Conn>,
}

/// One HTTP/3 connection, shared by the requests that go out on it.
#[derive(Clone)]
struct H3Conn(Arc<Inner>);

struct Inner {
    quic: quinn::Connection,
    send: Sender,
    /// Streams open on it now.
    open: AtomicUsize,
    /// Set once the connection's driver ended (the server sent GOAWAY or closed it).
    ended: Arc<AtomicBool>,
    /// The UDP socket; the connection keeps it open, held here to say so.
    _endpoint: quinn::Endpoint,
}

impl Shared for H3Conn {
    fn accepts_streams(&self) -> bool {
        !self.0.ended.load(Ordering::Acquire) && self.0.quic.close_reason().is_none()
    }
}

/// Why a request has no answer: a task error, or the server did not process it.
enum Error {
    Task(TaskError),
    Unprocessed(String),
}

impl From<TaskError> for Error {
    fn from(e: TaskError) -> Error {
        Error::Task(e)
    }
}

/// Counts a stream open on its connection while it lives.
struct OpenStream<'a>(&'a AtomicUsize);

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Client {
    /// The client of `ep` (made with `--http3`, so over TLS): its QUIC config and slots.
    pub(super) fn new(ep: &Endpoint) -> Result<Client, String> {
        let rustls = ep
            .tls
            .as_ref()
            .ok_or("--http3 needs an https:// URL: QUIC is always TLS")?;
        let crypto =
            quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls::offer_http3(rustls)))
                .map_err(|e| format!("QUIC's TLS setup: {e}"))?;
        let mut quic = quinn::ClientConfig::new(Arc::new(crypto));
        // A server that stops answering is given up after the request timeout (quinn's own
        // default is 30 s, whatever the run asked); a kept connection that waits between
        // requests (an open run's slow arrivals) stays open by PINGs at half that, which do
        // not keep a silent server's connection alive (the idle timer restarts on what
        // arrives).
        let mut transport = quinn::TransportConfig::default();
        if let Ok(idle) = quinn::IdleTimeout::try_from(ep.timeout) {
            transport.max_idle_timeout(Some(idle));
            transport.keep_alive_interval(Some(ep.timeout / 2));
        }
        quic.transport_config(Arc::new(transport));
        Ok(Client {
            quic,
            slots: Slots::new(ep.connections.max(1)),
        })
    }

    /// Task `index`'s request over HTTP/3: the body bytes read (the caller bounds it by the
    /// request timeout).
    pub(super) async fn fetch(
        &self,
        ep: &Endpoint,
        requests: &RequestBuilder,
        index: usize,
        task: Option<&TaskPhases>,
    ) -> Result<u64, TaskError> {
        let req = requests.build(index).into_http2();
        let mut why = String::new();
        for _ in 0..ATTEMPTS {
            let outcome = if ep.keepalive {
                let slot = self.slots.turn();
                let conn = self.slot_conn(ep, slot, task).await?;
                let got = send(ep, &conn, &req, task).await;
                if matches!(got, Err(Error::Unprocessed(_))) {
                    // Going away: the next request opens another.
                    slot.forget(|c| Arc::ptr_eq(&c.0, &conn.0));
                }
                got
            } else {
                // One stream on a connection of its own, closed after.
                let conn = Box::pin(connect(ep, &self.quic, task)).await?;
                let got = send(ep, &conn, &req, task).await;
                if let Ok(done) = quinn::VarInt::from_u64(Code::H3_NO_ERROR.value()) {
                    conn.0.quic.close(done, b"");
                }
                got
            };
            why = match outcome {
                Ok(n) => return Ok(n),
                Err(Error::Task(e)) => return Err(e),
                Err(Error::Unprocessed(why)) => why,
            };
        }
        Err(TaskError::new(
            "read",
            format!("{why}; sent {ATTEMPTS} times, the server processed it none of them"),
        ))
    }

    /// The live connection of `slot`, or a new one made while its other requests wait.
    async fn slot_conn(
        &self,
        ep: &Endpoint,
        slot: &Slot<H3Conn>,
        task: Option<&TaskPhases>,
    ) -> Result<H3Conn, TaskError> {
        let _connecting = match slot.live_or_connect(&ep.conns).await {
            Ok(c) => return Ok(c),
            Err(connecting) => connecting,
        };
        let conn = Box::pin(connect(ep, &self.quic, task)).await?;
        slot.put(conn.clone());
        Ok(conn)
    }
}

/// Opens a QUIC connection to the endpoint's server from a UDP socket of its own and starts
/// HTTP/3 on it (its control streams and SETTINGS; the driver runs beside the request, in its
/// task group when it has one). Records the connection, its handshake and its version.
async fn connect(
    ep: &Endpoint,
    config: &quinn::ClientConfig,
    task: Option<&TaskPhases>,
) -> Result<H3Conn, TaskError> {
    let addr = ep.addr_async().await?;
    let local: SocketAddr = if addr.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let endpoint = quinn::Endpoint::client(local)
        .map_err(|e| TaskError::new("connect", format!("a UDP socket for QUIC: {e}")))?;
    let name = ep.server_name.to_str();
    let t0 = mono_ns();
    let quic = endpoint
        .connect_with(config.clone(), addr, &name)
        .map_err(|e| TaskError::new("connect", format!("{}: {e}", ep.connect)))?
        .await
        .map_err(|e| handshake_error(ep, &e))?;
    let t1 = mono_ns();
    if let Some(t) = task {
        t.record(PhaseKind::Tls, t0, t1);
    }
    ep.conns.record(ConnSample {
        opened: true,
        connect_us: None,
        tls_us: Some(micros(t0, t1)),
    });
    ep.conns.http_version(HttpVersion::Http3);
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
        .await
        .map_err(|e| TaskError::new("connect", format!("{}: HTTP/3: {e}", ep.connect)))?;
    let ended = Arc::new(AtomicBool::new(false));
    let flag = ended.clone();
    task_group::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        flag.store(true, Ordering::Release);
    });
    Ok(H3Conn(Arc::new(Inner {
        quic,
        send,
        open: AtomicUsize::new(0),
        ended,
        _endpoint: endpoint,
    })))
}

/// A handshake that failed: refused by TLS (the verifier's words), or no server answered.
fn handshake_error(ep: &Endpoint, e: &quinn::ConnectionError) -> TaskError {
    match e {
        // QUIC's codes 0x100 to 0x1ff carry a TLS alert (RFC 9001 §4.8): TLS refused it.
        quinn::ConnectionError::TransportError(t)
            if (0x100..0x200).contains(&u64::from(t.code)) =>
        {
            TaskError::new(
                tls::KIND,
                format!("{}: {}", ep.connect, tls::quic_handshake_failure(&t.reason)),
            )
        }
        quinn::ConnectionError::TimedOut => TaskError::new(
            "connect",
            format!(
                "{}: no QUIC answer (is an HTTP/3 server listening on its UDP port?)",
                ep.connect
            ),
        ),
        other => TaskError::new("connect", format!("{}: {other}", ep.connect)),
    }
}

/// `req` (made by [`HttpRequest::into_http2`]: the same fields HTTP/3 sends) as a stream on
/// `conn`: the body bytes of its response.
async fn send(
    ep: &Endpoint,
    conn: &H3Conn,
    req: &HttpRequest,
    task: Option<&TaskPhases>,
) -> Result<u64, Error> {
    let head = head_of(req)?;
    let asked = task.map(|_| mono_ns());
    let mut sender = conn.0.send.clone();
    // Waits while as many streams are open as the server allows (QUIC's stream credit).
    let mut stream = sender.send_request(head).await.map_err(unprocessed)?;
    let open = conn.0.open.fetch_add(1, Ordering::Relaxed) + 1;
    let _open = OpenStream(&conn.0.open);
    ep.conns.streams_open(open as u64);
    if let Some(body) = &req.body {
        stream.send_data(body.clone()).await.map_err(failed)?;
    }
    stream.finish().await.map_err(failed)?;
    let sent = task.map(|_| mono_ns());
    if let (Some(t), Some(a), Some(s)) = (task, asked, sent) {
        t.record(PhaseKind::Send, a, s);
    }
    let resp = stream.recv_response().await.map_err(failed)?;
    let head_at = task.map(|_| mono_ns());
    if let (Some(t), Some(s), Some(h)) = (task, sent, head_at) {
        t.record(PhaseKind::Wait, s, h);
    }
    let mut n = 0u64;
    while let Some(chunk) = stream.recv_data().await.map_err(failed)? {
        n += chunk.remaining() as u64;
    }
    if let (Some(t), Some(h)) = (task, head_at) {
        t.record(PhaseKind::Read, h, mono_ns());
    }
    Ok(super::checked(resp.status().as_u16(), n)?)
}

/// The request's head as h3 takes it: method, URL (its authority is `:authority`), headers.
fn head_of(req: &HttpRequest) -> Result<hyper::Request<()>, TaskError> {
    let mut b = hyper::Request::builder()
        .method(req.method.as_str())
        .uri(req.url.as_str());
    for (n, v) in &req.headers {
        b = b.header(n.as_str(), v.as_str());
    }
    b.body(())
        .map_err(|e| TaskError::new("request", format!("{}: {e}", req.url)))
}

/// Whether `e` says the server did not process the request (RFC 9114 §4.1.1: GOAWAY above
/// its stream, or H3_REQUEST_REJECTED).
fn not_processed(e: &StreamError) -> bool {
    match e {
        StreamError::RemoteClosing { .. } => true,
        StreamError::RemoteTerminate { code, .. } | StreamError::StreamError { code, .. } => {
            *code == Code::H3_REQUEST_REJECTED
        }
        _ => false,
    }
}

/// An error opening the stream: nothing of the request reached the server.
fn unprocessed(e: StreamError) -> Error {
    Error::Unprocessed(format!("HTTP/3: {e}"))
}

/// An error after the request went out: unprocessed if the server says so, else the request's.
fn failed(e: StreamError) -> Error {
    if not_processed(&e) {
        Error::Unprocessed(format!("HTTP/3: {e}"))
    } else {
        Error::Task(TaskError::new("read", format!("HTTP/3: {e}")))
    }
}
