//! The async models' client (`async`, `async-local`, `actor`): HTTP/1.1 and HTTP/2 spoken by
//! hand, TLS through tokio-rustls; no layers beyond them.
//!
//! HTTP/1.1: a small pool of idle connections, one request on each at a time, written and read
//! by the request's own task ([`super::wire`]'s request bytes and response reader, the green
//! client's): no connection task, no channel between the two, no header map parsed from each
//! response. hyper's client drove each connection from a task of its own and handed every
//! request and response across a channel: two or three wake-ups a request, often from one
//! worker thread to the other. HTTP/2
//! (`--http2`): the requests in flight are streams over `--connections` connections (1 unless
//! given), shared by cloning a handle and opened again when one dies (GOAWAY, closed);
//! h2c by prior knowledge over TCP, `h2` by ALPN over TLS. A TLS server that chooses
//! `http/1.1` gets the HTTP/1.1 pool, and the run records the version spoken.
//!
//! HTTP/2 is concur's own ([`super::h2`]): the `h2` crate it replaced spent about 5 µs a
//! request in its stream store, HPACK and `http`'s header maps (docs/benchmarks.md §22). A
//! request the server did not process (its stream above a GOAWAY's last, or refused with
//! REFUSED_STREAM, or queued on a connection that went away) is sent again on a live or new
//! connection, up to [`H2_ATTEMPTS`] times in all, as RFC 9113 §8.7 allows; one the server
//! may have processed fails with the reason.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf};
use tokio::net::TcpStream;

use super::checked;
use super::endpoint::{micros, timed, Endpoint};
use super::h2;
use super::request::{HttpRequest, RequestBuilder};
use super::slots::{Shared, Slot, Slots};
use super::wire::{read_response_async, request_around_target, write_request};
use crate::measure::conn::{ConnSample, HttpVersion};
use crate::measure::phases::{self, PhaseKind, TaskPhases};
use crate::measure::{mono_ns, TaskError};
use crate::os::tls;
use crate::workload::task_group;

/// How many times an HTTP/2 request the server did not process is sent in all.
const H2_ATTEMPTS: usize = 3;

/// The read buffer of an HTTP/1.1 connection: a response head and a small body in one read.
/// Small and exact, as the green client's: at ten thousand connections a larger one was most
/// of the memory of a request in flight; larger bodies are read in more reads.
const READ_BUF: usize = 4 << 10;

/// The connections of one workload: idle HTTP/1.1 ones, and with `--http2` the shared ones.
pub(super) struct Client {
    pool: Mutex<Vec<H1Conn>>,
    /// `--http2`: one slot per connection that carries streams.
    slots: Slots<H2Conn>,
    /// Set once a TLS server answered ALPN with `http/1.1` (or nothing): every request takes
    /// the HTTP/1.1 pool from then on.
    fell_back: AtomicBool,
    /// Task 0's heads, when every task's request differs only in its target.
    prepared: Option<Prepared>,
    /// The HTTP/2 fields every request shares (none when each task's are its own).
    h2_template: Arc<h2::Template>,
}

/// Task 0's request as it goes out over HTTP/1.1 and over HTTP/2, made once for a workload
/// whose tasks' requests differ only in their target ([`RequestBuilder::only_target_varies`]):
/// a task's request is these bytes around its own target, or the HTTP/2 template's fields and
/// its own `:path`, instead of its headers built as text again (15% of the HTTP/2 client's
/// samples at delay 0 when they were).
struct Prepared {
    /// HTTP/1.1: what comes before the target (`METHOD `) and after it (the rest of the request
    /// line, the headers, the empty line and the body).
    h1_before: Vec<u8>,
    h1_after: Vec<u8>,
    /// Whether the method is `HEAD` (no body in any response).
    head_method: bool,
    /// HTTP/2: every field but `:path`, or every field when the target holds no placeholder.
    h2: Arc<h2::Template>,
    body: Option<Bytes>,
}

