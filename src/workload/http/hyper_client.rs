//! The async models' client (`async`, `async-local`, `actor`): HTTP/1.1 spoken by hand, HTTP/2
//! through the `h2` crate, TLS through tokio-rustls; no layers beyond them.
//!
//! HTTP/1.1: a small pool of idle connections, one request on each at a time, written and read
//! by the request's own task ([`super::wire`]'s request bytes and response reader, the green
//! client's): no connection task, no channel between the two, no header map parsed from each
//! response. hyper's client drove each connection from a task of its own and handed every
//! request and response across a channel: two or three wake-ups a request, often from one
//! worker thread to the other. HTTP/2
//! (`--http2`): the requests in flight are streams over `--connections` connections (1 unless
//! given), shared by cloning the sender and opened again when one dies (GOAWAY, closed);
//! h2c by prior knowledge over TCP, `h2` by ALPN over TLS. A TLS server that chooses
//! `http/1.1` gets the HTTP/1.1 pool, and the run records the version spoken.
//!
//! HTTP/2 goes through the `h2` crate directly (the one hyper drives): hyper's HTTP/2 client
//! hands each request to the connection's task over a channel and spawns one more task per
//! request to carry its response back, two wake-ups and a task's allocation per request that
//! h2's own handles do without.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf};
use tokio::net::TcpStream;

use super::endpoint::{micros, Endpoint};
use super::request::{HttpRequest, RequestBuilder};
use super::status_error;
use super::wire::{read_response_async, request_around_target, write_request};
use crate::base::units;
use crate::measure::conn::{ConnRecorder, ConnSample, HttpVersion};
use crate::measure::phases::{self, PhaseKind, TaskPhases};
use crate::measure::{mono_ns, TaskError};
use crate::os::tls;
use crate::workload::task_group;

/// A request as h2 sends it: its head, and its body if it has one.
type Head = (hyper::Request<()>, Option<Bytes>);

/// The read buffer of an HTTP/1.1 connection: a response head and a small body in one read.
/// Small and exact, as the green client's: at ten thousand connections a larger one was most
/// of the memory of a request in flight; larger bodies are read in more reads.
const READ_BUF: usize = 4 << 10;

/// The connections of one workload: idle HTTP/1.1 ones, and with `--http2` the shared ones.
pub(super) struct Client {
    pool: Mutex<Vec<H1Conn>>,
    /// `--http2`: one slot per connection that carries streams.
    slots: Vec<Slot>,
    /// The slot of the next request (round robin).
    next: AtomicUsize,
    /// Set once a TLS server answered ALPN with `http/1.1` (or nothing): every request takes
    /// the HTTP/1.1 pool from then on.
    fell_back: AtomicBool,
    /// Task 0's heads, when every task's request differs only in its target.
    prepared: Option<Prepared>,
}

/// Task 0's request as it goes out over HTTP/1.1 and over HTTP/2, made once for a workload
/// whose tasks' requests differ only in their target ([`RequestBuilder::only_target_varies`]):
/// a task's request is these bytes around its own target, or a copy of the HTTP/2 head with its
/// URI, instead of its headers built as text (and, for HTTP/2, parsed into `http`'s types) again
/// (15% of the HTTP/2 client's samples at delay 0).
struct Prepared {
    /// HTTP/1.1: what comes before the target (`METHOD `) and after it (the rest of the request
    /// line, the headers, the empty line and the body).
    h1_before: Vec<u8>,
    h1_after: Vec<u8>,
    /// Whether the method is `HEAD` (no body in any response).
    head_method: bool,
    h2: hyper::Request<()>,
    /// `SCHEME://AUTHORITY` of the HTTP/2 URL (the authority is the `Host` header's).
    h2_origin: String,
    body: Option<Bytes>,
}

impl Prepared {
    fn new(requests: &RequestBuilder) -> Option<Prepared> {
        if !requests.only_target_varies() {
            return None;
        }
        let req = requests.build(0);
        let (h1_before, h1_after) = request_around_target(&req);
        let h2 = requests.build(0).into_http2();
        let h2_origin = h2.url.strip_suffix(&h2.target)?.to_string();
        let (h2, body) = to_h2(h2).ok()?;
        Some(Prepared {
            h1_before,
            h1_after,
            head_method: req.is_head(),
            h2,
            h2_origin,
            body,
        })
    }
}

