//! The I/O around one connection's state (`conn.rs`): the handshake, the driver that moves
//! bytes between the socket and the state, and the two futures a request awaits (a stream,
//! then its response).
//!
//! The driver owns the socket and two buffers. It takes the frames requests queued (one swap
//! of the output buffer under the lock) and writes them in one write, reads whatever arrived
//! into a buffer that holds at least one whole frame, and hands it to the state under the
//! lock once a read; the requests it completes are woken after the lock is released. Requests
//! write nothing themselves: a burst of them queues its HEADERS frames and the driver sends
//! them together. Run in the task group of the requests that use the connection (`async`),
//! the lock is never contended.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::conn::{Conn, Failure, Refusal, Response};
use super::frame;
use super::hpack::{Head, Template};

/// The read buffer: at least one frame of the client's largest (16 KiB and its header), and
/// room for the hundred small responses of a burst in one read.
const READ_BUF: usize = 32 << 10;

/// The state, shared by the driver and the requests.
struct Shared {
    conn: Mutex<Conn>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn wake_all(wakes: &mut Vec<Waker>) {
    for w in wakes.drain(..) {
        w.wake();
    }
}

/// A handle on one HTTP/2 connection, cloned by every request that goes out on it; the
/// connection closes (GOAWAY, then the socket) once the last handle is dropped and its
/// streams have ended.
#[derive(Clone)]
pub(crate) struct Connection {
    shared: Arc<Shared>,
    _handle: Arc<Handle>,
}

/// Closes the connection when the last [`Connection`] goes.
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        let driver = {
            let mut c = self.0.lock();
            c.close();
            c.take_driver()
        };
        if let Some(w) = driver {
            w.wake();
        }
    }
}

/// The future that drives a connection: spawned beside the requests that use it.
pub(crate) type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// HTTP/2 over `io`, whose requests share `template`: the client's preface sent and the
/// server's first SETTINGS read, so that the server's limits hold from the first request.
/// The connection, and its driver to spawn.
pub(crate) async fn handshake<I>(
    mut io: I,
    template: Arc<Template>,
) -> Result<(Connection, Driver), String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut conn = Conn::new(template);
    let mut preface = Vec::new();
    conn.take_out(&mut preface);
    io.write_all(&preface)
        .await
        .map_err(|e| format!("sending the HTTP/2 preface: {e}"))?;
    io.flush()
        .await
        .map_err(|e| format!("sending the HTTP/2 preface: {e}"))?;
    let mut buf = vec![0u8; READ_BUF];
    let mut filled = 0;
    while !conn.settings_seen() {
        if let Some(why) = conn.failed() {
            return Err(why.to_string());
        }
        let n = io
            .read(&mut buf[filled..])
            .await
            .map_err(|e| format!("reading the server's HTTP/2 SETTINGS: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection before its HTTP/2 SETTINGS".into());
        }
        filled += n;
        if buf[..filled].starts_with(b"HTTP/1.") {
            return Err("the server answered in HTTP/1.x: it does not speak HTTP/2 by prior knowledge (h2c)".into());
        }
        let used = conn.receive(&buf[..filled]);
        buf.copy_within(used..filled, 0);
        filled -= used;
    }
    if let Some(why) = conn.failed() {
        return Err(why.to_string());
    }
    let shared = Arc::new(Shared {
        conn: Mutex::new(conn),
    });
    let driver = Io {
        shared: shared.clone(),
        io,
        rbuf: buf,
        filled,
        wbuf: Vec::with_capacity(4 << 10),
        wpos: 0,
        unflushed: false,
        wakes: Vec::new(),
    };
    let connection = Connection {
        shared: shared.clone(),
        _handle: Arc::new(Handle(shared)),
    };
    Ok((connection, Box::pin(driver)))
}

impl Connection {
    /// Whether new requests may go on it (not going away, not failed).
    pub(crate) fn accepts_streams(&self) -> bool {
        self.shared.lock().accepts_streams()
    }

    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, if it gave one.
    pub(crate) fn server_max_streams(&self) -> Option<u32> {
        self.shared.lock().server_max_streams()
    }

    /// Opens a stream for a request, waiting while the server's limit of streams are open:
    /// the stream, and how many were open on the connection with it. A connection that takes
    /// no more streams fails it as unprocessed.
    pub(crate) fn open<'a>(
        &'a self,
        head: Head<'a>,
        body: Option<&'a Bytes>,
        traced: bool,
    ) -> Opening<'a> {
        Opening {
            shared: &self.shared,
            head,
            body,
            traced,
            ticket: None,
        }
    }
}

/// A request waiting to open its stream.
pub(crate) struct Opening<'a> {
    shared: &'a Arc<Shared>,
    head: Head<'a>,
    body: Option<&'a Bytes>,
    traced: bool,
    /// Its place in the queue of requests waiting for a stream.
    ticket: Option<u64>,
}

