//! HTTP/3 on the delay server (`concur serve --http3`): QUIC (quinn) on a UDP socket bound to
//! the TCP listener's port number, HTTP/3 framing and QPACK by h3 over quinn (h3-quinn), and
//! every request answered by the service the TCP side answers with ([`conn::service`]: the
//! router, the in-flight cap with its share per client, the body timeout), so that a route,
//! a refusal or a count is the same whatever the protocol.
//!
//! The limits, as on TCP:
//! - connections: QUIC connections count against `--max-connections` beside TCP's (one gauge,
//!   `/stats`' `open_connections`); beyond it a new one is refused before its handshake with
//!   QUIC's `CONNECTION_REFUSED` (RFC 9000 §5.2.2: no 503 can be sent without the handshake
//!   it would cost) and counted in `over_capacity`;
//! - streams: `--max-streams` is QUIC's own limit on a connection's request streams
//!   (`initial_max_streams_bidi`, RFC 9000 §4.6), so a client cannot open more at once: it
//!   waits for the server to raise it as streams end, as an HTTP/2 client waits under
//!   SETTINGS_MAX_CONCURRENT_STREAMS;
//! - requests in flight and `/echo`'s budget: the shared service and routes, a 503 beyond;
//! - time: the QUIC handshake and each request's head within `--header-timeout`, its body
//!   within `--body-timeout`, no request for `--idle-timeout` closes the connection, and an
//!   answer the client takes no bytes of for `--write-timeout` is cut (its stream reset: on
//!   QUIC a stalled answer holds only its own stream's window, not the connection);
//! - memory: flow-control windows as hyper's HTTP/2 server keeps them (1 MiB a stream and a
//!   connection, 1 MiB unacknowledged sent), and a request head of at most [`super::HEAD_BUF`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{header, HeaderValue, Request, Response};
use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use hyper::body::Frame;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::conn::{self, ConnState, Tracked};
use super::stats::{OpenConnection, Timeout};
use super::{ServerOptions, Shared, HEAD_BUF};
use crate::base::error::{Error, Result};

/// The ALPN protocol of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";

/// The flow-control windows: 1 MiB a stream and a connection, hyper's HTTP/2 server's
/// defaults, where quinn's would let one connection make the server buffer an unbounded
/// amount (its connection window is unlimited by default) of bodies no route reads.
const WINDOW: u32 = 1 << 20;

/// The client-opened unidirectional streams a connection may have: HTTP/3 needs three (its
/// control stream and QPACK's encoder and decoder streams, RFC 9114 §6.2), a few more for the
/// reserved types a client may send to exercise the rule that they are ignored (§6.2.3).
const UNI_STREAMS: u32 = 8;

/// How long a connection stays open on graceful shutdown after its last answer, for the
/// client to acknowledge it: many round trips on any path a delay server is measured over,
/// and retransmissions after a loss.
const DRAIN: Duration = Duration::from_secs(1);

/// `H3_NO_ERROR` (RFC 9114 §8.1): how a connection is closed when nothing went wrong.
const H3_NO_ERROR: u32 = 0x100;

/// The UDP socket, bound before the server says it listens, and QUIC's configuration.
pub struct Quic {
    socket: std::net::UdpSocket,
    config: quinn::ServerConfig,
}

impl Quic {
    /// Binds UDP at `addr` (the TCP listener's own address, port included) with the server's
    /// certificate, for `opts`' limits.
    pub fn bind(
        addr: SocketAddr,
        cert: &crate::os::tls::ServerCert,
        opts: &ServerOptions,
    ) -> Result<Quic> {
        let socket = std::net::UdpSocket::bind(addr).map_err(|e| {
            Error::usage(format!(
                "cannot listen for HTTP/3 on UDP '{addr}' (--http3 uses the TCP port's number): {e}"
            ))
        })?;
        let tls = cert.server_config(&[ALPN]).map_err(Error::usage)?;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(|e| {
            Error::usage(format!("the certificate does not make a QUIC server: {e}"))
        })?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(Arc::new(transport(opts)));
        Ok(Quic { socket, config })
    }

    /// The UDP port.
    pub fn port(&self) -> Option<u16> {
        self.socket.local_addr().ok().map(|a| a.port())
    }
}

/// QUIC's limits for `opts` (see the module's documentation).
fn transport(opts: &ServerOptions) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(opts.max_streams.into())
        .max_concurrent_uni_streams(UNI_STREAMS.into())
        .stream_receive_window(WINDOW.into())
        .receive_window(WINDOW.into())
        .send_window(u64::from(WINDOW));
    // QUIC's own idle timeout (no packet at all) is only the net under a client that vanished:
    // the idle deadline without requests is ours (`connection`), and a request may wait up to
    // `--max-delay` with no packet sent, so this one is longer than both.
    let quiet = opts
        .idle_timeout
        .max(opts.write_timeout)
        .max(opts.body_timeout)
        + opts.max_delay;
    t.max_idle_timeout(quinn::IdleTimeout::try_from(quiet).ok());
    t
}