impl Prepared {
    fn new(requests: &RequestBuilder) -> Option<Prepared> {
        if !requests.only_target_varies() {
            return None;
        }
        let req = requests.build(0);
        let (h1_before, h1_after) = request_around_target(&req);
        // A target without placeholders is the same in every request: the template holds it.
        let same_target = requests.target(1) == req.target && requests.target(2) == req.target;
        let h2 = req.clone().into_http2();
        let fields = h2_fields(&h2, same_target);
        Some(Prepared {
            h1_before,
            h1_after,
            head_method: req.is_head(),
            h2: Arc::new(h2::Template::new(&fields, !same_target)),
            body: h2.body,
        })
    }
}

/// One task's HTTP/2 request: its own `:path`, or (when more than the target varies) every
/// field, and its body.
enum H2Request {
    Path(String, Option<Bytes>),
    Fields(Vec<(String, String)>, Option<Bytes>),
}

impl H2Request {
    fn head(&self) -> h2::Head<'_> {
        match self {
            H2Request::Path(p, _) => h2::Head::Path(p),
            H2Request::Fields(f, _) => h2::Head::Fields(f),
        }
    }
    fn body(&self) -> Option<&Bytes> {
        match self {
            H2Request::Path(_, b) | H2Request::Fields(_, b) => b.as_ref(),
        }
    }
}

/// `req` (made by [`HttpRequest::into_http2`]) as HTTP/2 fields: the pseudo-headers from its
/// method and URL (whose authority is the `Host` header's), `:path` first when `with_path`
/// (where a request of a template sends its own), then its headers in order, names lowercase
/// (RFC 9113 §8.2).
fn h2_fields(req: &HttpRequest, with_path: bool) -> Vec<(String, String)> {
    let (scheme, rest) = req.url.split_once("://").unwrap_or(("http", &req.url));
    let authority = rest.strip_suffix(req.target.as_str()).unwrap_or(rest);
    let mut fields = Vec::with_capacity(req.headers.len() + 4);
    if with_path {
        fields.push((":path".to_string(), req.target.clone()));
    }
    fields.extend([
        (":method".to_string(), req.method.clone()),
        (":scheme".to_string(), scheme.to_string()),
        (":authority".to_string(), authority.to_string()),
    ]);
    fields.extend(
        req.headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone())),
    );
    fields
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

/// One HTTP/2 connection, shared by every request that goes out on it (one reference count a
/// request: cloned from its slot for each).
#[derive(Clone)]
struct H2Conn(Arc<H2ConnInner>);

struct H2ConnInner {
    conn: h2::Connection,
    /// Whether the server's stream limit was recorded: once per connection, after its first
    /// response.
    limit_read: AtomicBool,
}

impl Shared for H2Conn {
    fn accepts_streams(&self) -> bool {
        self.conn.accepts_streams()
    }
}

impl std::ops::Deref for H2Conn {
    type Target = H2ConnInner;
    fn deref(&self) -> &H2ConnInner {
        &self.0
    }
}

/// A new connection, as the server agreed to speak on it.
enum Conn {
    H1(H1Conn),
    H2(H2Conn),
}

/// Why an HTTP/2 request has no answer: a task error, or the server did not process it (it
/// may go again).
enum H2Error {
    Task(TaskError),
    Unprocessed(String),
}

impl From<TaskError> for H2Error {
    fn from(e: TaskError) -> H2Error {
        H2Error::Task(e)
    }
}

impl Client {
    /// The client of `ep` sending `requests`: with `--http2`, `ep.connections` slots.
    pub(super) fn new(ep: &Endpoint, requests: &RequestBuilder) -> Client {
        let slots = if ep.http2 { ep.connections } else { 0 };
        let prepared = Prepared::new(requests);
        let h2_template = match &prepared {
            Some(p) => p.h2.clone(),
            None => Arc::new(h2::Template::new(&[], false)),
        };
        Client {
            pool: Mutex::default(),
            slots: Slots::new(slots),
            fell_back: AtomicBool::new(false),
            prepared,
            h2_template,
        }
    }

