//! The async models' client (`async`, `async-local`, `actor`): raw hyper HTTP/1 connections
//! from a small pool, no layers beyond that (oha's way to its speed, hyper issue 1970), TLS
//! through tokio-rustls.

use std::sync::Mutex;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::endpoint::{micros, Endpoint};
use super::request::{HttpRequest, RequestBuilder};
use super::status_error;
use crate::measure::conn::ConnSample;
use crate::measure::{mono_ns, TaskError};
use crate::{tls, units};

/// The async client's read buffer per connection (see [`handshake`]).
const READ_BUF: usize = 4 << 10;

/// The idle connections of one workload.
#[derive(Default)]
pub(super) struct Client {
    pool: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl Client {
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
        let pooled = if ep.keepalive {
            self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()
        } else {
            None
        };
        let mut sender = match pooled {
            Some(s) if !s.is_closed() => {
                ep.conns.record(ConnSample::default());
                s
            }
            // Boxed: the connect's state (TLS handshake included) is 3.6 KB of the 3.7 KB
            // future, and a request spends most of its life waiting for the response with
            // that space reserved but unused; boxed, it is held only while connecting.
            _ => Box::pin(connect(ep)).await?,
        };
        sender
            .ready()
            .await
            .map_err(|e| TaskError::new("connect", e.to_string()))?;
        let resp = sender
            .send_request(to_hyper(requests.build(index))?)
            .await
            .map_err(|e| TaskError::new("read", e.to_string()))?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| TaskError::new("read", e.to_string()))?;
            if let Some(data) = frame.data_ref() {
                n += data.len() as u64;
            }
        }
        if ep.keepalive && !sender.is_closed() {
            self.pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(sender);
        }
        if status >= 400 {
            return Err(status_error(status));
        }
        Ok(n)
    }
}

/// `req` as hyper sends it: the builder's headers in their order (hyper keeps a header map's
/// insertion order and adds none to a request whose `Host` and `Content-Length` are given).
fn to_hyper(req: HttpRequest) -> Result<hyper::Request<Full<Bytes>>, TaskError> {
    let mut b = hyper::Request::builder()
        .method(req.method.as_str())
        .uri(req.target);
    for (name, value) in req.headers {
        b = b.header(name, value);
    }
    b.body(Full::new(req.body.unwrap_or_default()))
        .map_err(|e| TaskError::new("request", e.to_string()))
}

/// Opens a connection (TLS included), recording what it cost.
async fn connect(ep: &Endpoint) -> Result<SendRequest<Full<Bytes>>, TaskError> {
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
    let sender = match &ep.tls {
        None => handshake(TokioIo::new(stream)).await,
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
                    handshake(TokioIo::new(s)).await
                }
                Err(e) => Err(e),
            }
        }
    };
    ep.conns.record(sample);
    sender
}

/// hyper's HTTP/1 handshake over any stream; the connection is driven by its own task.
async fn handshake<I>(io: I) -> Result<SendRequest<Full<Bytes>>, TaskError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    // A small exact read buffer: the responses counted here are small, and at ten thousand
    // connections hyper's default (8 KiB, growing) was most of the memory of an in-flight
    // request. Larger bodies are read in more, smaller reads. Header names go out in
    // `Title-Case`, as the builder wrote them, rather than hyper's lowercase.
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .read_buf_exact_size(Some(READ_BUF))
        .title_case_headers(true)
        .handshake(io)
        .await
        .map_err(|e| TaskError::new("connect", e.to_string()))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}
