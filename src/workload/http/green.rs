//! The `green` model's client: HTTP/1.1 by hand ([`super::wire`]) on `may`'s coroutine
//! sockets, whose reads and writes yield to the other coroutines; TLS through rustls's own
//! blocking stream over such a socket, since rustls does no I/O of its own. Nothing here may
//! touch a thread-local or block in std I/O: a coroutine migrates between threads.
//!
//! A traced task's phases: a new connection's connect and TLS, the request's send, the wait
//! for the response's first bytes, and the read of the rest.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Mutex;

use super::endpoint::{micros, Endpoint};
use super::request::HttpRequest;
use super::status_error;
use super::wire::{read_response_to, write_request};
use crate::measure::conn::ConnSample;
use crate::measure::phases::{PhaseKind, TaskPhases};
use crate::measure::{mono_ns, TaskError};
use crate::os::tls;

/// Read buffer of a green connection: a response head and a small body in one read, without
/// holding 16 KiB per idle connection at ten thousand connections.
const BUF: usize = 4 << 10;

/// A green connection: plain, or rustls's blocking stream over a coroutine socket.
enum Stream {
    Plain(may::net::TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, may::net::TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// The idle connections of one workload, buffered: a response head and its body usually
/// arrive in one read, and the buffer keeps what `httparse` did not consume for the body.
#[derive(Default)]
pub(super) struct Client {
    pool: Mutex<Vec<BufReader<Stream>>>,
}

impl Client {
    /// Makes `req` in the calling coroutine: the body bytes read; its phases into `task` when
    /// the run traces it.
    pub(super) fn fetch(
        &self,
        ep: &Endpoint,
        req: &HttpRequest,
        task: Option<&TaskPhases>,
    ) -> Result<u64, TaskError> {
        let pooled = if ep.keepalive {
            self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()
        } else {
            None
        };
        let mut stream = match pooled {
            Some(s) => {
                ep.conns.record(ConnSample::default());
                s
            }
            None => connect(ep, task)?,
        };
        // The socket's timeouts (set at connect) make a stalled server a `TimedOut` error, or
        // `WouldBlock` where the platform says so.
        let io = |e: std::io::Error| {
            let kind = match e.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timeout",
                _ => "read",
            };
            TaskError::new(kind, e.to_string())
        };
        let writing = task.map(|_| mono_ns());
        let w = stream.get_mut();
        w.write_all(&write_request(req))
            .and_then(|_| w.flush())
            .map_err(io)?;
        // A traced task waits for the response's first bytes apart (the read below would wait
        // for them first anyway): send, wait and read are then its phases.
        let mut first = None;
        if let (Some(t), Some(w)) = (task, writing) {
            let sent = mono_ns();
            t.record(PhaseKind::Send, w, sent);
            stream.fill_buf().map_err(io)?;
            let now = mono_ns();
            t.record(PhaseKind::Wait, sent, now);
            first = Some(now);
        }
        let (status, n, keep) = read_response_to(&mut stream, req.is_head()).map_err(io)?;
        if let (Some(t), Some(f)) = (task, first) {
            t.record(PhaseKind::Read, f, mono_ns());
        }
        if keep && ep.keepalive {
            self.pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(stream);
        }
        if status >= 400 {
            return Err(status_error(status));
        }
        Ok(n)
    }
}

/// Opens a green connection (TLS included), recording what it cost, and its phases into
/// `task` when traced.
fn connect(ep: &Endpoint, task: Option<&TaskPhases>) -> Result<BufReader<Stream>, TaskError> {
    let addr = ep.addr()?;
    let t0 = mono_ns();
    let s = may::net::TcpStream::connect(addr)
        .map_err(|e| TaskError::new("connect", format!("{addr}: {e}")))?;
    let t1 = mono_ns();
    if let Some(t) = task {
        t.record(PhaseKind::Connect, t0, t1);
    }
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(ep.timeout));
    let _ = s.set_write_timeout(Some(ep.timeout));
    let mut sample = ConnSample {
        opened: true,
        connect_us: Some(micros(t0, t1)),
        tls_us: None,
    };
    let stream = match &ep.tls {
        None => Stream::Plain(s),
        Some(config) => {
            let tls_err = |e: String| TaskError::new(tls::KIND, format!("{}: {e}", ep.connect));
            let mut conn = rustls::ClientConnection::new(config.clone(), ep.server_name.clone())
                .map_err(|e| tls_err(e.to_string()))?;
            let mut s = s;
            let shaken = (|| {
                while conn.is_handshaking() {
                    conn.complete_io(&mut s)?;
                }
                Ok::<(), std::io::Error>(())
            })();
            if let Err(e) = shaken {
                ep.conns.record(sample);
                return Err(tls_err(tls::handshake_failure(&e)));
            }
            let t2 = mono_ns();
            sample.tls_us = Some(micros(t1, t2));
            if let Some(t) = task {
                t.record(PhaseKind::Tls, t1, t2);
            }
            Stream::Tls(Box::new(rustls::StreamOwned::new(conn, s)))
        }
    };
    ep.conns.record(sample);
    Ok(BufReader::with_capacity(BUF, stream))
}
