//! One connection's guards: the idle and write deadlines around its socket, the body deadline
//! around each request body, the server-wide cap on requests in flight (HTTP/1.1 requests and
//! HTTP/2 streams alike, `share.rs`) taken for each request, and the answers written without hyper (the 503 beyond the
//! connection cap, the 400 for plain HTTP on the TLS port).
//!
//! hyper 1's HTTP/1 server times out request headers only; read, write and idle timeouts are
//! left to the I/O it is given (hyperium/hyper#1628, #3852, #3666). As tokio-io-timeout does, a
//! write deadline starts when a write returns `Pending` and ends with any progress, and the
//! vectored writes are passed through so that hyper keeps using `writev` (hyper#1255). A read
//! deadline on the socket alone would also cut a request whose handler is still working (hyper
//! polls the socket for EOF meanwhile), so the idle deadline applies only while no request is
//! in progress, which the connection's service tells the socket wrapper through [`ConnState`].
//!
//! HTTP/2 multiplexes requests, so "a request in progress" is a count of open streams: the idle
//! deadline runs while none is open, whatever frames (SETTINGS, PING, WINDOW_UPDATE) arrive
//! meanwhile. hyper's HTTP/2 server has no header timeout; the idle deadline is what closes a
//! silent HTTP/2 connection. The body deadline is per request, so per stream. An HTTP/2
//! client can also stop taking an answer without stalling the socket, by granting no more
//! flow-control window: hyper then stops polling the answer's body and writes nothing, so no
//! write is ever pending. The write deadline covers that too: on HTTP/2, a connection with
//! answers under way none of which has moved for the write timeout is closed.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Request, Response, StatusCode, Version};
use axum::Router;
use hyper::body::{Frame, SizeHint};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::share::{InFlightCap, Membership, Slot};
use super::stats::{Stats, Timeout};

/// The per-connection timeouts hyper does not have.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// No request started for this long: closed.
    pub idle: Duration,
    /// A request's body must arrive within this long of its headers.
    pub body: Duration,
    /// The client took no bytes of an answer for this long: closed.
    pub write: Duration,
}

/// The address a request came from, in its extensions (`/stats/reset` answers loopback only).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

/// What a connection's socket wrapper and its requests share.
pub struct ConnState {
    started: Instant,
    /// The client's address.
    peer: SocketAddr,
    /// Its client's entry under the in-flight cap, for the share kept for every client.
    member: Membership,
    /// Requests whose answer is not finished.
    busy: AtomicUsize,
    /// When the connection last went idle, in milliseconds after `started`.
    idle_since_ms: AtomicU64,
    /// Bytes arrived since it went idle: a request is on its way (the header timeout's turn).
    /// HTTP/1 only: on HTTP/2, frames arrive on an idle connection too.
    heard: AtomicBool,
    /// The connection speaks HTTP/2.
    h2: AtomicBool,
    /// Answers whose body is being sent ([`Tracked`] bodies alive).
    answers: AtomicUsize,
    /// When an answer's body last moved (a frame taken, or a new answer), in milliseconds after
    /// `started`.
    answered_ms: AtomicU64,
    stats: Arc<Stats>,
}

impl ConnState {
    /// A new connection from `peer`, idle from now.
    pub fn new(stats: Arc<Stats>, peer: SocketAddr, member: Membership) -> Arc<Self> {
        Arc::new(ConnState {
            started: Instant::now(),
            peer,
            member,
            busy: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            heard: AtomicBool::new(false),
            h2: AtomicBool::new(false),
            answers: AtomicUsize::new(0),
            answered_ms: AtomicU64::new(0),
            stats,
        })
    }

    /// Marks the connection as HTTP/2 and counts it so.
    pub fn speaks_h2(&self) {
        self.h2.store(true, Ordering::Release);
        self.stats.h2_connection();
    }

    /// Counts the connection as HTTP/3 (a QUIC connection of `h3.rs`).
    pub fn speaks_h3(&self) {
        self.stats.h3_connection();
    }

    /// Milliseconds since `started`, now.
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis().min(u64::MAX as u128) as u64
    }

    /// On HTTP/2, when a connection whose answers have all stopped moving is closed, or `None`
    /// while no answer is being sent (HTTP/1's stalled answers stall the socket, which the
    /// write deadline of [`Guarded`] sees).
    fn stall_deadline(&self, write: Duration) -> Option<Instant> {
        if !self.h2.load(Ordering::Acquire) || self.answers.load(Ordering::Acquire) == 0 {
            return None;
        }
        let since = Duration::from_millis(self.answered_ms.load(Ordering::Acquire));
        Some(self.started + since + write)
    }

    /// When an idle connection is closed, or `None` while a request is on its way or in
    /// progress.
    pub(super) fn idle_deadline(&self, idle: Duration) -> Option<Instant> {
        let heard = self.heard.load(Ordering::Acquire) && !self.h2.load(Ordering::Acquire);
        if self.busy.load(Ordering::Acquire) > 0 || heard {
            return None;
        }
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
        Some(self.started + since + idle)
    }
}