/// An HTTP/1.1 connection, plain or over TLS, with its read buffer (which holds nothing
/// between two responses).
struct H1Conn {
    io: BufReader<Stream>,
}

/// The byte stream under an HTTP/1.1 connection.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl H1Conn {
    fn new(stream: Stream) -> H1Conn {
        H1Conn {
            io: BufReader::with_capacity(READ_BUF, stream),
        }
    }

    /// Whether an idle connection can take a request: nothing has arrived on it since its last
    /// response, not even the server's close (which a server's idle timeout sends). One
    /// `recv(MSG_PEEK)` that finds nothing to read; over TLS, first rustls's own buffer, which
    /// holds what came in the same read as the last response's records (a `close_notify`).
    fn reusable(&mut self) -> bool {
        if !self.io.buffer().is_empty() {
            return false;
        }
        let fd = match self.io.get_mut() {
            Stream::Plain(s) => s.as_raw_fd(),
            Stream::Tls(s) => {
                let (tcp, tls) = s.get_mut();
                let mut byte = [0u8; 1];
                // Nothing decrypted and no close seen is `WouldBlock`; a byte, a clean close
                // (`Ok(0)`) or an error all mean the connection cannot take a request.
                match std::io::Read::read(&mut tls.reader(), &mut byte) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    _ => return false,
                }
                tcp.as_raw_fd()
            }
        };
        let mut byte = 0u8;
        // SAFETY: recv reads at most one byte into `byte`, which we own, without blocking and
        // without taking it from the socket (MSG_PEEK).
        let got = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        got < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One `--http2` connection's place: empty until first used and after its connection died.
#[derive(Default)]
struct Slot {
    /// The connection, cloned out by every request under a lock held for nothing else (no
    /// request waits on another's await).
    conn: Mutex<Option<H2Conn>>,
    /// Held while connecting, so that the requests waiting for the slot's connection open
    /// one, not one each.
    connecting: tokio::sync::Mutex<()>,
}

impl Slot {
    /// The slot's connection, if it has one still open.
    fn live(&self) -> Option<H2Conn> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.as_ref()
            .filter(|c| !c.closed.load(Ordering::Acquire))
            .cloned()
    }
}

/// One HTTP/2 connection, shared by every request that goes out on it.
#[derive(Clone)]
struct H2Conn {
    sender: h2::client::SendRequest<Bytes>,
    /// Set by the connection's task when the connection ended (GOAWAY, closed, failed).
    closed: Arc<AtomicBool>,
    /// Streams open on this connection now (handed to it and not yet read to the end).
    open: Arc<AtomicU64>,
    /// Whether the server's stream limit was recorded: once per connection, after its first
    /// response.
    limit_read: Arc<AtomicBool>,
}

/// A new connection, as the server agreed to speak on it.
enum Conn {
    H1(H1Conn),
    H2(H2Conn),
}

/// One stream counted open on its connection until dropped (the body read, or the request
/// failed or timed out).
struct OpenStream<'a>(&'a AtomicU64);