/// The `Alt-Svc` value the TCP answers carry when the server speaks HTTP/3 on `port`.
pub fn alt_svc(port: u16) -> HeaderValue {
    HeaderValue::from_str(&format!("h3=\":{port}\"")).unwrap_or(HeaderValue::from_static("clear"))
}

/// Serves HTTP/3 on `quic` until `stop` turns true; then sends every connection a GOAWAY,
/// lets their requests finish and closes them (the caller bounds that with its grace).
pub(super) async fn serve(
    quic: Quic,
    shared: Arc<Shared>,
    cap: i64,
    mut stop: watch::Receiver<bool>,
) {
    let endpoint = match quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(quic.config),
        quic.socket,
        Arc::new(quinn::TokioRuntime),
    ) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("concur serve: HTTP/3 stopped: {e}");
            return;
        }
    };
    let mut connections = JoinSet::new();
    let told = stop.clone();
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                if shared.stats.open_connections() >= cap {
                    shared.stats.over_capacity();
                    incoming.refuse();
                    continue;
                }
                let open = shared.stats.connection_opened();
                connections.spawn(connection(incoming, shared.clone(), open, told.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stopped(&mut stop) => break,
        }
    }
    while connections.join_next().await.is_some() {}
    endpoint.close(H3_NO_ERROR.into(), b"the server stopped");
    endpoint.wait_idle().await;
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// One QUIC connection: its handshake, then its requests until it ends, idles out, or the
/// server stops.
async fn connection(
    incoming: quinn::Incoming,
    shared: Arc<Shared>,
    open: OpenConnection,
    mut stop: watch::Receiver<bool>,
) {
    let stats = &shared.stats;
    let peer = incoming.remote_address();
    let shaken = match incoming.accept() {
        Ok(connecting) => tokio::time::timeout(shared.header_timeout, connecting).await,
        Err(_) => Ok(Err(quinn::ConnectionError::LocallyClosed)),
    };
    let quic = match shaken {
        Ok(Ok(c)) => c,
        Ok(Err(_)) => {
            stats.tls_failed();
            return;
        }
        Err(_) => {
            stats.tls_failed();
            stats.timed_out(Timeout::Header);
            return;
        }
    };
    stats.tls_handshake();
    let state = ConnState::new(stats.clone(), peer, shared.in_flight.join(peer));
    state.speaks_h3();
    let built = h3::server::builder()
        .max_field_section_size(HEAD_BUF as u64)
        .build::<_, Bytes>(h3_quinn::Connection::new(quic.clone()))
        .await;
    let Ok(mut h3) = built else {
        return;
    };
    let svc = conn::service::<RecvBody>(
        shared.app.clone(),
        state.clone(),
        shared.timeouts,
        shared.in_flight.clone(),
        None,
    );
    let idle = shared.timeouts.idle;
    let mut requests = JoinSet::new();
    let mut stopping = false;
    loop {
        // While requests are in progress there is no idle deadline: look again in `idle`.
        let deadline = state
            .idle_deadline(idle)
            .unwrap_or_else(|| Instant::now() + idle);
        tokio::select! {
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => {
                    requests.spawn(request(resolver, svc.clone(), shared.clone()));
                }
                Ok(None) | Err(_) => break,
            },
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            _ = tokio::time::sleep_until(deadline) => {
                if state.idle_deadline(idle).is_some_and(|d| d <= Instant::now()) {
                    stats.timed_out(Timeout::Idle);
                    quic.close(H3_NO_ERROR.into(), b"no request for --idle-timeout");
                    break;
                }
            }
            _ = stopped(&mut stop) => {
                // GOAWAY: the requests already accepted finish, no new one starts.
                let _ = h3.shutdown(0).await;
                stopping = true;
                break;
            }
        }
    }
    while requests.join_next().await.is_some() {}
    if stopping {
        // QUIC's close discards what the client has not acknowledged yet (the last answers'
        // ends): a client that has them all and its GOAWAY closes the connection itself; one
        // that keeps it open is closed once its last answer is the drain old.
        let last = state
            .idle_deadline(Duration::ZERO)
            .unwrap_or_else(Instant::now);
        let _ = tokio::time::timeout_at(last + DRAIN, quic.closed()).await;
    }
    quic.close(H3_NO_ERROR.into(), b"");
    drop(open);
}

/// Why an answer was not sent whole.
enum Cut {
    /// The client took none of it for `--write-timeout`.
    Stalled,
    /// The stream or the connection failed (the client reset it, or went away).
    Failed,
}

/// `f` within `limit`.
async fn within<T>(
    limit: Duration,
    f: impl std::future::Future<Output = std::result::Result<T, h3::error::StreamError>>,
) -> std::result::Result<T, Cut> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(Cut::Failed),
        Err(_) => Err(Cut::Stalled),
    }
}