    /// Task `index`'s HTTP/2 request: its target on the prepared template, or the builder's
    /// request converted whole.
    fn h2_request(&self, requests: &RequestBuilder, index: usize) -> H2Request {
        match &self.prepared {
            Some(p) => H2Request::Path(requests.target(index), p.body.clone()),
            None => {
                let req = requests.build(index).into_http2();
                H2Request::Fields(h2_fields(&req, true), req.body.clone())
            }
        }
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
        timed(ep, self.fetch_untimed(ep, requests, index)).await
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
            _ => Box::pin(connect(ep, task, &self.h2_template)).await?,
        };
        let c = match conn {
            Conn::H1(s) => return self.send_h1(ep, s, requests, index, task).await,
            Conn::H2(c) => c,
        };
        // `--http2 --no-keepalive`: one stream on a connection of its own, closed after; one
        // the server did not process goes again on another.
        let req = self.h2_request(requests, index);
        let mut why = match send_h2(ep, &c, &req, task).await {
            Err(H2Error::Unprocessed(why)) => why,
            done => return h2_done(done),
        };
        drop(c);
        for _ in 1..H2_ATTEMPTS {
            let Conn::H2(c) = Box::pin(connect(ep, task, &self.h2_template)).await? else {
                return Err(TaskError::new(
                    "read",
                    format!("{why}; the next connection spoke HTTP/1.1"),
                ));
            };
            why = match send_h2(ep, &c, &req, task).await {
                Err(H2Error::Unprocessed(why)) => why,
                done => return h2_done(done),
            };
        }
        Err(never_processed(&why))
    }

    /// `--http2` with kept connections: the request as a stream on its slot's connection,
    /// opened first if the slot has none or its connection died or is going away; sent again
    /// there if the server did not process it.
    async fn fetch_shared(
        &self,
        ep: &Endpoint,
        requests: &RequestBuilder,
        index: usize,
        task: Option<&TaskPhases>,
    ) -> Result<u64, TaskError> {
        // In a task group (`async`), the group's own connection; else the next in turn.
        let slot = self.slots.turn();
        // Made once the connection is ready (see `fetch`), and kept for another attempt.
        let mut req = None;
        let mut why = String::new();
        for _ in 0..H2_ATTEMPTS {
            let conn = match self.slot_conn(ep, slot, task).await? {
                Conn::H2(c) => c,
                Conn::H1(s) => return self.send_h1(ep, s, requests, index, task).await,
            };
            let req = req.get_or_insert_with(|| self.h2_request(requests, index));
            why = match send_h2(ep, &conn, req, task).await {
                Err(H2Error::Unprocessed(why)) => why,
                done => return h2_done(done),
            };
        }
        Err(never_processed(&why))
    }

    /// The connection of `slot`: its live one (a reused connection), else a new one made
    /// while the slot's other requests wait for it (or an HTTP/1.1 one, when a TLS server
    /// chose that by ALPN).
    async fn slot_conn(
        &self,
        ep: &Endpoint,
        slot: &Slot<H2Conn>,
        task: Option<&TaskPhases>,
    ) -> Result<Conn, TaskError> {
        let _connecting = match slot.live_or_connect(&ep.conns).await {
            Ok(c) => return Ok(Conn::H2(c)),
            Err(connecting) => connecting,
        };
        let conn = Box::pin(connect(ep, task, &self.h2_template)).await?;
        match &conn {
            Conn::H2(c) => slot.put(c.clone()),
            Conn::H1(_) => self.fell_back.store(true, Ordering::Relaxed),
        }
        Ok(conn)
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

/// A request as a stream on `conn`: the body bytes of its response. The streams open on the
/// connection with it are recorded (their peak is the run's).
async fn send_h2(
    ep: &Endpoint,
    conn: &H2Conn,
    req: &H2Request,
    task: Option<&TaskPhases>,
) -> Result<u64, H2Error> {
    let asked = task.map(|_| mono_ns());
    // Waits while the connection has as many streams open as the server allows.
    let (stream, open) = conn
        .conn
        .open(req.head(), req.body(), task.is_some())
        .await
        .map_err(h2_failure)?;
    ep.conns.streams_open(open as u64);
    // HTTP/2: the send is the wait for a stream the server's limit allows and the frames
    // queued (the connection's driver writes them, unseen here); then the wait for the
    // response's head, then its body.
    let sent = task.map(|_| mono_ns());
    if let (Some(t), Some(a), Some(z)) = (task, asked, sent) {
        t.record(PhaseKind::Send, a, z);
    }
    let resp = stream.await.map_err(h2_failure)?;
    if let (Some(t), Some(s)) = (task, sent) {
        let (head, end) = (resp.head_ns.max(s), mono_ns());
        t.record(PhaseKind::Wait, s, head);
        t.record(PhaseKind::Read, head, end.max(head));
    }
    // The server's SETTINGS came before the connection took its first request (the handshake
    // waits for them); they hold for the connection's life unless it sends others.
    if !conn.limit_read.swap(true, Ordering::AcqRel) {
        if let Some(limit) = conn.conn.server_max_streams() {
            ep.conns.server_max_streams(u64::from(limit));
        }
    }
    Ok(checked(resp.status, resp.bytes)?)
}

/// A stream's failure as the client sees it.
fn h2_failure(f: h2::Failure) -> H2Error {
    match f {
        h2::Failure::Unprocessed(why) => H2Error::Unprocessed(why),
        h2::Failure::Failed(why) => H2Error::Task(TaskError::new("read", why)),
    }
}

/// An HTTP/2 attempt's end that is the request's: its bytes or its error.
fn h2_done(done: Result<u64, H2Error>) -> Result<u64, TaskError> {
    match done {
        Ok(n) => Ok(n),
        Err(H2Error::Task(e)) => Err(e),
        Err(H2Error::Unprocessed(why)) => Err(never_processed(&why)),
    }
}

/// The error of a request the server never processed in [`H2_ATTEMPTS`] attempts.
fn never_processed(why: &str) -> TaskError {
    TaskError::new(
        "read",
        format!("{why}; sent {H2_ATTEMPTS} times, the server processed it none of them"),
    )
}

/// Opens a connection (TLS included), recording what it cost and, with `--http2`, the version
/// it speaks: HTTP/2 by prior knowledge over TCP, as ALPN chose over TLS, its requests
/// sharing `template`.
async fn connect(
    ep: &Endpoint,
    task: Option<&TaskPhases>,
    template: &Arc<h2::Template>,
) -> Result<Conn, TaskError> {
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
        None if ep.http2 => handshake_h2(stream, template).await,
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
                        handshake_h2(s, template).await
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

/// The HTTP/2 handshake over any stream; the connection is driven beside the request that
/// opened it (in its task group, or as a task of its own) until it ends.
async fn handshake_h2<I>(io: I, template: &Arc<h2::Template>) -> Result<Conn, TaskError>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (conn, driver) = h2::handshake(io, template.clone())
        .await
        .map_err(|e| TaskError::new("connect", e))?;
    task_group::spawn(driver);
    Ok(Conn::H2(H2Conn(Arc::new(H2ConnInner {
        conn,
        limit_read: AtomicBool::new(false),
    }))))
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
                // What the server decodes: the builder's request, field for field.
                let want = req.into_http2();
                let got = client.h2_request(&requests, i);
                assert_eq!(got.body(), want.body.as_ref());
                let sent = h2::fields_sent(&client.h2_template, &[got.head(), got.head()]);
                assert_eq!(sent[0], h2_fields(&want, true), "task {i}");
                assert_eq!(sent[1], sent[0], "named from the table the second time");
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