impl<'a> OpenStream<'a> {
    fn new(open: &'a AtomicU64, conns: &ConnRecorder) -> OpenStream<'a> {
        conns.streams_open(open.fetch_add(1, Ordering::AcqRel) + 1);
        OpenStream(open)
    }
}

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Client {
    /// The client of `ep` sending `requests`: with `--http2`, `ep.connections` slots.
    pub(super) fn new(ep: &Endpoint, requests: &RequestBuilder) -> Client {
        let slots = if ep.http2 { ep.connections } else { 0 };
        Client {
            pool: Mutex::default(),
            slots: (0..slots).map(|_| Slot::default()).collect(),
            next: AtomicUsize::new(0),
            fell_back: AtomicBool::new(false),
            prepared: Prepared::new(requests),
        }
    }

    /// Task `index`'s HTTP/2 head and body: a copy of the prepared head with the task's URI, or
    /// the builder's request converted whole.
    fn h2_head(&self, requests: &RequestBuilder, index: usize) -> Result<Head, TaskError> {
        let Some(p) = &self.prepared else {
            return to_h2(requests.build(index).into_http2());
        };
        let mut head = p.h2.clone();
        *head.uri_mut() =
            hyper::Uri::try_from(format!("{}{}", p.h2_origin, requests.target(index)))
                .map_err(|e| TaskError::new("request", e.to_string()))?;
        Ok((head, p.body.clone()))
    }

    /// Task `index`'s HTTP/1.1 request as bytes, and whether it is a `HEAD`: the prepared bytes
    /// around the task's target, or the builder's request written whole.
    fn h1_request(&self, requests: &RequestBuilder, index: usize) -> (Vec<u8>, bool) {
        let Some(p) = &self.prepared else {
            let req = requests.build(index);
            return (write_request(&req), req.is_head());
        };
        let target = requests.target(index);
        let mut out = Vec::with_capacity(p.h1_before.len() + target.len() + p.h1_after.len());
        out.extend_from_slice(&p.h1_before);
        out.extend_from_slice(target.as_bytes());
        out.extend_from_slice(&p.h1_after);
        (out, p.head_method)
    }

    /// An idle HTTP/1.1 connection that can take a request, if the pool has one; those that
    /// cannot (closed by the server while idle) are dropped on the way.
    fn idle(&self) -> Option<H1Conn> {
        loop {
            let mut conn = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
            if conn.reusable() {
                return Some(conn);
            }
        }
    }

    /// Makes task `index`'s request within the request timeout: the body bytes read. The
    /// request is built once a connection is ready, so that a future waiting to connect does
    /// not hold it (ten thousand of them wait at once).
    pub(super) async fn fetch(
        &self,
        ep: &Endpoint,
        requests: &RequestBuilder,
        index: usize,
    ) -> Result<u64, TaskError> {
        match tokio::time::timeout(ep.timeout, self.fetch_untimed(ep, requests, index)).await {
            Ok(r) => r,
            Err(_elapsed) => Err(TaskError::new(
                "timeout",
                format!(
                    "no full response within {}",
                    units::fmt_secs(ep.timeout.as_secs_f64())
                ),
            )),
        }
    }

    async fn fetch_untimed(
        &self,
        ep: &Endpoint,
        requests: &RequestBuilder,
        index: usize,
    ) -> Result<u64, TaskError> {
        // The task's phases, when the run traces it (one relaxed load when it does not).
        let task = phases::workload_task(index);
        let task = task.as_ref();
        if !self.slots.is_empty() && ep.keepalive && !self.fell_back.load(Ordering::Relaxed) {
            return self.fetch_shared(ep, requests, index, task).await;
        }
        let pooled = if ep.keepalive { self.idle() } else { None };
        let conn = match pooled {
            Some(c) => {
                ep.conns.record(ConnSample::default());
                Conn::H1(c)
            }
            // Boxed: the connect's state (TLS handshake included) is 3.6 KB of the 3.7 KB
            // future, and a request spends most of its life waiting for the response with
            // that space reserved but unused; boxed, it is held only while connecting.
            _ => Box::pin(connect(ep, task)).await?,
        };
        match conn {
            Conn::H1(s) => self.send_h1(ep, s, requests, index, task).await,
            // `--http2 --no-keepalive`: one stream on a connection of its own, closed after.
            Conn::H2(c) => send_h2(ep, &c, self.h2_head(requests, index)?, task).await,
        }
    }

    /// `--http2` with kept connections: the request as a stream on its slot's connection,
    /// opened first if the slot has none or its connection died.
    async fn fetch_shared(
        &self,
        ep: &Endpoint,
        requests: &RequestBuilder,
        index: usize,
        task: Option<&TaskPhases>,
    ) -> Result<u64, TaskError> {
        // In a task group (`async`), the group's own connection; else the next in turn.
        let turn =
            task_group::current().unwrap_or_else(|| self.next.fetch_add(1, Ordering::Relaxed));
        let slot = &self.slots[turn % self.slots.len()];
        let conn = match slot.live() {
            Some(c) => c,
            None => {
                let connecting = slot.connecting.lock().await;
                match slot.live() {
                    // Another request opened it while this one waited.
                    Some(c) => c,
                    None => match Box::pin(connect(ep, task)).await? {
                        Conn::H2(c) => {
                            *slot.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(c.clone());
                            drop(connecting);
                            return send_h2(ep, &c, self.h2_head(requests, index)?, task).await;
                        }
                        Conn::H1(s) => {
                            self.fell_back.store(true, Ordering::Relaxed);
                            drop(connecting);
                            return self.send_h1(ep, s, requests, index, task).await;
                        }
                    },
                }
            }
        };
        ep.conns.record(ConnSample::default());
        send_h2(ep, &conn, self.h2_head(requests, index)?, task).await
    }

    /// Task `index`'s request on an HTTP/1.1 connection, written and its response read in
    /// this task; the connection goes back to the pool after unless either side closes it.
    async fn send_h1(
        &self,
        ep: &Endpoint,
        mut conn: H1Conn,
        requests: &RequestBuilder,
        index: usize,
        task: Option<&TaskPhases>,
    ) -> Result<u64, TaskError> {
        let read = |e: std::io::Error| TaskError::new("read", e.to_string());
        let (request, to_head) = self.h1_request(requests, index);
        let writing = task.map(|_| mono_ns());
        let io = conn.io.get_mut();
        io.write_all(&request).await.map_err(read)?;
        // Over TLS, what the stream still holds goes out; plain TCP has nothing to flush.
        io.flush().await.map_err(read)?;
        drop(request);
        // A traced task waits for the response's first bytes apart (the read below would
        // wait for them first anyway): send, wait and read are then its phases.
        let mut first = None;
        if let (Some(t), Some(w)) = (task, writing) {
            let sent = mono_ns();
            t.record(PhaseKind::Send, w, sent);
            conn.io.fill_buf().await.map_err(read)?;
            let now = mono_ns();
            t.record(PhaseKind::Wait, sent, now);
            first = Some(now);
        }
        let (status, n, keep) = read_response_async(&mut conn.io, to_head)
            .await
            .map_err(read)?;
        if let (Some(t), Some(f)) = (task, first) {
            t.record(PhaseKind::Read, f, mono_ns());
        }
        if ep.keepalive && keep {
            self.pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(conn);
        }
        checked(status, n)
    }
}

/// A request (its HTTP/2 head and body) as a stream on `conn`, counted open until its body is
/// read.
async fn send_h2(
    ep: &Endpoint,
    conn: &H2Conn,
    (head, body): Head,
    task: Option<&TaskPhases>,
) -> Result<u64, TaskError> {
    let read = |e: h2::Error| TaskError::new("read", e.to_string());
    let asked = task.map(|_| mono_ns());
    // Waits while the connection has as many streams open as the server allows.
    let mut sender = conn
        .sender
        .clone()
        .ready()
        .await
        .map_err(|e| TaskError::new("connect", e.to_string()))?;
    let body = body.filter(|b| !b.is_empty());
    let stream = OpenStream::new(&conn.open, &ep.conns);
    let (resp, mut send) = sender.send_request(head, body.is_none()).map_err(read)?;
    if let Some(b) = body {
        // Queued whole; h2 sends it as the server's window allows.
        send.send_data(b, true).map_err(read)?;
    }
    // HTTP/2: the send is the wait for a stream the server's limit allows and the frames
    // handed to h2 (its connection task writes them, unseen here); then the wait for the
    // response's head, then the body.
    let sent = task.map(|_| mono_ns());
    if let (Some(t), Some(a), Some(z)) = (task, asked, sent) {
        t.record(PhaseKind::Send, a, z);
    }
    let resp = resp.await.map_err(read)?;
    let first = task.map(|_| mono_ns());
    if let (Some(t), Some(a), Some(z)) = (task, sent, first) {
        t.record(PhaseKind::Wait, a, z);
    }
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut n = 0u64;
    while let Some(data) = body.data().await {
        let data = data.map_err(read)?;
        n += data.len() as u64;
        // Read: the server may send as much again.
        let _ = body.flow_control().release_capacity(data.len());
    }
    drop(stream);
    if let (Some(t), Some(f)) = (task, first) {
        t.record(PhaseKind::Read, f, mono_ns());
    }
    // The server's SETTINGS come before its first response, and h2 applies them before it
    // reads the next frame, so it knows them by now; they hold for the connection's life.
    if !conn.limit_read.swap(true, Ordering::AcqRel) {
        let limit = conn.sender.current_max_send_streams();
        if limit != usize::MAX {
            ep.conns.server_max_streams(limit as u64);
        }
    }
    checked(status, n)
}

/// The bytes read, or the error of a status that says the request failed.
fn checked(status: u16, n: u64) -> Result<u64, TaskError> {
    if status >= 400 {
        return Err(status_error(status));
    }
    Ok(n)
}

/// `req` (made by [`HttpRequest::into_http2`]) as h2 sends it, its head and its body apart: the
/// builder's headers in their order (a header map keeps its insertion order). The URI is the
/// whole URL, whose scheme and authority become `:scheme` and `:authority`.
fn to_h2(req: HttpRequest) -> Result<Head, TaskError> {
    let mut b = hyper::Request::builder()
        .method(req.method.as_str())
        .version(hyper::Version::HTTP_2)
        .uri(req.url);
    for (name, value) in req.headers {
        b = b.header(name, value);
    }
    let head = b
        .body(())
        .map_err(|e| TaskError::new("request", e.to_string()))?;
    Ok((head, req.body))
}

/// Opens a connection (TLS included), recording what it cost and, with `--http2`, the version
/// it speaks: HTTP/2 by prior knowledge over TCP, as ALPN chose over TLS.
async fn connect(ep: &Endpoint, task: Option<&TaskPhases>) -> Result<Conn, TaskError> {
    let addr = ep.addr_async().await?;
    let t0 = mono_ns();
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| TaskError::new("connect", format!("{addr}: {e}")))?;
    let t1 = mono_ns();
    if let Some(t) = task {
        t.record(PhaseKind::Connect, t0, t1);
    }
    let _ = stream.set_nodelay(true);
    let mut sample = ConnSample {
        opened: true,
        connect_us: Some(micros(t0, t1)),
        tls_us: None,
    };
    let conn = match ep.tls_h2.as_ref().or(ep.tls.as_ref()) {
        None if ep.http2 => handshake_h2(stream).await,
        None => Ok(Conn::H1(H1Conn::new(Stream::Plain(stream)))),
        Some(config) => {
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(ep.server_name.clone(), stream)
                .await
                .map_err(|e| {
                    TaskError::new(
                        tls::KIND,
                        format!("{}: {}", ep.connect, tls::handshake_failure(&e)),
                    )
                });
            match tls {
                Ok(s) => {
                    let t2 = mono_ns();
                    sample.tls_us = Some(micros(t1, t2));
                    if let Some(t) = task {
                        t.record(PhaseKind::Tls, t1, t2);
                    }
                    if s.get_ref().1.alpn_protocol() == Some(tls::ALPN_H2) {
                        handshake_h2(s).await
                    } else {
                        Ok(Conn::H1(H1Conn::new(Stream::Tls(Box::new(s)))))
                    }
                }
                Err(e) => Err(e),
            }
        }
    };
    ep.conns.record(sample);
    if let (true, Ok(c)) = (ep.http2, &conn) {
        ep.conns.http_version(match c {
            Conn::H1(_) => HttpVersion::Http1,
            Conn::H2(_) => HttpVersion::Http2,
        });
    }
    conn
}