type Resolver = h3::server::RequestResolver<h3_quinn::Connection, Bytes>;

/// One request stream: its head within the header timeout, the shared service's answer, and
/// the answer written under the write timeout.
async fn request<S>(resolver: Resolver, svc: S, shared: Arc<Shared>)
where
    S: hyper::service::Service<Request<RecvBody>, Response = Response<Tracked>, Error = Infallible>,
{
    let stats = &shared.stats;
    let (head, stream) =
        match tokio::time::timeout(shared.header_timeout, resolver.resolve_request()).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => return,
            Err(_) => {
                stats.timed_out(Timeout::Header);
                return;
            }
        };
    let (mut send, recv) = stream.split();
    let (back, mut unread) = tokio::sync::oneshot::channel();
    let body = RecvBody {
        stream: Some(recv),
        back: Some(back),
    };
    let Ok(answer) = svc.call(head.map(|()| body)).await;
    let (mut parts, mut body) = answer_head(answer).into_parts();
    let write = shared.timeouts.write;
    let sent = async {
        parts.headers.remove(header::CONNECTION);
        within(write, send.send_response(Response::from_parts(parts, ()))).await?;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.map_err(|_| Cut::Failed)?.into_data() else {
                continue;
            };
            if !data.is_empty() {
                within(write, send.send_data(data)).await?;
            }
        }
        within(write, send.finish()).await
    };
    match sent.await {
        Ok(()) => {}
        Err(Cut::Stalled) => {
            stats.timed_out(Timeout::Write);
            send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
        }
        Err(Cut::Failed) => send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED),
    }
    if let Ok(rest) = unread.try_recv() {
        finish_reading(rest, shared.timeouts.body).await;
    }
}

/// The most of a request body no route read that is read after its answer, to see its end.
const UNREAD_DRAIN: usize = 64 << 10;

/// Reads the end of a request whose route did not read its body (every route but `/echo`),
/// after its answer: for a GET its end is on its way as the answer leaves (a client sends
/// its FIN after the head), and a stream dropped before it is stopped (STOP_SENDING), which
/// an h3 client meets as an error when it finishes its request. A body longer than
/// [`UNREAD_DRAIN`], or not ended within `limit` (`--body-timeout`), is stopped with
/// `H3_NO_ERROR`, as RFC 9114 §4.1 asks of a server that answered without it.
async fn finish_reading(mut rest: RecvStream, limit: Duration) {
    let ended = tokio::time::timeout(limit, async {
        let mut read = 0;
        loop {
            match rest.recv_data().await {
                Ok(Some(b)) => {
                    read += b.remaining();
                    if read > UNREAD_DRAIN {
                        return false;
                    }
                }
                Ok(None) => return true,
                Err(_) => return true,
            }
        }
    })
    .await;
    if ended != Ok(true) {
        rest.stop_sending(h3::error::Code::H3_NO_ERROR);
    }
}

/// The answer as HTTP/3 sends it: with its `Content-Length` when its body's size is known
/// (hyper adds it on HTTP/1.1 and HTTP/2; h3 does not), and without `Connection`, which
/// HTTP/3 forbids (RFC 9114 §4.2).
pub fn answer_head<B: hyper::body::Body>(mut answer: Response<B>) -> Response<B> {
    answer.headers_mut().remove(header::CONNECTION);
    if !answer.headers().contains_key(header::CONTENT_LENGTH) {
        if let Some(n) = hyper::body::Body::size_hint(answer.body()).exact() {
            answer
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    answer
}

/// A request stream's receiving half.
type RecvStream = h3::server::RequestStream<h3_quinn::RecvStream, Bytes>;

/// A request's body, read from its HTTP/3 stream. Dropped before its end (by a route that
/// does not read it), it hands the stream back to its request for `finish_reading`.
struct RecvBody {
    stream: Option<RecvStream>,
    back: Option<tokio::sync::oneshot::Sender<RecvStream>>,
}

impl Drop for RecvBody {
    fn drop(&mut self) {
        if let (Some(stream), Some(back)) = (self.stream.take(), self.back.take()) {
            let _ = back.send(stream);
        }
    }
}

impl hyper::body::Body for RecvBody {
    type Data = Bytes;
    type Error = h3::error::StreamError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Self::Error>>> {
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = match stream.poll_recv_data(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(Some(mut buf))) => {
                return Poll::Ready(Some(Ok(Frame::data(buf.copy_to_bytes(buf.remaining())))))
            }
            Poll::Ready(Ok(None)) => None,
            Poll::Ready(Err(e)) => Some(Err(e)),
        };
        // Ended (or failed): nothing is left to read after the answer.
        self.back = None;
        Poll::Ready(polled)
    }
}
