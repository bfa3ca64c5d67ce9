//! The async models' client (`async`, `async-local`, `actor`): raw hyper connections, no layers
//! beyond them (oha's way to its speed, hyper issue 1970), TLS through tokio-rustls.
//!
//! HTTP/1.1: a small pool of idle connections, one request on each at a time. HTTP/2
//! (`--http2`): the requests in flight are streams over `--connections` connections (1 unless
//! given), shared by cloning the sender and opened again when one dies (GOAWAY, closed);
//! h2c by prior knowledge over TCP, `h2` by ALPN over TLS. A TLS server that chooses
//! `http/1.1` gets the HTTP/1.1 pool, and the run records the version spoken.
//!
//! HTTP/2 goes through the `h2` crate directly (the one hyper drives): hyper's HTTP/2 client
//! hands each request to the connection's task over a channel and spawns one more task per
//! request to carry its response back, two wake-ups and a task's allocation per request that
//! h2's own handles do without (docs/benchmarks.md §13 measured the difference).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use super::endpoint::{micros, Endpoint};
use super::request::{HttpRequest, RequestBuilder};
use super::status_error;
use crate::measure::conn::{ConnRecorder, ConnSample, HttpVersion};
use crate::measure::{mono_ns, TaskError};
use crate::{tls, units};

/// A request as hyper and h2 send it: its head, and its body if it has one.
type Head = (hyper::Request<()>, Option<Bytes>);

/// The async client's read buffer per HTTP/1 connection (see [`handshake_h1`]).
const READ_BUF: usize = 4 << 10;

/// The connections of one workload: idle HTTP/1.1 ones, and with `--http2` the shared ones.
pub(super) struct Client {
    pool: Mutex<Vec<http1::SendRequest<Full<Bytes>>>>,
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

/// Task 0's request head as hyper sends it over HTTP/1.1 and over HTTP/2, made once (by
/// [`to_hyper`] from the one builder's request) for a workload whose tasks' requests differ only
/// in their target ([`RequestBuilder::only_target_varies`]): a task's head is a copy of it with
/// the task's URI, instead of its headers built as text and parsed into hyper's types again
/// (15% of the HTTP/2 client's samples at delay 0).
struct Prepared {
    h1: hyper::Request<()>,
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
        let (h1, body) = to_hyper(requests.build(0), hyper::Version::HTTP_11).ok()?;
        let h2 = requests.build(0).into_http2();
        let h2_origin = h2.url.strip_suffix(&h2.target)?.to_string();
        let (h2, _) = to_hyper(h2, hyper::Version::HTTP_2).ok()?;
        Some(Prepared {
            h1,
            h2,
            h2_origin,
            body,
        })
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
    H1(http1::SendRequest<Full<Bytes>>),
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

    /// Task `index`'s head and body as hyper sends them in `version`: a copy of the prepared
    /// head with the task's URI, or the builder's request converted whole.
    fn head(
        &self,
        requests: &RequestBuilder,
        index: usize,
        version: hyper::Version,
    ) -> Result<Head, TaskError> {
        let h2 = version == hyper::Version::HTTP_2;
        let Some(p) = &self.prepared else {
            let req = requests.build(index);
            return to_hyper(if h2 { req.into_http2() } else { req }, version);
        };
        let target = requests.target(index);
        let (mut head, uri) = if h2 {
            (p.h2.clone(), format!("{}{target}", p.h2_origin))
        } else {
            (p.h1.clone(), target)
        };
        *head.uri_mut() =
            hyper::Uri::try_from(uri).map_err(|e| TaskError::new("request", e.to_string()))?;
        Ok((head, p.body.clone()))
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
        if !self.slots.is_empty() && ep.keepalive && !self.fell_back.load(Ordering::Relaxed) {
            return self.fetch_shared(ep, requests, index).await;
        }
        let pooled = if ep.keepalive {
            self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()
        } else {
            None
        };
        let conn = match pooled {
            Some(s) if !s.is_closed() => {
                ep.conns.record(ConnSample::default());
                Conn::H1(s)
            }
            // Boxed: the connect's state (TLS handshake included) is 3.6 KB of the 3.7 KB
            // future, and a request spends most of its life waiting for the response with
            // that space reserved but unused; boxed, it is held only while connecting.
            _ => Box::pin(connect(ep)).await?,
        };
        match conn {
            Conn::H1(s) => self.send_h1(ep, s, requests, index).await,
            // `--http2 --no-keepalive`: one stream on a connection of its own, closed after.
            Conn::H2(c) => {
                send_h2(ep, &c, self.head(requests, index, hyper::Version::HTTP_2)?).await
            }
        }
    }

    /// `--http2` with kept connections: the request as a stream on its slot's connection,
    /// opened first if the slot has none or its connection died.
    async fn fetch_shared(
        &self,
        ep: &Endpoint,
        requests: &RequestBuilder,
        index: usize,
    ) -> Result<u64, TaskError> {
        let slot = &self.slots[self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()];
        let conn = match slot.live() {
            Some(c) => c,
            None => {
                let connecting = slot.connecting.lock().await;
                match slot.live() {
                    // Another request opened it while this one waited.
                    Some(c) => c,
                    None => match Box::pin(connect(ep)).await? {
                        Conn::H2(c) => {
                            *slot.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(c.clone());
                            drop(connecting);
                            return send_h2(
                                ep,
                                &c,
                                self.head(requests, index, hyper::Version::HTTP_2)?,
                            )
                            .await;
                        }
                        Conn::H1(s) => {
                            self.fell_back.store(true, Ordering::Relaxed);
                            drop(connecting);
                            return self.send_h1(ep, s, requests, index).await;
                        }
                    },
                }
            }
        };
        ep.conns.record(ConnSample::default());
        send_h2(
            ep,
            &conn,
            self.head(requests, index, hyper::Version::HTTP_2)?,
        )
        .await
    }