impl Future for Opening<'_> {
    type Output = Result<(Stream, usize), Failure>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut c = this.shared.lock();
        if let Some(t) = this.ticket {
            if c.still_waiting(t, cx.waker()) {
                return Poll::Pending;
            }
            this.ticket = None;
        }
        match c.open(this.head, this.body, this.traced) {
            Ok(o) => {
                let driver = c.driver_to_wake();
                drop(c);
                if let Some(w) = driver {
                    w.wake();
                }
                let stream = Stream {
                    shared: this.shared.clone(),
                    slot: o.slot,
                    id: o.id,
                    done: false,
                };
                Poll::Ready(Ok((stream, o.open)))
            }
            Err(Refusal::Busy) => {
                this.ticket = Some(c.wait_for_stream(cx.waker()));
                Poll::Pending
            }
            Err(Refusal::Gone(why)) => Poll::Ready(Err(Failure::Unprocessed(why))),
        }
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket {
            let mut wakes = Vec::new();
            {
                let mut c = self.shared.lock();
                c.forget_waiter(t);
                c.take_wakes(&mut wakes);
            }
            wake_all(&mut wakes);
        }
    }
}

/// An open stream: its response, once the server ended it. Dropped before that (the
/// request timed out), the stream is reset.
pub(crate) struct Stream {
    shared: Arc<Shared>,
    slot: u32,
    id: u32,
    done: bool,
}

impl Future for Stream {
    type Output = Result<Response, Failure>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let got = this
            .shared
            .lock()
            .poll_response(this.slot, this.id, cx.waker());
        if got.is_ready() {
            this.done = true;
        }
        got
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut wakes = Vec::new();
        {
            let mut c = self.shared.lock();
            c.cancel(self.slot, self.id);
            c.take_wakes(&mut wakes);
            wakes.extend(c.driver_to_wake());
        }
        wake_all(&mut wakes);
    }
}

/// The driver: the socket, what was read of it and what is being written to it.
struct Io<I> {
    shared: Arc<Shared>,
    io: I,
    rbuf: Vec<u8>,
    filled: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    /// Written since the last flush (TLS holds records until flushed).
    unflushed: bool,
    wakes: Vec<Waker>,
}

impl<I: AsyncRead + AsyncWrite + Unpin> Io<I> {
    /// Writes what is queued until done or the socket is full: whether it is full.
    fn write(&mut self, cx: &mut Context<'_>) -> std::io::Result<bool> {
        loop {
            if self.wpos == self.wbuf.len() {
                self.wbuf.clear();
                self.wpos = 0;
                self.shared.lock().take_out(&mut self.wbuf);
                if self.wbuf.is_empty() {
                    break;
                }
            }
            match Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.wpos..]) {
                Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.wpos += n;
                    self.unflushed = true;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(true),
            }
        }
        if self.unflushed {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Reads once: bytes read (0: the server closed), or `None` when nothing is there.
    fn read(&mut self, cx: &mut Context<'_>) -> std::io::Result<Option<usize>> {
        let mut buf = ReadBuf::new(&mut self.rbuf[self.filled..]);
        match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => Ok(Some(buf.filled().len())),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Ok(None),
        }
    }

    /// The connection ended with `why`: every request on it fails.
    fn end(&mut self, why: &str) {
        {
            let mut c = self.shared.lock();
            c.ended(why);
            c.take_wakes(&mut self.wakes);
        }
        wake_all(&mut self.wakes);
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> Future for Io<I> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            let blocked = match this.write(cx) {
                Ok(b) => b,
                Err(e) => {
                    this.end(&format!("writing to the server failed: {e}"));
                    return Poll::Ready(());
                }
            };
            let finished = this.shared.lock().finished();
            if !finished {
                match this.read(cx) {
                    Ok(Some(0)) => {
                        this.end("the server closed the connection");
                        continue;
                    }
                    Ok(Some(n)) => {
                        this.filled += n;
                        {
                            let mut c = this.shared.lock();
                            let used = c.receive(&this.rbuf[..this.filled]);
                            c.take_wakes(&mut this.wakes);
                            this.rbuf.copy_within(used..this.filled, 0);
                            this.filled -= used;
                        }
                        wake_all(&mut this.wakes);
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        this.end(&format!("reading from the server failed: {e}"));
                        continue;
                    }
                }
            }
            let mut c = this.shared.lock();
            if c.finished() {
                if c.failed().is_none() {
                    // Going away or unused, no stream left: say goodbye, then stop.
                    c.farewell();
                    continue;
                }
                if !blocked && !c.has_out() && this.wpos == this.wbuf.len() {
                    c.take_wakes(&mut this.wakes);
                    drop(c);
                    wake_all(&mut this.wakes);
                    return Poll::Ready(());
                }
            }
            if !blocked && c.has_out() {
                continue;
            }
            c.park_driver(cx.waker());
            return Poll::Pending;
        }
    }
}

/// The largest frame the read buffer must hold.
const _: () = assert!(READ_BUF >= frame::HEADER_LEN + frame::DEFAULT_MAX_FRAME as usize);