/// h2's handshake over any stream; the connection is driven beside the request that opened
/// it (in its task group, or as a task of its own), and marked closed when it ends. The windows
/// are hyper's defaults (2 MiB a stream, 5 MiB the connection), so that large bodies are not
/// held back by h2's 64 KiB.
async fn handshake_h2<I>(io: I) -> Result<Conn, TaskError>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = h2::client::Builder::new()
        .initial_window_size(2 << 20)
        .initial_connection_window_size(5 << 20)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| TaskError::new("connect", e.to_string()))?;
    let closed = Arc::new(AtomicBool::new(false));
    let ended = closed.clone();
    task_group::spawn(async move {
        let _ = conn.await;
        ended.store(true, Ordering::Release);
    });
    Ok(Conn::H2(H2Conn {
        sender,
        closed,
        open: Arc::new(AtomicU64::new(0)),
        limit_read: Arc::new(AtomicBool::new(false)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadOptions;

    fn builder(path: &str, opts: &WorkloadOptions) -> RequestBuilder {
        let method = hyper::Method::from_bytes(b"POST").unwrap();
        let (origin, host) = ("http://h:1".to_string(), "h:1".to_string());
        RequestBuilder::new(&method, origin, host, path.into(), opts).unwrap()
    }

    /// What h2 is given: method, URI, version, headers in order, body.
    fn shown(r: Head) -> String {
        let (head, body) = r;
        let headers: Vec<String> = head
            .headers()
            .iter()
            .map(|(n, v)| format!("{n}: {v:?}"))
            .collect();
        format!(
            "{} {} {:?} {headers:?} {body:?}",
            head.method(),
            head.uri(),
            head.version()
        )
    }

    /// Runs `test` on a current-thread runtime with a listener on a free loopback port.
    fn on_loopback<F: std::future::Future<Output = ()>>(
        test: impl FnOnce(tokio::net::TcpListener, std::net::SocketAddr) -> F,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            test(listener, addr).await
        });
    }

    #[test]
    fn an_idle_connection_that_heard_from_the_server_is_not_reused() {
        on_loopback(|listener, addr| async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            // The server closes the idle connection; then, on another, sends a stray byte.
            for stray in [false, true] {
                let client = TcpStream::connect(addr).await.unwrap();
                let (mut server, _) = listener.accept().await.unwrap();
                let mut conn = H1Conn::new(Stream::Plain(client));
                assert!(conn.reusable(), "open and quiet");
                if stray {
                    server.write_all(b"x").await.unwrap();
                } else {
                    drop(server);
                }
                while conn.reusable() {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "never seen (stray {stray})"
                    );
                    tokio::task::yield_now().await;
                }
            }
        });
    }

    #[test]
    fn a_tls_close_read_with_the_last_response_keeps_the_connection_out_of_the_pool() {
        on_loopback(|listener, addr| async move {
            let cert = tls::ServerCert::self_signed(addr).unwrap();
            let acceptor =
                tokio_rustls::TlsAcceptor::from(cert.server_config(&[b"http/1.1"]).unwrap());
            let config = Arc::new(tls::client_config(true, None).unwrap());
            let connector = tokio_rustls::TlsConnector::from(config);
            let server = tokio::spawn(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut s = acceptor.accept(tcp).await.unwrap();
                // The answer and the close in one write, the TCP connection left open: the
                // client's read of the answer takes the close_notify into rustls with it.
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await
                    .unwrap();
                s.get_mut().1.send_close_notify();
                s.flush().await.unwrap();
                s
            });
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = tls::server_name("127.0.0.1").unwrap();
            let client = connector.connect(name, tcp).await.unwrap();
            let mut conn = H1Conn::new(Stream::Tls(Box::new(client)));
            // Both records are on the socket before the client reads (and its side stays open).
            let _server_side = server.await.unwrap();
            let (status, n, keep) = read_response_async(&mut conn.io, false).await.unwrap();
            assert_eq!((status, n, keep), (200, 2, true));
            assert!(!conn.reusable(), "the server said close_notify");
        });
    }

    #[test]
    fn a_prepared_head_is_the_builders_request_with_the_tasks_target() {
        let same = |o: &WorkloadOptions| {
            let requests = builder("/x?i={i}&r={rand}", o);
            let target = super::super::spec::read_url("http://h:1/", None).unwrap();
            let client = Client::new(&Endpoint::new(&target, o).unwrap(), &requests);
            assert!(client.prepared.is_some(), "only the target varies");
            for i in [0, 1, 77] {
                let req = requests.build(i);
                assert_eq!(
                    client.h1_request(&requests, i),
                    (write_request(&req), req.is_head())
                );
                let want = to_h2(req.into_http2()).unwrap();
                let got = client.h2_head(&requests, i).unwrap();
                assert_eq!(shown(got), shown(want));
            }
        };
        same(&WorkloadOptions::default());
        same(&WorkloadOptions {
            headers: vec![
                ("Host".into(), "other:8".into()),
                ("X-Keep".into(), "1".into()),
            ],
            body: Some(b"fixed body".to_vec()),
            keepalive: false,
            ..Default::default()
        });
        // A placeholder in a header or the body: every task's head is built whole.
        let o = WorkloadOptions {
            headers: vec![("X-N".into(), "{i}".into())],
            ..Default::default()
        };
        assert!(Prepared::new(&builder("/", &o)).is_none());
    }
}