    /// Task `index`'s request on an HTTP/1.1 connection, which goes back to the pool after.
    async fn send_h1(
        &self,
        ep: &Endpoint,
        mut sender: http1::SendRequest<Full<Bytes>>,
        requests: &RequestBuilder,
        index: usize,
    ) -> Result<u64, TaskError> {
        sender
            .ready()
            .await
            .map_err(|e| TaskError::new("connect", e.to_string()))?;
        let (head, body) = self.head(requests, index, hyper::Version::HTTP_11)?;
        let resp = sender
            .send_request(head.map(|()| Full::new(body.unwrap_or_default())))
            .await
            .map_err(|e| TaskError::new("read", e.to_string()))?;
        let (status, n) = read_body(resp).await?;
        if ep.keepalive && !sender.is_closed() {
            self.pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(sender);
        }
        checked(status, n)
    }
}

/// A request (its HTTP/2 head and body) as a stream on `conn`, counted open until its body is
/// read.
async fn send_h2(ep: &Endpoint, conn: &H2Conn, (head, body): Head) -> Result<u64, TaskError> {
    let read = |e: h2::Error| TaskError::new("read", e.to_string());
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
    let resp = resp.await.map_err(read)?;
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

/// A response's status and the body bytes read to its end.
async fn read_body(resp: hyper::Response<Incoming>) -> Result<(u16, u64), TaskError> {
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| TaskError::new("read", e.to_string()))?;
        if let Some(data) = frame.data_ref() {
            n += data.len() as u64;
        }
    }
    Ok((status, n))
}

/// The bytes read, or the error of a status that says the request failed.
fn checked(status: u16, n: u64) -> Result<u64, TaskError> {
    if status >= 400 {
        return Err(status_error(status));
    }
    Ok(n)
}

/// `req` as hyper and h2 send it in `version`, its head and its body apart: the builder's
/// headers in their order (both keep a header map's insertion order and add none to a request
/// whose `Host` and `Content-Length` are given). HTTP/1.1 asks for the origin-form target;
/// HTTP/2 for the whole URL, whose scheme and authority become `:scheme` and `:authority`.
fn to_hyper(req: HttpRequest, version: hyper::Version) -> Result<Head, TaskError> {
    let uri = if version == hyper::Version::HTTP_2 {
        req.url
    } else {
        req.target
    };
    let mut b = hyper::Request::builder()
        .method(req.method.as_str())
        .version(version)
        .uri(uri);
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
async fn connect(ep: &Endpoint) -> Result<Conn, TaskError> {
    let addr = ep.addr_async().await?;
    let t0 = mono_ns();
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| TaskError::new("connect", format!("{addr}: {e}")))?;
    let t1 = mono_ns();
    let _ = stream.set_nodelay(true);
    let mut sample = ConnSample {
        opened: true,
        connect_us: Some(micros(t0, t1)),
        tls_us: None,
    };
    let conn = match ep.tls_h2.as_ref().or(ep.tls.as_ref()) {
        None if ep.http2 => handshake_h2(stream).await,
        None => handshake_h1(TokioIo::new(stream)).await,
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
                    sample.tls_us = Some(micros(t1, mono_ns()));
                    if s.get_ref().1.alpn_protocol() == Some(tls::ALPN_H2) {
                        handshake_h2(s).await
                    } else {
                        handshake_h1(TokioIo::new(s)).await
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

/// hyper's HTTP/1 handshake over any stream; the connection is driven by its own task.
async fn handshake_h1<I>(io: I) -> Result<Conn, TaskError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    // A small exact read buffer: the responses counted here are small, and at ten thousand
    // connections hyper's default (8 KiB, growing) was most of the memory of an in-flight
    // request. Larger bodies are read in more, smaller reads. Header names go out in
    // `Title-Case`, as the builder wrote them, rather than hyper's lowercase.
    let (sender, conn) = http1::Builder::new()
        .read_buf_exact_size(Some(READ_BUF))
        .title_case_headers(true)
        .handshake(io)
        .await
        .map_err(|e| TaskError::new("connect", e.to_string()))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Conn::H1(sender))
}

/// h2's handshake over any stream; the connection is driven by its own task, which marks it
/// closed when it ends. The windows are hyper's defaults (2 MiB a stream, 5 MiB the
/// connection), so that large bodies are not held back by h2's 64 KiB.
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
    tokio::spawn(async move {
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

    /// What hyper is given: method, URI, version, headers in order, body.
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

    #[test]
    fn a_prepared_head_is_the_builders_request_with_the_tasks_target() {
        let same = |o: &WorkloadOptions| {
            let requests = builder("/x?i={i}&r={rand}", o);
            let target = super::super::spec::read_url("http://h:1/", None).unwrap();
            let client = Client::new(&Endpoint::new(&target, o).unwrap(), &requests);
            assert!(client.prepared.is_some(), "only the target varies");
            for i in [0, 1, 77] {
                for version in [hyper::Version::HTTP_11, hyper::Version::HTTP_2] {
                    let req = requests.build(i);
                    let req = if version == hyper::Version::HTTP_2 {
                        req.into_http2()
                    } else {
                        req
                    };
                    let want = to_hyper(req, version).unwrap();
                    let got = client.head(&requests, i, version).unwrap();
                    assert_eq!(shown(got), shown(want));
                }
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