/// A request in progress until dropped (with its answer's body, or with the handler when the
/// client goes away first); then the connection is idle again.
struct Busy(Arc<ConnState>);

impl Busy {
    fn enter(conn: &Arc<ConnState>) -> Self {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        Busy(conn.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let c = &self.0;
        c.idle_since_ms.store(c.now_ms(), Ordering::Release);
        c.heard.store(false, Ordering::Release);
        c.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Polls `timer` towards `deadline` (made or moved as needed): true once it has passed.
fn expired(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, cx: &mut Context<'_>) -> bool {
    let t = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    if t.deadline() != deadline {
        t.as_mut().reset(deadline);
    }
    t.as_mut().poll(cx).is_ready()
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

/// A socket (TCP, under TLS when there is TLS) with the idle and write deadlines.
pub struct Guarded<S> {
    inner: S,
    conn: Arc<ConnState>,
    timeouts: Timeouts,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
    /// When the pending write gives up; `None` while writes make progress.
    write_deadline: Option<Instant>,
}

impl<S> Guarded<S> {
    /// Wraps `inner` for the connection `conn`.
    pub fn new(inner: S, conn: Arc<ConnState>, timeouts: Timeouts) -> Self {
        Guarded {
            inner,
            conn,
            timeouts,
            read_timer: None,
            write_timer: None,
            write_deadline: None,
        }
    }

    /// A write's outcome, with the write deadline started on `Pending` and cleared on progress.
    fn on_write<T>(&mut self, r: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.write_deadline = None;
            return r;
        }
        let deadline = *self
            .write_deadline
            .get_or_insert_with(|| Instant::now() + self.timeouts.write);
        if expired(&mut self.write_timer, deadline, cx) {
            self.conn.stats.timed_out(Timeout::Write);
            return Poll::Ready(Err(timed_out(
                "the client took no bytes for --write-timeout",
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    this.conn.heard.store(true, Ordering::Release);
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                // The connection's reads are polled all along (for the next request, or EOF),
                // so its deadlines are kept here; at most one of them is set at a time.
                let idle = this.conn.idle_deadline(this.timeouts.idle);
                let stall = this.conn.stall_deadline(this.timeouts.write);
                if let Some(deadline) = idle.or(stall) {
                    if expired(&mut this.read_timer, deadline, cx) {
                        return Poll::Ready(Err(if idle.is_some() {
                            this.conn.stats.timed_out(Timeout::Idle);
                            timed_out("no request for --idle-timeout")
                        } else {
                            this.conn.stats.timed_out(Timeout::Write);
                            timed_out("the client took no bytes of any answer for --write-timeout")
                        }));
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.on_write(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.on_write(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.on_write(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Why a request body stopped: it missed `--body-timeout`.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within --body-timeout")]
struct BodyTimeout;

/// A request body (hyper's, or an HTTP/3 stream's) that must end within the body timeout of
/// its headers.
struct TimedBody<B> {
    inner: B,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    /// Set when it missed its deadline: this request is answered 408.
    timed_out: Arc<AtomicBool>,
}

impl<B> hyper::body::Body for TimedBody<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(f) => Poll::Ready(f.map(|r| r.map_err(Into::into))),
            Poll::Pending => {
                if expired(&mut this.timer, this.deadline, cx) {
                    this.timed_out.store(true, Ordering::Release);
                    return Poll::Ready(Some(Err(BodyTimeout.into())));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An answer's body that keeps its request counted as in progress (and its slot under the
/// in-flight cap taken) until it is sent or dropped, and tells its connection when it moves.
pub struct Tracked {
    inner: Body,
    _busy: Busy,
    _slot: Option<Slot>,
    conn: Arc<ConnState>,
}

impl Tracked {
    fn new(inner: Body, busy: Busy, slot: Option<Slot>, conn: Arc<ConnState>) -> Self {
        conn.answered_ms.store(conn.now_ms(), Ordering::Release);
        conn.answers.fetch_add(1, Ordering::AcqRel);
        Tracked {
            inner,
            _busy: busy,
            _slot: slot,
            conn,
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.conn.answers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if frame.is_ready() {
            let c = &self.conn;
            c.answered_ms.store(c.now_ms(), Ordering::Release);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The service of one connection: the router, with each request counted as in progress, under
/// the in-flight cap (beyond it: a 503 at once, no route run), told its peer ([`Peer`]), and
/// its body under the body timeout (a body that misses it is answered 408 and the connection
/// closed, hyper closing a connection whose request body was not read to its end). The one
/// path of every protocol: hyper's HTTP/1.1 and HTTP/2 connections (`B` = [`hyper::body::Incoming`]) and
/// the HTTP/3 streams of `h3.rs`. `alt_svc`, when the server also speaks HTTP/3, is added to
/// every answer (`Alt-Svc: h3=":PORT"`, RFC 7838 and RFC 9114 §3.1.1).
pub fn service<B>(
    app: Router,
    conn: Arc<ConnState>,
    timeouts: Timeouts,
    cap: InFlightCap,
    alt_svc: Option<HeaderValue>,
) -> impl hyper::service::Service<
    Request<B>,
    Response = Response<Tracked>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Tracked>, Infallible>> + Send,
> + Clone
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let svc = TowerToHyperService::new(app);
    hyper::service::service_fn(move |req: Request<B>| {
        let busy = Busy::enter(&conn);
        let (slot, refused) = match cap.admit(&conn.member) {
            Ok(slot) => (Some(slot), None),
            Err(why) => {
                conn.stats.over_in_flight();
                (None, Some(why.response()))
            }
        };
        let body_timed_out = Arc::new(AtomicBool::new(false));
        let http1 = req.version() < Version::HTTP_2;
        let mut req = req.map(|inner| TimedBody {
            inner,
            deadline: Instant::now() + timeouts.body,
            timer: None,
            timed_out: body_timed_out.clone(),
        });
        req.extensions_mut().insert(Peer(conn.peer));
        let svc = svc.clone();
        let conn = conn.clone();
        let alt_svc = alt_svc.clone();
        async move {
            let resp = match refused {
                Some(r) => r,
                None => {
                    let Ok(r) = hyper::service::Service::call(&svc, req).await;
                    r
                }
            };
            let resp = if body_timed_out.load(Ordering::Acquire) {
                conn.stats.timed_out(Timeout::Body);
                let mut r = super::answer::error_response(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request body did not arrive within --body-timeout {}",
                        crate::base::units::fmt_duration_spec(timeouts.body)
                    ),
                );
                // Said, since hyper closes the connection after it (RFC 9110 §15.5.9). On
                // HTTP/2 only the stream ends, and a Connection header is not allowed there.
                if http1 {
                    r.headers_mut().insert(
                        axum::http::header::CONNECTION,
                        axum::http::HeaderValue::from_static("close"),
                    );
                }
                r
            } else {
                resp
            };
            let mut resp = resp;
            if let Some(v) = alt_svc {
                resp.headers_mut().insert(axum::http::header::ALT_SVC, v);
            }
            Ok(resp.map(|inner| Tracked::new(inner, busy, slot, conn)))
        }
    })
}

/// The first bytes of an HTTP/2 connection over plain TCP (RFC 9113 §3.4): a client with prior
/// knowledge starts so; no HTTP/1 request does (`PRI` is no method of ours).
pub const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads from `io` until its first bytes are the HTTP/2 preface or cannot be (at most its 24
/// bytes; one byte tells an HTTP/1 request); the socket with those bytes to be read again,
/// and whether they were the preface. What hyper_util's `auto` builder does, but the caller
/// learns which protocol it is (for the idle deadline and `/stats`).
pub async fn sniff<S: AsyncRead + Unpin>(mut io: S) -> io::Result<(Replay<S>, bool)> {
    let mut seen = Vec::with_capacity(H2_PREFACE.len());
    let mut chunk = [0u8; H2_PREFACE.len()];
    loop {
        let want = H2_PREFACE.len() - seen.len();
        let n = io.read(&mut chunk[..want]).await?;
        seen.extend_from_slice(&chunk[..n]);
        let so_far = seen[..] == H2_PREFACE[..seen.len()];
        if n == 0 || !so_far || seen.len() == H2_PREFACE.len() {
            let h2 = so_far && seen.len() == H2_PREFACE.len();
            return Ok((Replay::new(seen, io), h2));
        }
    }
}

/// A socket whose first bytes, already read, are read again.
pub struct Replay<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Replay<S> {
    /// `inner`, read after `prefix`.
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Replay {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let n = (this.prefix.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Answers `status` with the JSON error `body` over a raw socket and closes it: used where no
/// HTTP connection is served (beyond the cap, plain HTTP on the TLS port). The client's request
/// is read and dropped until it closes, so that closing sends no reset ahead of the answer;
/// all of it within `limit`.
pub async fn answer_and_close(
    mut stream: TcpStream,
    status: StatusCode,
    body: &[u8],
    limit: Duration,
) {
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let _ = tokio::time::timeout(limit, async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut total = 0usize;
        while total < 1 << 20 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => total += n,
            }
        }
        Ok::<_, io::Error>(())
    })
    .await;
}
