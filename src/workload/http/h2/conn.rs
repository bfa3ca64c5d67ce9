//! One HTTP/2 connection's state, without I/O: bytes from the server go in ([`Conn::receive`]),
//! frames for it come out in one buffer ([`Conn::take_out`]), and requests open streams and
//! collect their responses in between. The driver (`driver.rs`) moves the bytes; this file is
//! RFC 9113's rules for a client that sends requests and counts response bytes.
//!
//! Streams live in one flat array of slots, reused: a slot holds a stream's id, its two
//! windows, what it has received and the waker of the request waiting for it. The streams
//! open on the wire are a list of (id, slot) sorted by id (ids only grow, so a new one is
//! pushed at the end and a frame's stream is a binary search away). No map, no allocation per
//! stream once the array has grown to the connection's concurrency.
//!
//! What a hostile or broken server can make the client hold is bounded: a frame over 16 KiB
//! (the client's `SETTINGS_MAX_FRAME_SIZE`) ends the connection from its header alone; a
//! header block is refused past 64 KiB or 128 frames across CONTINUATION, and a decoded head
//! past 64 KiB fails its stream; the HPACK table holds at most the client's 4,096 bytes;
//! replies owed for PING and SETTINGS that the server does not read are capped.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Poll, Waker};

use bytes::Bytes;

use super::frame::{self, Header};
use super::hpack::{Decoder, Encoder, Head, Template, DEFAULT_TABLE_SIZE};

/// The receive window the client gives each stream (`SETTINGS_INITIAL_WINDOW_SIZE`): hyper's
/// client's default, so that large bodies are not held back by the protocol's 64 KiB.
pub(super) const STREAM_WINDOW: u32 = 2 << 20;

/// The connection's receive window, raised from 64 KiB by a WINDOW_UPDATE in the preface.
pub(super) const CONN_WINDOW: u32 = 5 << 20;

/// The initial window of both sides (RFC 9113 §6.9.2).
const DEFAULT_WINDOW: u32 = 65_535;

/// The largest decoded response head (name and value lengths plus 32 a field, as
/// `SETTINGS_MAX_HEADER_LIST_SIZE` counts them), announced to the server.
pub(super) const MAX_HEADER_LIST: u32 = 64 << 10;

/// The largest encoded header block, across its CONTINUATION frames.
pub(super) const MAX_HEADER_BLOCK: usize = 64 << 10;

/// The most frames one header block may come in (HEADERS and its CONTINUATIONs): a flood of
/// empty CONTINUATION frames grows no buffer, but costs a frame's work each.
pub(super) const MAX_BLOCK_FRAMES: u32 = 128;

/// The most PING and SETTINGS acknowledgements owed at once: a server that sends them faster
/// than it reads the answers would grow the output buffer without end.
const MAX_REPLIES: u32 = 1024;

/// What a request got: the final status, the body bytes, and when its head arrived (for a
/// traced stream; 0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) bytes: u64,
    pub(crate) head_ns: u64,
}

/// Why a request has no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server did not process it (GOAWAY above its stream, REFUSED_STREAM, or the
    /// connection unable to take it): it may be sent again, on another connection.
    Unprocessed(String),
    /// It failed where the server may have processed it.
    Failed(String),
}

/// Why a request could not open a stream now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` are open: wait for one to close.
    Busy,
    /// The connection takes no new stream (going away, failed, out of ids).
    Gone(String),
}

/// A stream opened: where its state is, and the streams open on the connection with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Opened {
    pub(super) slot: u32,
    pub(super) id: u32,
    pub(super) open: usize,
}

/// Where a stream is in its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the final head (1xx heads are read past).
    Head,
    /// The head came; DATA and trailers until END_STREAM.
    Body,
    /// Ended or failed; waiting for its request to collect it.
    Done,
}

/// One stream's place in the flat array.
struct Slot {
    /// 0 when the slot is free.
    id: u32,
    phase: Phase,
    status: u16,
    bytes: u64,
    /// What the client may still send (the server's window for it).
    send_window: i64,
    /// What the server may still send.
    recv_window: i64,
    /// Received since the last WINDOW_UPDATE for the stream.
    unacked: u32,
    /// The request body not sent yet (flow control), from `body_at`.
    body: Bytes,
    body_at: usize,
    /// Whether the client's side has ended (END_STREAM sent).
    local_done: bool,
    traced: bool,
    head_ns: u64,
    failure: Option<Failure>,
    waker: Option<Waker>,
}

impl Slot {
    fn empty() -> Slot {
        Slot {
            id: 0,
            phase: Phase::Done,
            status: 0,
            bytes: 0,
            send_window: 0,
            recv_window: 0,
            unacked: 0,
            body: Bytes::new(),
            body_at: 0,
            local_done: true,
            traced: false,
            head_ns: 0,
            failure: None,
            waker: None,
        }
    }
}

/// A header block arriving over several frames.
struct Block {
    /// Its stream; 0 when no block is open.
    stream: u32,
    end_stream: bool,
    frames: u32,
    bytes: Vec<u8>,
}

/// A connection error: its code and the reason every request on it fails with.
struct ConnError(u32, String);

/// A stream error: the stream is reset with the code and its request fails.
struct StreamError(u32, String);

/// What a frame did wrong: to its connection or to one stream.
enum Broke {
    Conn(ConnError),
    Stream(u32, StreamError),
}

impl From<ConnError> for Broke {
    fn from(e: ConnError) -> Broke {
        Broke::Conn(e)
    }
}

fn conn_err(code: u32, why: impl Into<String>) -> Broke {
    Broke::Conn(ConnError(code, why.into()))
}

/// One connection, from the client's side.
pub(super) struct Conn {
    /// Frames to write, in order.
    out: Vec<u8>,
    template: Arc<Template>,
    encoder: Encoder,
    decoder: Decoder,
    /// The server's settings as they stand.
    max_streams: u32,
    max_streams_said: bool,
    peer_window: i64,
    peer_max_frame: u32,
    /// The connection's windows: what the client may send, what the server may.
    send_window: i64,
    recv_window: i64,
    recv_unacked: u32,
    next_id: u32,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The streams open on the wire, (id, slot), sorted by id. A deque: streams mostly end
    /// in the order they opened, and the oldest leaves without moving the others.
    open: VecDeque<(u32, u32)>,
    /// Slots with body bytes waiting for window.
    blocked: Vec<u32>,
    block: Block,
    settings_seen: bool,
    /// The server's GOAWAY: the last stream it processes.
    goaway: Option<u32>,
    /// Why the connection ended, once it has.
    failed: Option<String>,
    /// Every handle on the connection is gone: close once its streams end.
    closing: bool,
    replies: u32,
    /// Wakers to wake once the lock is released.
    wake: Vec<Waker>,
    /// Requests waiting for a stream (server's limit reached), by ticket.
    waiters: VecDeque<(u64, Waker)>,
    next_ticket: u64,
    /// The driver, parked until there is something to write.
    driver: Option<Waker>,
}

impl Conn {
    /// A connection whose requests share `template`, its preface already in the output: the
    /// client's SETTINGS (no push, its stream window and head limit) and the connection
    /// window raised.
    pub(super) fn new(template: Arc<Template>) -> Conn {
        let mut out = Vec::with_capacity(4 << 10);
        frame::preface(
            &mut out,
            &[
                (frame::ENABLE_PUSH, 0),
                (frame::INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                (frame::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST),
            ],
        );
        frame::window_update(&mut out, 0, CONN_WINDOW - DEFAULT_WINDOW);
        Conn {
            out,
            template,
            encoder: Encoder::new(),
            decoder: Decoder::new(DEFAULT_TABLE_SIZE),
            max_streams: u32::MAX,
            max_streams_said: false,
            peer_window: i64::from(DEFAULT_WINDOW),
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            send_window: i64::from(DEFAULT_WINDOW),
            recv_window: i64::from(CONN_WINDOW),
            recv_unacked: 0,
            next_id: 1,
            slots: Vec::new(),
            free: Vec::new(),
            open: VecDeque::new(),
            blocked: Vec::new(),
            block: Block {
                stream: 0,
                end_stream: false,
                frames: 0,
                bytes: Vec::new(),
            },
            settings_seen: false,
            goaway: None,
            failed: None,
            closing: false,
            replies: 0,
            wake: Vec::new(),
            waiters: VecDeque::new(),
            next_ticket: 0,
            driver: None,
        }
    }

    // ---- The driver's side.

    /// Moves the frames to write into `into` (which the driver has emptied), leaving the
    /// output buffer empty and its allocation with the driver's old one.
    pub(super) fn take_out(&mut self, into: &mut Vec<u8>) {
        std::mem::swap(&mut self.out, into);
        self.replies = 0;
    }

    /// Whether there is something to write.
    pub(super) fn has_out(&self) -> bool {
        !self.out.is_empty()
    }

    /// Parks the driver until a request has frames for it.
    pub(super) fn park_driver(&mut self, waker: &Waker) {
        match &mut self.driver {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
    }

    /// The driver's waker, when a request left frames for it.
    pub(super) fn driver_to_wake(&mut self) -> Option<Waker> {
        if self.out.is_empty() {
            return None;
        }
        self.driver.take()
    }

    /// The wakers of requests to wake, once the lock is released.
    pub(super) fn take_wakes(&mut self, into: &mut Vec<Waker>) {
        into.append(&mut self.wake);
    }

    /// Whether the server's first SETTINGS arrived (the handshake waits for it).
    pub(super) fn settings_seen(&self) -> bool {
        self.settings_seen
    }

    /// Why the connection ended, if it has.
    pub(super) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Whether the driver is done: the connection failed, or it is going away or unused and
    /// no stream is open any more. What is still in the output goes out first.
    pub(super) fn finished(&self) -> bool {
        self.failed.is_some() || ((self.goaway.is_some() || self.closing) && self.open.is_empty())
    }

    /// Whether new requests may go on this connection.
    pub(super) fn accepts_streams(&self) -> bool {
        self.failed.is_none()
            && self.goaway.is_none()
            && !self.closing
            && self.next_id <= frame::MAX_STREAM_ID
    }

    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, if it gave one.
    pub(super) fn server_max_streams(&self) -> Option<u32> {
        self.max_streams_said.then_some(self.max_streams)
    }

    /// Every handle on the connection was dropped: it closes once its streams have ended.
    pub(super) fn close(&mut self) {
        self.closing = true;
    }

    /// The driver is done with a connection that did not fail: a GOAWAY says so politely.
    pub(super) fn farewell(&mut self) {
        if self.failed.is_none() {
            frame::goaway(&mut self.out, 0, frame::NO_ERROR, "");
            self.failed = Some("the connection was closed".into());
        }
    }

    /// The server closed the connection, or reading or writing it failed with `why`.
    pub(super) fn ended(&mut self, why: &str) {
        if self.failed.is_some() {
            return;
        }
        let msg = if self.open.is_empty() {
            why.to_string()
        } else {
            format!("{why} with {} streams open", self.open.len())
        };
        self.fail_all(msg);
    }

    /// Reads the frames at the start of `input`: how many bytes were consumed (a frame not
    /// yet whole is left for the next call). Once the connection has failed, everything.
    pub(super) fn receive(&mut self, input: &[u8]) -> usize {
        let mut at = 0;
        while self.failed.is_none() {
            let (header, payload) = match frame::next(&input[at..], frame::DEFAULT_MAX_FRAME) {
                Ok(Some(f)) => f,
                Ok(None) => return at,
                Err(frame::TooLarge(h)) => {
                    self.conn_error(ConnError(
                        frame::FRAME_SIZE_ERROR,
                        format!(
                            "the server sent a {} frame of {} bytes, over the client's SETTINGS_MAX_FRAME_SIZE of {}",
                            frame::kind_name(h.kind),
                            h.len,
                            frame::DEFAULT_MAX_FRAME
                        ),
                    ));
                    break;
                }
            };
            at += frame::HEADER_LEN + payload.len();
            match self.frame(header, payload) {
                Ok(()) => {}
                Err(Broke::Conn(e)) => self.conn_error(e),
                Err(Broke::Stream(slot, StreamError(code, why))) => self.reset(slot, code, why),
            }
        }
        input.len()
    }

    // ---- The requests' side.

    /// Opens a stream for a request: its HEADERS (and as much of its body as the windows
    /// allow) go into the output. `Busy` while the server's limit of streams are open.
    pub(super) fn open(
        &mut self,
        head: Head<'_>,
        body: Option<&Bytes>,
        traced: bool,
    ) -> Result<Opened, Refusal> {
        if let Some(why) = &self.failed {
            return Err(Refusal::Gone(why.clone()));
        }
        if let Some(last) = self.goaway {
            return Err(Refusal::Gone(format!(
                "the server is going away (GOAWAY, last stream {last})"
            )));
        }
        if self.closing || self.next_id > frame::MAX_STREAM_ID {
            return Err(Refusal::Gone(
                "the connection has used every stream id".into(),
            ));
        }
        if self.open.len() >= self.max_streams as usize {
            return Err(Refusal::Busy);
        }
        let id = self.next_id;
        self.next_id += 2;
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot::empty());
                (self.slots.len() - 1) as u32
            }
        };
        let body = body.filter(|b| !b.is_empty());
        let (encoder, template) = (&mut self.encoder, &self.template);
        frame::headers(
            &mut self.out,
            id,
            body.is_none(),
            self.peer_max_frame,
            |out| encoder.encode(template, head, out),
        );
        self.slots[slot as usize] = Slot {
            id,
            phase: Phase::Head,
            send_window: self.peer_window,
            recv_window: i64::from(STREAM_WINDOW),
            local_done: body.is_none(),
            traced,
            body: body.cloned().unwrap_or_default(),
            ..Slot::empty()
        };
        self.open.push_back((id, slot));
        if body.is_some() {
            self.send_body(slot);
            if !self.slots[slot as usize].local_done {
                self.blocked.push(slot);
            }
        }
        Ok(Opened {
            slot,
            id,
            open: self.open.len(),
        })
    }

    /// The response of the stream in `slot`, once it ended; its slot is freed then.
    pub(super) fn poll_response(
        &mut self,
        slot: u32,
        id: u32,
        waker: &Waker,
    ) -> Poll<Result<Response, Failure>> {
        let s = &mut self.slots[slot as usize];
        if s.id != id {
            return Poll::Ready(Err(Failure::Failed("the stream was lost".into())));
        }
        if s.phase != Phase::Done {
            match &mut s.waker {
                Some(w) if w.will_wake(waker) => {}
                w => *w = Some(waker.clone()),
            }
            return Poll::Pending;
        }
        let got = match s.failure.take() {
            Some(f) => Err(f),
            None => Ok(Response {
                status: s.status,
                bytes: s.bytes,
                head_ns: s.head_ns,
            }),
        };
        self.free_slot(slot);
        Poll::Ready(got)
    }

    /// The request gave up on its stream (a timeout dropped it): reset if still open, freed.
    pub(super) fn cancel(&mut self, slot: u32, id: u32) {
        if self.slots[slot as usize].id != id {
            return;
        }
        if self.slots[slot as usize].phase != Phase::Done {
            frame::rst_stream(&mut self.out, id, frame::CANCEL);
            self.close_stream(slot);
        }
        self.free_slot(slot);
    }

    /// The driver's waker, whatever it has to do.
    pub(super) fn take_driver(&mut self) -> Option<Waker> {
        self.driver.take()
    }

    /// Whether the request with `ticket` still waits in the queue (its waker kept as
    /// `waker`), or was woken for a stream.
    pub(super) fn still_waiting(&mut self, ticket: u64, waker: &Waker) -> bool {
        match self.waiters.binary_search_by_key(&ticket, |(t, _)| *t) {
            Ok(i) => {
                let w = &mut self.waiters[i].1;
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Queues a request waiting for a stream: its ticket.
    pub(super) fn wait_for_stream(&mut self, waker: &Waker) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiters.push_back((ticket, waker.clone()));
        ticket
    }

    /// A waiting request went away: out of the queue, or, if it was already woken for a
    /// stream it will not take, that stream's turn passed to the next.
    pub(super) fn forget_waiter(&mut self, ticket: u64) {
        match self.waiters.binary_search_by_key(&ticket, |(t, _)| *t) {
            Ok(i) => {
                self.waiters.remove(i);
            }
            Err(_) => self.wake_waiters(1),
        }
    }

    // ---- Frames.

    fn frame(&mut self, h: Header, payload: &[u8]) -> Result<(), Broke> {
        if self.block.stream != 0 && h.kind != frame::CONTINUATION {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!(
                    "the server sent a {} frame inside stream {}'s header block",
                    frame::kind_name(h.kind),
                    self.block.stream
                ),
            ));
        }
        match h.kind {
            frame::DATA => self.data(h, payload),
            frame::HEADERS => self.headers(h, payload),
            frame::CONTINUATION => self.continuation(h, payload),
            frame::RST_STREAM => {
                self.exact(h, payload, 4, false)?;
                self.rst_stream(h.stream, frame::read_u32(payload))
            }
            frame::SETTINGS => self.settings(h, payload),
            frame::PING => {
                self.exact(h, payload, 8, true)?;
                if !h.has(frame::ACK) {
                    self.reply()?;
                    let mut data = [0u8; 8];
                    data.copy_from_slice(payload);
                    frame::ping_ack(&mut self.out, &data);
                }
                Ok(())
            }
            frame::GOAWAY => self.goaway(h, payload),
            frame::WINDOW_UPDATE => self.window_update(h, payload),
            frame::PRIORITY => {
                if h.stream == 0 {
                    return Err(conn_err(
                        frame::PROTOCOL_ERROR,
                        "the server sent PRIORITY on stream 0",
                    ));
                }
                Ok(())
            }
            frame::PUSH_PROMISE => Err(conn_err(
                frame::PROTOCOL_ERROR,
                "the server sent PUSH_PROMISE though the client's SETTINGS turned push off",
            )),
            // Unknown types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    /// Checks a control frame's stream (0 for a connection frame, else not 0) and length.
    fn exact(&self, h: Header, payload: &[u8], len: usize, on_conn: bool) -> Result<(), Broke> {
        if (h.stream == 0) != on_conn {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!(
                    "the server sent {} on stream {}",
                    frame::kind_name(h.kind),
                    h.stream
                ),
            ));
        }
        if payload.len() != len {
            return Err(conn_err(
                frame::FRAME_SIZE_ERROR,
                format!(
                    "the server sent a {} frame of {} bytes (it has {len})",
                    frame::kind_name(h.kind),
                    payload.len()
                ),
            ));
        }
        Ok(())
    }

    /// One more acknowledgement owed, within the cap.
    fn reply(&mut self) -> Result<(), Broke> {
        self.replies += 1;
        if self.replies > MAX_REPLIES {
            return Err(conn_err(
                frame::ENHANCE_YOUR_CALM,
                format!(
                    "the server sent over {MAX_REPLIES} PING or SETTINGS frames without reading the acknowledgements"
                ),
            ));
        }
        Ok(())
    }

    /// Whether `id` is a stream the client never opened (even: the server's, which it may not
    /// open; odd: not yet used).
    fn idle(&self, id: u32) -> bool {
        id.is_multiple_of(2) || id >= self.next_id
    }

    /// The slot of open stream `id`: most often the oldest (answers come in about the order
    /// of their requests), else a binary search.
    fn find(&self, id: u32) -> Option<u32> {
        match self.open.front() {
            Some(&(first, slot)) if first == id => Some(slot),
            _ => self
                .open
                .binary_search_by_key(&id, |&(i, _)| i)
                .ok()
                .map(|i| self.open[i].1),
        }
    }

    fn never_opened(&self, h: Header) -> Broke {
        conn_err(
            frame::PROTOCOL_ERROR,
            format!(
                "the server sent {} on stream {}, which the client never opened",
                frame::kind_name(h.kind),
                h.stream
            ),
        )
    }

    /// A payload with its padding removed (PADDED: a length byte first, that many bytes last).
    fn unpad<'a>(&self, h: Header, payload: &'a [u8]) -> Result<&'a [u8], Broke> {
        if !h.has(frame::PADDED) {
            return Ok(payload);
        }
        match payload.split_first() {
            Some((&pad, rest)) if usize::from(pad) <= rest.len() => {
                Ok(&rest[..rest.len() - usize::from(pad)])
            }
            _ => Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!(
                    "the server sent a {} frame on stream {} padded past its end",
                    frame::kind_name(h.kind),
                    h.stream
                ),
            )),
        }
    }

    fn data(&mut self, h: Header, payload: &[u8]) -> Result<(), Broke> {
        if h.stream == 0 {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                "the server sent DATA on stream 0",
            ));
        }
        if self.idle(h.stream) {
            return Err(self.never_opened(h));
        }
        // The whole payload, padding too, counts against both windows.
        let len = payload.len() as u32;
        self.recv_window -= i64::from(len);
        if self.recv_window < 0 {
            return Err(conn_err(
                frame::FLOW_CONTROL_ERROR,
                "the server sent past the connection's window",
            ));
        }
        // Read at once: the server may send as much again.
        self.recv_unacked += len;
        if self.recv_unacked >= CONN_WINDOW / 2 {
            frame::window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_window += i64::from(self.recv_unacked);
            self.recv_unacked = 0;
        }
        let data = self.unpad(h, payload)?;
        // A stream the client reset or gave up: its frames in flight are dropped.
        let Some(slot) = self.find(h.stream) else {
            return Ok(());
        };
        let s = &mut self.slots[slot as usize];
        s.recv_window -= i64::from(len);
        if s.recv_window < 0 {
            return Err(Broke::Stream(
                slot,
                StreamError(
                    frame::FLOW_CONTROL_ERROR,
                    format!("the server sent past stream {}'s window", h.stream),
                ),
            ));
        }
        if s.phase != Phase::Body {
            return Err(Broke::Stream(
                slot,
                StreamError(
                    frame::PROTOCOL_ERROR,
                    format!(
                        "the server sent DATA on stream {} before its response head",
                        h.stream
                    ),
                ),
            ));
        }
        s.bytes += data.len() as u64;
        if h.has(frame::END_STREAM) {
            self.finish(slot);
            return Ok(());
        }
        let s = &mut self.slots[slot as usize];
        s.unacked += len;
        if s.unacked >= STREAM_WINDOW / 2 {
            frame::window_update(&mut self.out, h.stream, s.unacked);
            s.recv_window += i64::from(s.unacked);
            s.unacked = 0;
        }
        Ok(())
    }

    fn headers(&mut self, h: Header, payload: &[u8]) -> Result<(), Broke> {
        if h.stream == 0 {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                "the server sent HEADERS on stream 0",
            ));
        }
        let mut fragment = self.unpad(h, payload)?;
        if h.has(frame::PRIORITY_FLAG) {
            fragment = fragment.get(5..).ok_or_else(|| {
                conn_err(
                    frame::FRAME_SIZE_ERROR,
                    format!(
                        "the server sent a HEADERS frame on stream {} too short for its priority",
                        h.stream
                    ),
                )
            })?;
        }
        let end_stream = h.has(frame::END_STREAM);
        if h.has(frame::END_HEADERS) {
            return self.header_block(h.stream, end_stream, fragment);
        }
        self.block.stream = h.stream;
        self.block.end_stream = end_stream;
        self.block.frames = 1;
        self.block.bytes.clear();
        self.block.bytes.extend_from_slice(fragment);
        Ok(())
    }

    fn continuation(&mut self, h: Header, payload: &[u8]) -> Result<(), Broke> {
        if self.block.stream == 0 || h.stream != self.block.stream {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!(
                    "the server sent CONTINUATION on stream {} with no header block to continue",
                    h.stream
                ),
            ));
        }
        self.block.frames += 1;
        if self.block.frames > MAX_BLOCK_FRAMES {
            return Err(conn_err(
                frame::ENHANCE_YOUR_CALM,
                format!(
                    "the server sent stream {}'s header block in over {MAX_BLOCK_FRAMES} frames (the client's limit)",
                    h.stream
                ),
            ));
        }
        if self.block.bytes.len() + payload.len() > MAX_HEADER_BLOCK {
            return Err(conn_err(
                frame::ENHANCE_YOUR_CALM,
                format!(
                    "the server sent a header block over {MAX_HEADER_BLOCK} bytes on stream {} (the client's limit)",
                    h.stream
                ),
            ));
        }
        self.block.bytes.extend_from_slice(payload);
        if !h.has(frame::END_HEADERS) {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.block.bytes);
        let (stream, end_stream) = (self.block.stream, self.block.end_stream);
        self.block.stream = 0;
        let done = self.header_block(stream, end_stream, &bytes);
        self.block.bytes = bytes;
        done
    }

    /// A whole header block: decoded whatever its stream (the HPACK table follows every
    /// block), then applied to the stream if it is still open.
    fn header_block(&mut self, id: u32, end_stream: bool, block: &[u8]) -> Result<(), Broke> {
        let mut status: Option<Result<u16, ()>> = None;
        let mut list = 0usize;
        self.decoder
            .decode(block, |name, value| {
                list += name.len() + value.len() + 32;
                if name == b":status" && status.is_none() {
                    status = Some(parse_status(value));
                }
            })
            .map_err(|e| {
                conn_err(
                    frame::COMPRESSION_ERROR,
                    format!(
                        "the server's header block on stream {id} cannot be decoded: {}",
                        e.0
                    ),
                )
            })?;
        if self.idle(id) {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!("the server sent HEADERS on stream {id}, which the client never opened"),
            ));
        }
        let Some(slot) = self.find(id) else {
            return Ok(());
        };
        let stream_error = |code, why: String| Err(Broke::Stream(slot, StreamError(code, why)));
        if list > MAX_HEADER_LIST as usize {
            return stream_error(
                frame::PROTOCOL_ERROR,
                format!(
                    "the server's response head on stream {id} is {list} bytes decoded, over the client's SETTINGS_MAX_HEADER_LIST_SIZE of {MAX_HEADER_LIST}"
                ),
            );
        }
        let s = &mut self.slots[slot as usize];
        match s.phase {
            Phase::Head => match status {
                Some(Ok(code)) if (100..200).contains(&code) => {
                    if end_stream {
                        return stream_error(
                            frame::PROTOCOL_ERROR,
                            format!("the server ended stream {id} on an informational {code}"),
                        );
                    }
                }
                Some(Ok(code)) => {
                    s.status = code;
                    s.phase = Phase::Body;
                    if s.traced {
                        s.head_ns = crate::measure::mono_ns();
                    }
                    if end_stream {
                        self.finish(slot);
                    }
                }
                Some(Err(())) => {
                    return stream_error(
                        frame::PROTOCOL_ERROR,
                        format!("the server's response on stream {id} has a malformed :status"),
                    )
                }
                None => {
                    return stream_error(
                        frame::PROTOCOL_ERROR,
                        format!("the server's response on stream {id} has no :status"),
                    )
                }
            },
            // Trailers, which end the stream.
            Phase::Body => {
                if !end_stream {
                    return stream_error(
                        frame::PROTOCOL_ERROR,
                        format!("the server sent a second head on stream {id} without END_STREAM"),
                    );
                }
                self.finish(slot);
            }
            Phase::Done => {}
        }
        Ok(())
    }

    fn rst_stream(&mut self, id: u32, code: u32) -> Result<(), Broke> {
        if self.idle(id) {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!("the server sent RST_STREAM on stream {id}, which the client never opened"),
            ));
        }
        let Some(slot) = self.find(id) else {
            return Ok(());
        };
        let failure = if code == frame::REFUSED_STREAM {
            Failure::Unprocessed(format!(
                "the server refused stream {id} (REFUSED_STREAM) before processing it"
            ))
        } else {
            Failure::Failed(format!(
                "the server reset stream {id} ({})",
                frame::error_name(code)
            ))
        };
        self.fail(slot, failure);
        Ok(())
    }

    fn settings(&mut self, h: Header, payload: &[u8]) -> Result<(), Broke> {
        if h.stream != 0 {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!("the server sent SETTINGS on stream {}", h.stream),
            ));
        }
        if h.has(frame::ACK) {
            if !payload.is_empty() {
                return Err(conn_err(
                    frame::FRAME_SIZE_ERROR,
                    "the server sent a SETTINGS acknowledgement with a payload",
                ));
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(conn_err(
                frame::FRAME_SIZE_ERROR,
                format!(
                    "the server sent a SETTINGS frame of {} bytes (not a multiple of 6)",
                    payload.len()
                ),
            ));
        }
        for setting in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([setting[0], setting[1]]);
            let value = frame::read_u32(&setting[2..]);
            match id {
                frame::HEADER_TABLE_SIZE => self.encoder.peer_table_size(value),
                frame::ENABLE_PUSH if value != 0 => {
                    return Err(conn_err(
                        frame::PROTOCOL_ERROR,
                        format!(
                        "the server sent SETTINGS_ENABLE_PUSH {value} (a server may send only 0)"
                    ),
                    ))
                }
                frame::MAX_CONCURRENT_STREAMS => {
                    let more = value.saturating_sub(self.max_streams.max(self.open.len() as u32));
                    self.max_streams = value;
                    self.max_streams_said = true;
                    self.wake_waiters(more as usize);
                }
                frame::INITIAL_WINDOW_SIZE => {
                    if i64::from(value) > frame::MAX_WINDOW {
                        return Err(conn_err(
                            frame::FLOW_CONTROL_ERROR,
                            format!("the server sent SETTINGS_INITIAL_WINDOW_SIZE {value}, over 2^31 - 1"),
                        ));
                    }
                    let delta = i64::from(value) - self.peer_window;
                    self.peer_window = i64::from(value);
                    for &(id, slot) in &self.open {
                        let s = &mut self.slots[slot as usize];
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW {
                            return Err(conn_err(
                                frame::FLOW_CONTROL_ERROR,
                                format!("SETTINGS_INITIAL_WINDOW_SIZE {value} takes stream {id}'s window over 2^31 - 1"),
                            ));
                        }
                    }
                }
                frame::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME..=frame::MAX_FRAME_LIMIT).contains(&value) {
                        return Err(conn_err(
                            frame::PROTOCOL_ERROR,
                            format!("the server sent SETTINGS_MAX_FRAME_SIZE {value}, outside 16384 to 16777215"),
                        ));
                    }
                    self.peer_max_frame = value;
                }
                // SETTINGS_MAX_HEADER_LIST_SIZE is advice, and concur's heads are small;
                // unknown settings are ignored (RFC 9113 §6.5.2).
                _ => {}
            }
        }
        self.reply()?;
        frame::settings_ack(&mut self.out);
        self.settings_seen = true;
        self.flush_blocked();
        Ok(())
    }

    fn goaway(&mut self, h: Header, payload: &[u8]) -> Result<(), Broke> {
        if h.stream != 0 || payload.len() < 8 {
            return Err(conn_err(
                frame::PROTOCOL_ERROR,
                format!(
                    "the server sent a malformed GOAWAY ({} bytes on stream {})",
                    payload.len(),
                    h.stream
                ),
            ));
        }
        let last = frame::read_u32(payload) & frame::MAX_STREAM_ID;
        let code = frame::read_u32(&payload[4..]);
        let last = self.goaway.map_or(last, |l| l.min(last));
        self.goaway = Some(last);
        let debug = String::from_utf8_lossy(&payload[8..payload.len().min(8 + 120)]);
        let debug = debug.trim();
        let said = if debug.is_empty() {
            frame::error_name(code)
        } else {
            format!("{}: {debug:?}", frame::error_name(code))
        };
        let above: Vec<(u32, u32)> = self
            .open
            .iter()
            .filter(|(id, _)| *id > last)
            .copied()
            .collect();
        for (id, slot) in above {
            self.fail(
                slot,
                Failure::Unprocessed(format!(
                    "the server went away before processing stream {id} (GOAWAY {said}, last stream {last})"
                )),
            );
        }
        // Those waiting for a stream go to another connection.
        self.wake_waiters(self.waiters.len());
        Ok(())
    }

    fn window_update(&mut self, h: Header, payload: &[u8]) -> Result<(), Broke> {
        if payload.len() != 4 {
            return Err(conn_err(
                frame::FRAME_SIZE_ERROR,
                format!(
                    "the server sent a WINDOW_UPDATE frame of {} bytes (it has 4)",
                    payload.len()
                ),
            ));
        }
        let increment = i64::from(frame::read_u32(payload) & frame::MAX_STREAM_ID);
        if h.stream == 0 {
            if increment == 0 {
                return Err(conn_err(
                    frame::PROTOCOL_ERROR,
                    "the server sent a connection WINDOW_UPDATE of 0",
                ));
            }
            // Checked before it is added: a failed connection keeps a window within bounds.
            if self.send_window + increment > frame::MAX_WINDOW {
                return Err(conn_err(
                    frame::FLOW_CONTROL_ERROR,
                    "the server's WINDOW_UPDATE takes the connection's window over 2^31 - 1",
                ));
            }
            self.send_window += increment;
        } else {
            if self.idle(h.stream) {
                return Err(self.never_opened(h));
            }
            let Some(slot) = self.find(h.stream) else {
                return Ok(());
            };
            let s = &mut self.slots[slot as usize];
            if increment == 0 {
                return Err(Broke::Stream(
                    slot,
                    StreamError(
                        frame::PROTOCOL_ERROR,
                        format!(
                            "the server sent a WINDOW_UPDATE of 0 on stream {}",
                            h.stream
                        ),
                    ),
                ));
            }
            if s.send_window + increment > frame::MAX_WINDOW {
                return Err(Broke::Stream(
                    slot,
                    StreamError(
                        frame::FLOW_CONTROL_ERROR,
                        format!(
                            "the server's WINDOW_UPDATE takes stream {}'s window over 2^31 - 1",
                            h.stream
                        ),
                    ),
                ));
            }
            s.send_window += increment;
        }
        self.flush_blocked();
        Ok(())
    }

    // ---- Stream and connection ends.

    /// Sends what the windows allow of the body of the stream in `slot`.
    fn send_body(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        while s.body_at < s.body.len() {
            let room = self
                .send_window
                .min(s.send_window)
                .min(i64::from(self.peer_max_frame));
            if room <= 0 {
                return;
            }
            let n = (s.body.len() - s.body_at).min(room as usize);
            let end = s.body_at + n == s.body.len();
            frame::data(&mut self.out, s.id, &s.body[s.body_at..s.body_at + n], end);
            s.body_at += n;
            self.send_window -= n as i64;
            s.send_window -= n as i64;
        }
        s.local_done = true;
        s.body = Bytes::new();
    }

    /// Sends what the windows now allow of every body waiting for them.
    fn flush_blocked(&mut self) {
        let mut i = 0;
        while i < self.blocked.len() {
            let slot = self.blocked[i];
            self.send_body(slot);
            if self.slots[slot as usize].local_done {
                self.blocked.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// The stream in `slot` ended well: its request is woken.
    fn finish(&mut self, slot: u32) {
        if !self.slots[slot as usize].local_done {
            // The server answered before the body was all sent: the rest is not wanted.
            frame::rst_stream(&mut self.out, self.slots[slot as usize].id, frame::CANCEL);
        }
        self.close_stream(slot);
        let s = &mut self.slots[slot as usize];
        s.phase = Phase::Done;
        if let Some(w) = s.waker.take() {
            self.wake.push(w);
        }
    }

    /// The stream in `slot` failed with `failure`: its request is woken.
    fn fail(&mut self, slot: u32, failure: Failure) {
        self.close_stream(slot);
        let s = &mut self.slots[slot as usize];
        s.phase = Phase::Done;
        s.failure = Some(failure);
        if let Some(w) = s.waker.take() {
            self.wake.push(w);
        }
    }

    /// A stream error: reset the stream with `code`, fail its request with `why`.
    fn reset(&mut self, slot: u32, code: u32, why: String) {
        frame::rst_stream(&mut self.out, self.slots[slot as usize].id, code);
        self.fail(slot, Failure::Failed(why));
    }

    /// Takes the stream in `slot` off the wire: no longer open, counted or blocked.
    fn close_stream(&mut self, slot: u32) {
        let id = self.slots[slot as usize].id;
        let at = match self.open.front() {
            Some(&(first, _)) if first == id => Ok(0),
            _ => self.open.binary_search_by_key(&id, |&(i, _)| i),
        };
        if let Ok(i) = at {
            self.open.remove(i);
            if self.open.len() < self.max_streams as usize {
                self.wake_waiters(1);
            }
        }
        if let Some(i) = self.blocked.iter().position(|&b| b == slot) {
            self.blocked.swap_remove(i);
        }
        let s = &mut self.slots[slot as usize];
        s.local_done = true;
        s.body = Bytes::new();
    }

    fn free_slot(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.id = 0;
        s.waker = None;
        s.failure = None;
        self.free.push(slot);
    }

    /// Wakes the first `n` requests waiting for a stream.
    fn wake_waiters(&mut self, n: usize) {
        for _ in 0..n {
            match self.waiters.pop_front() {
                Some((_, w)) => self.wake.push(w),
                None => break,
            }
        }
    }

    /// A connection error: GOAWAY with its code, and every request on it fails.
    fn conn_error(&mut self, ConnError(code, why): ConnError) {
        if self.failed.is_some() {
            return;
        }
        frame::goaway(&mut self.out, 0, code, &why);
        self.fail_all(why);
    }

    /// The connection is over: every open stream fails with `why`, every waiter is woken.
    fn fail_all(&mut self, why: String) {
        let open = std::mem::take(&mut self.open);
        for (_, slot) in open {
            let s = &mut self.slots[slot as usize];
            s.phase = Phase::Done;
            s.local_done = true;
            s.body = Bytes::new();
            s.failure = Some(Failure::Failed(why.clone()));
            if let Some(w) = s.waker.take() {
                self.wake.push(w);
            }
        }
        self.blocked.clear();
        self.failed = Some(why);
        self.wake_waiters(self.waiters.len());
        if let Some(w) = self.driver.take() {
            self.wake.push(w);
        }
    }
}

/// The `h2_frames` fuzz target's harness: the bytes after the first are a server's side of a
/// connection on which the client opened three streams (one with a 70,000-byte body, past
/// the initial windows), fed whole and in pieces of 1 to 64 bytes (the first byte's low six
/// bits). Checked: no panic; the same responses, failure and output either way; every frame
/// the client wrote whole; windows within 2^31 - 1; and the same bytes decoded as one HPACK
/// block keep the table within its bound.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_server_bytes(data: &[u8]) {
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    super::hpack::fuzz_block(bytes);
    let piece = usize::from(first & 63) + 1;
    let whole = fuzz_feed(bytes, bytes.len().max(1));
    let split = fuzz_feed(bytes, piece);
    assert_eq!(whole, split, "whole and in pieces of {piece}");
}

/// What a connection made of `bytes` fed `piece` bytes at a time: each stream's outcome, the
/// connection's failure and everything the client wrote after its preface.
#[cfg(feature = "fuzzing")]
fn fuzz_feed(bytes: &[u8], piece: usize) -> (Vec<String>, Option<String>, Vec<u8>) {
    let fields: Vec<(String, String)> =
        [(":method", "GET"), (":scheme", "http"), (":authority", "h")]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
    let mut c = Conn::new(Arc::new(Template::new(&fields, true)));
    c.take_out(&mut Vec::new());
    // The server's (empty) SETTINGS, so that streams open.
    c.receive(&[0, 0, 0, frame::SETTINGS, 0, 0, 0, 0, 0]);
    let body = Bytes::from(vec![b'b'; 70_000]);
    let streams: Vec<Opened> = (0..3)
        .filter_map(|i| {
            c.open(Head::Path("/f"), (i == 1).then_some(&body), false)
                .ok()
        })
        .collect();
    assert_eq!(streams.len(), 3);
    let mut pending = Vec::new();
    for chunk in bytes.chunks(piece) {
        pending.extend_from_slice(chunk);
        let used = c.receive(&pending);
        assert!(used <= pending.len());
        pending.drain(..used);
        assert!(c.send_window <= frame::MAX_WINDOW && c.recv_window >= 0);
        assert!(c.open.len() <= streams.len());
        for &(_, slot) in &c.open {
            let s = &c.slots[slot as usize];
            assert!(s.send_window <= frame::MAX_WINDOW && s.recv_window >= 0);
        }
    }
    let mut out = Vec::new();
    c.take_out(&mut out);
    let mut at = 0;
    while at < out.len() {
        match frame::next(&out[at..], frame::MAX_FRAME_LIMIT) {
            Ok(Some((_, p))) => at += frame::HEADER_LEN + p.len(),
            other => panic!("the client wrote a broken frame at {at}: {other:?}"),
        }
    }
    let outcomes = streams
        .iter()
        .map(|o| format!("{:?}", c.poll_response(o.slot, o.id, Waker::noop())))
        .collect();
    (outcomes, c.failed.clone(), out)
}

/// `benches/icount.rs`'s `h2_exchange` path: one request on a connection in its steady state,
/// as `async` sends them to `concur serve` at delay 0: its HEADERS encoded (the template's
/// fields by index, the path a literal), `concur serve`'s answer read (a 9-byte head of
/// indexed fields and a Huffman `content-length`, 10 body bytes) and the response collected.
/// The answers are hyper's, taken from a running `concur serve`.
#[cfg(feature = "fuzzing")]
pub(crate) struct BenchExchange {
    conn: Conn,
    answer: Vec<u8>,
    out: Vec<u8>,
}

#[cfg(feature = "fuzzing")]
impl BenchExchange {
    /// The target of every request.
    const PATH: &'static str = "/add?delay=0&name=abcdefghij";

    /// A connection past its handshake and its first three answers, whose heads filled the
    /// HPACK table as they did from the server.
    pub(crate) fn new() -> BenchExchange {
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .filter_map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
                .collect()
        };
        let frame = |kind: u8, flags: u8, stream: u32, payload: &[u8]| {
            let len = payload.len() as u32;
            let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(payload);
            f
        };
        let fields: Vec<(String, String)> = [
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "127.0.0.1:8080"),
            ("user-agent", "concur/0.1.0"),
            ("accept", "*/*"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        let mut conn = Conn::new(Arc::new(Template::new(&fields, true)));
        let body = b"ok: added\n";
        let mut first = frame(
            frame::SETTINGS,
            0,
            0,
            &hex("000300000080000400100000000500004000000600004000"),
        );
        first.extend(frame(frame::SETTINGS, frame::ACK, 0, b""));
        first.extend(frame(frame::WINDOW_UPDATE, 0, 0, &hex("000f0001")));
        let heads = [
            "885f901d75d0620d263d4c1c892a56426c28e9408a416cee5b1649a935537f8b90b40fd7dc96d9001700010f0d82083f6196dd6d5f4a01c52f948a080271403b702d5c036a62d1bf",
            "88c0bf0f0d82083f6196dd6d5f4a01c52f948a080271403b702d5c038a62d1bf",
            "88c1c00f0d82083fbe",
        ];
        conn.receive(&first);
        for (i, head) in heads.iter().enumerate() {
            let Ok(o) = conn.open(Head::Path(Self::PATH), None, false) else {
                panic!("stream {i} does not open");
            };
            let mut answer = frame(frame::HEADERS, frame::END_HEADERS, o.id, &hex(head));
            answer.extend(frame(frame::DATA, frame::END_STREAM, o.id, body));
            conn.receive(&answer);
            assert_eq!(
                conn.poll_response(o.slot, o.id, Waker::noop()),
                Poll::Ready(Ok(Response {
                    status: 200,
                    bytes: 10,
                    head_ns: 0
                }))
            );
        }
        let mut answer = frame(frame::HEADERS, frame::END_HEADERS, 0, &hex(heads[2]));
        answer.extend(frame(frame::DATA, frame::END_STREAM, 0, body));
        conn.take_out(&mut Vec::new());
        BenchExchange {
            conn,
            answer,
            out: Vec::with_capacity(4 << 10),
        }
    }

    /// One request and its answer: (status, body bytes).
    pub(crate) fn one(&mut self) -> (u16, u64) {
        let Ok(o) = self.conn.open(Head::Path(Self::PATH), None, false) else {
            panic!("the stream does not open");
        };
        self.out.clear();
        self.conn.take_out(&mut self.out);
        // The answer's two frames, on this stream.
        let data_at = frame::HEADER_LEN + self.answer[2] as usize;
        let id = o.id.to_be_bytes();
        self.answer[5..9].copy_from_slice(&id);
        self.answer[data_at + 5..data_at + 9].copy_from_slice(&id);
        assert_eq!(self.conn.receive(&self.answer), self.answer.len());
        match self.conn.poll_response(o.slot, o.id, Waker::noop()) {
            Poll::Ready(Ok(r)) => (r.status, r.bytes),
            other => panic!("no response: {other:?}"),
        }
    }
}

/// A `:status` value: three digits.
fn parse_status(value: &[u8]) -> Result<u16, ()> {
    match value {
        [a, b, c] if value.iter().all(u8::is_ascii_digit) => {
            Ok(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a server writes it.
    fn f(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn settings(list: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (id, v) in list {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        f(frame::SETTINGS, 0, 0, &p)
    }

    /// `:status 200` (static index 8).
    const OK: &[u8] = &[0x88];

    fn template() -> Arc<Template> {
        let fields = [
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "h:1"),
        ];
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Arc::new(Template::new(&fields, true))
    }

    /// A connection past its handshake (the server's SETTINGS given), its output emptied.
    fn conn(server: &[(u16, u32)]) -> Conn {
        let mut c = Conn::new(template());
        c.take_out(&mut Vec::new());
        let s = settings(server);
        assert_eq!(c.receive(&s), s.len());
        assert!(c.settings_seen() && c.failed().is_none());
        assert_eq!(kinds(&drain(&mut c)), [(frame::SETTINGS, 0)]);
        c
    }

    /// The frames the client wrote since last asked: (kind, flags, stream, payload).
    fn drain(c: &mut Conn) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut out = Vec::new();
        c.take_out(&mut out);
        let mut frames = Vec::new();
        let mut at = 0;
        while let Some((h, p)) = frame::next(&out[at..], frame::MAX_FRAME_LIMIT).unwrap() {
            frames.push((h.kind, h.flags, h.stream, p.to_vec()));
            at += frame::HEADER_LEN + p.len();
        }
        assert_eq!(at, out.len());
        frames
    }

    fn kinds(frames: &[(u8, u8, u32, Vec<u8>)]) -> Vec<(u8, u32)> {
        frames.iter().map(|(k, _, s, _)| (*k, *s)).collect()
    }

    fn open(c: &mut Conn, path: &str) -> Opened {
        c.open(Head::Path(path), None, false).unwrap()
    }

    fn response(c: &mut Conn, o: Opened) -> Poll<Result<Response, Failure>> {
        c.poll_response(o.slot, o.id, Waker::noop())
    }

    fn ok(status: u16, bytes: u64) -> Poll<Result<Response, Failure>> {
        Poll::Ready(Ok(Response {
            status,
            bytes,
            head_ns: 0,
        }))
    }

    fn feed(c: &mut Conn, bytes: &[u8]) {
        assert_eq!(c.receive(bytes), bytes.len());
    }

    #[test]
    fn the_preface_asks_for_no_push_and_large_windows() {
        let mut c = Conn::new(template());
        let mut out = Vec::new();
        c.take_out(&mut out);
        assert!(out.starts_with(frame::PREFACE));
        let frames = {
            let mut c2 = Conn::new(template());
            let mut o = Vec::new();
            c2.take_out(&mut o);
            let mut at = frame::PREFACE.len();
            let mut v = Vec::new();
            while let Some((h, p)) = frame::next(&o[at..], 1 << 20).unwrap() {
                v.push((h.kind, p.to_vec()));
                at += 9 + p.len();
            }
            v
        };
        assert_eq!(frames[0].0, frame::SETTINGS);
        assert_eq!(
            frames[0].1,
            [0, 2, 0, 0, 0, 0, 0, 4, 0, 0x20, 0, 0, 0, 6, 0, 1, 0, 0]
        );
        assert_eq!(frames[1].0, frame::WINDOW_UPDATE);
        assert_eq!(frame::read_u32(&frames[1].1), CONN_WINDOW - DEFAULT_WINDOW);
        // Nothing opens before the server's SETTINGS are in; then they are acknowledged.
        assert!(!c.settings_seen());
        let s = settings(&[(frame::MAX_CONCURRENT_STREAMS, 100)]);
        // Fed a byte at a time: nothing is consumed until the frame is whole.
        for cut in 0..s.len() {
            assert_eq!(c.receive(&s[..cut]), 0);
        }
        feed(&mut c, &s);
        assert_eq!(c.server_max_streams(), Some(100));
        assert_eq!(kinds(&drain(&mut c)), [(frame::SETTINGS, 0)]);
    }

    #[test]
    fn responses_end_their_streams_in_any_order_with_their_bytes() {
        let mut c = conn(&[]);
        let a = open(&mut c, "/a");
        let b = open(&mut c, "/b");
        assert_eq!((a.id, b.id, b.open), (1, 3, 2));
        assert_eq!(
            kinds(&drain(&mut c)),
            [(frame::HEADERS, 1), (frame::HEADERS, 3)]
        );
        assert_eq!(response(&mut c, a), Poll::Pending);
        // b first: a head, two DATA (one padded), END_STREAM on the last.
        let mut bytes = f(frame::HEADERS, frame::END_HEADERS, 3, OK);
        bytes.extend(f(frame::DATA, 0, 3, b"hello"));
        bytes.extend(f(
            frame::DATA,
            frame::END_STREAM | frame::PADDED,
            3,
            &[2, b'!', 0, 0],
        ));
        // a: a 100 Continue first (read past), then 404 with END_STREAM on the head.
        bytes.extend(f(
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &[0x08, 0x03, b'1', b'0', b'0'],
        ));
        bytes.extend(f(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1,
            &[0x8d],
        ));
        feed(&mut c, &bytes);
        assert_eq!(response(&mut c, b), ok(200, 6));
        assert_eq!(response(&mut c, a), ok(404, 0));
        assert_eq!(c.open.len(), 0);
        // The slots are reused.
        let again = open(&mut c, "/c");
        assert_eq!((again.id, again.open), (5, 1));
        assert!(again.slot < 2);
        // Trailers end a stream too.
        let mut bytes = f(frame::HEADERS, frame::END_HEADERS, 5, OK);
        bytes.extend(f(frame::DATA, 0, 5, b"x"));
        bytes.extend(f(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            5,
            &[0x40, 1, b't', 1, b'v'],
        ));
        feed(&mut c, &bytes);
        assert_eq!(response(&mut c, again), ok(200, 1));
    }

    #[test]
    fn max_concurrent_streams_is_respected_and_a_change_mid_run_applied() {
        let mut c = conn(&[(frame::MAX_CONCURRENT_STREAMS, 2)]);
        let a = open(&mut c, "/");
        let _b = open(&mut c, "/");
        assert_eq!(c.open(Head::Path("/"), None, false), Err(Refusal::Busy));
        let t1 = c.wait_for_stream(Waker::noop());
        let t2 = c.wait_for_stream(Waker::noop());
        // One stream ends: one waiter is woken (out of the queue), the other still waits.
        feed(
            &mut c,
            &f(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                1,
                OK,
            ),
        );
        assert_eq!(response(&mut c, a), ok(200, 0));
        let mut wakes = Vec::new();
        c.take_wakes(&mut wakes);
        assert_eq!(wakes.len(), 1);
        assert!(!c.still_waiting(t1, Waker::noop()));
        assert!(c.still_waiting(t2, Waker::noop()));
        open(&mut c, "/");
        // The server raises its limit to 4: the second waiter goes, and two more fit.
        feed(&mut c, &settings(&[(frame::MAX_CONCURRENT_STREAMS, 4)]));
        assert!(!c.still_waiting(t2, Waker::noop()));
        open(&mut c, "/");
        open(&mut c, "/");
        assert_eq!(c.open(Head::Path("/"), None, false), Err(Refusal::Busy));
        // A waiter woken that goes away passes its turn on.
        let t3 = c.wait_for_stream(Waker::noop());
        let t4 = c.wait_for_stream(Waker::noop());
        feed(
            &mut c,
            &f(frame::RST_STREAM, 0, 3, &frame::CANCEL.to_be_bytes()),
        );
        assert!(!c.still_waiting(t3, Waker::noop()));
        c.forget_waiter(t3);
        assert!(!c.still_waiting(t4, Waker::noop()));
        // Lowered below what is open: nothing new until enough have ended.
        feed(&mut c, &settings(&[(frame::MAX_CONCURRENT_STREAMS, 1)]));
        assert_eq!(c.open(Head::Path("/"), None, false), Err(Refusal::Busy));
    }

    #[test]
    fn a_body_is_sent_as_the_windows_allow_and_initial_window_changes_apply() {
        let mut c = conn(&[
            (frame::INITIAL_WINDOW_SIZE, 10),
            (frame::MAX_FRAME_SIZE, 16_384),
        ]);
        let body = Bytes::from(vec![7u8; 25]);
        let o = c.open(Head::Path("/up"), Some(&body), false).unwrap();
        let frames = drain(&mut c);
        assert_eq!(kinds(&frames), [(frame::HEADERS, 1), (frame::DATA, 1)]);
        assert_eq!(frames[0].1 & frame::END_STREAM, 0);
        assert_eq!(frames[1].3.len(), 10);
        // The stream's window grows by 5, the setting by 5 more (applied to open streams).
        feed(&mut c, &f(frame::WINDOW_UPDATE, 0, 1, &5u32.to_be_bytes()));
        feed(&mut c, &settings(&[(frame::INITIAL_WINDOW_SIZE, 15)]));
        let frames = drain(&mut c);
        let sent: Vec<usize> = frames
            .iter()
            .filter(|f| f.0 == frame::DATA)
            .map(|f| f.3.len())
            .collect();
        assert_eq!(sent, [5, 5]);
        // The rest, with END_STREAM on its last frame.
        feed(
            &mut c,
            &f(frame::WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()),
        );
        let frames = drain(&mut c);
        assert_eq!(kinds(&frames), [(frame::DATA, 1)]);
        assert_eq!((frames[0].1, frames[0].3.len()), (frame::END_STREAM, 5));
        feed(
            &mut c,
            &f(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                1,
                OK,
            ),
        );
        assert_eq!(response(&mut c, o), ok(200, 0));
        // The connection's window (65,535) bounds a body too.
        let mut c = conn(&[]);
        let body = Bytes::from(vec![1u8; 70_000]);
        c.open(Head::Path("/big"), Some(&body), false).unwrap();
        let sent: usize = drain(&mut c)
            .iter()
            .filter(|f| f.0 == frame::DATA)
            .map(|f| f.3.len())
            .sum();
        assert_eq!(sent, 65_535);
        feed(
            &mut c,
            &f(frame::WINDOW_UPDATE, 0, 0, &10_000u32.to_be_bytes()),
        );
        feed(
            &mut c,
            &f(frame::WINDOW_UPDATE, 0, 1, &10_000u32.to_be_bytes()),
        );
        let sent: usize = drain(&mut c).iter().map(|f| f.3.len()).sum();
        assert_eq!(sent, 70_000 - 65_535);
    }

    #[test]
    fn data_received_is_given_back_in_window_updates() {
        let mut c = conn(&[]);
        let o = open(&mut c, "/big");
        drain(&mut c);
        feed(&mut c, &f(frame::HEADERS, frame::END_HEADERS, 1, OK));
        let chunk = vec![0u8; 16_384];
        let mut updates = Vec::new();
        for _ in 0..200 {
            feed(&mut c, &f(frame::DATA, 0, 1, &chunk));
            updates.extend(
                drain(&mut c)
                    .into_iter()
                    .filter(|f| f.0 == frame::WINDOW_UPDATE)
                    .map(|f| (f.2, frame::read_u32(&f.3))),
            );
        }
        feed(&mut c, &f(frame::DATA, frame::END_STREAM, 1, b""));
        assert_eq!(response(&mut c, o), ok(200, 200 * 16_384));
        // 200 frames of 16 KiB: the stream's 2 MiB window given back each time half of it
        // was read (after frames 64, 128 and 192), the connection's 5 MiB at its half (160).
        assert_eq!(
            updates,
            [(1, 1 << 20), (1, 1 << 20), (0, 5 << 19), (1, 1 << 20)],
        );
    }

    fn failed_with(c: &mut Conn, o: Opened) -> Failure {
        match response(c, o) {
            Poll::Ready(Err(f)) => f,
            other => panic!("stream {} did not fail: {other:?}", o.id),
        }
    }

    #[test]
    fn goaway_fails_the_streams_above_its_last_as_unprocessed_and_lets_the_others_end() {
        let mut c = conn(&[]);
        let streams: Vec<Opened> = (0..4).map(|_| open(&mut c, "/")).collect();
        let mut p = 3u32.to_be_bytes().to_vec();
        p.extend(frame::NO_ERROR.to_be_bytes());
        p.extend(b"restart");
        feed(&mut c, &f(frame::GOAWAY, 0, 0, &p));
        assert!(!c.accepts_streams() && !c.finished());
        for o in &streams[2..] {
            assert_eq!(
                failed_with(&mut c, *o),
                Failure::Unprocessed(format!(
                    "the server went away before processing stream {} (GOAWAY NO_ERROR: \"restart\", last stream 3)",
                    o.id
                ))
            );
        }
        assert_eq!(
            c.open(Head::Path("/"), None, false),
            Err(Refusal::Gone(
                "the server is going away (GOAWAY, last stream 3)".into()
            ))
        );
        // Streams 1 and 3 still end well; then the connection is done.
        for id in [1, 3] {
            feed(
                &mut c,
                &f(
                    frame::HEADERS,
                    frame::END_HEADERS | frame::END_STREAM,
                    id,
                    OK,
                ),
            );
        }
        assert_eq!(response(&mut c, streams[0]), ok(200, 0));
        assert_eq!(response(&mut c, streams[1]), ok(200, 0));
        assert!(c.finished());
    }

    #[test]
    fn rst_stream_fails_its_stream_refused_ones_as_unprocessed() {
        let mut c = conn(&[]);
        let a = open(&mut c, "/");
        let b = open(&mut c, "/");
        let d = open(&mut c, "/");
        feed(
            &mut c,
            &f(
                frame::RST_STREAM,
                0,
                1,
                &frame::REFUSED_STREAM.to_be_bytes(),
            ),
        );
        feed(&mut c, &f(frame::RST_STREAM, 0, 3, &2u32.to_be_bytes()));
        assert_eq!(
            failed_with(&mut c, a),
            Failure::Unprocessed(
                "the server refused stream 1 (REFUSED_STREAM) before processing it".into()
            )
        );
        assert_eq!(
            failed_with(&mut c, b),
            Failure::Failed("the server reset stream 3 (INTERNAL_ERROR)".into())
        );
        // A reset stream's late frames are dropped; the others go on.
        feed(&mut c, &f(frame::DATA, 0, 3, b"late"));
        feed(
            &mut c,
            &f(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                5,
                OK,
            ),
        );
        assert_eq!(response(&mut c, d), ok(200, 0));
        assert!(c.failed().is_none());
        // A request that gives up resets its stream.
        let e = open(&mut c, "/");
        drain(&mut c);
        c.cancel(e.slot, e.id);
        let frames = drain(&mut c);
        assert_eq!(kinds(&frames), [(frame::RST_STREAM, 7)]);
        assert_eq!(frame::read_u32(&frames[0].3), frame::CANCEL);
        feed(
            &mut c,
            &f(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                7,
                OK,
            ),
        );
        assert!(c.failed().is_none());
    }

    #[test]
    fn a_head_split_over_continuation_frames_is_read_whole() {
        let mut c = conn(&[]);
        let o = open(&mut c, "/");
        // :status 200, then x-long: a value of 300 bytes added to the table; in frames of 7.
        let mut block = vec![0x88, 0x40, 6];
        block.extend(b"x-long");
        block.extend([0x7f, 0xad, 0x01]);
        block.extend(vec![b'v'; 300]);
        let mut bytes = Vec::new();
        let chunks: Vec<&[u8]> = block.chunks(7).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let (kind, mut flags) = if i == 0 {
                (frame::HEADERS, frame::END_STREAM)
            } else {
                (frame::CONTINUATION, 0)
            };
            if last {
                flags |= frame::END_HEADERS;
            }
            bytes.extend(f(kind, flags, 1, chunk));
        }
        // Fed in pieces of 5 bytes.
        let mut fed = Vec::new();
        for piece in bytes.chunks(5) {
            fed.extend_from_slice(piece);
            let used = c.receive(&fed);
            fed.drain(..used);
        }
        assert!(fed.is_empty());
        assert_eq!(response(&mut c, o), ok(200, 0));
        assert_eq!(c.decoder.entries().0[0].0, "x-long");
        // Another frame inside a block ends the connection.
        let o = open(&mut c, "/");
        feed(&mut c, &f(frame::HEADERS, 0, 3, &[0x88]));
        feed(&mut c, &f(frame::PING, 0, 0, &[0; 8]));
        assert_eq!(
            failed_with(&mut c, o),
            Failure::Failed("the server sent a PING frame inside stream 3's header block".into())
        );
    }

    #[test]
    fn oversized_heads_and_continuation_floods_are_refused() {
        // Over 64 KiB encoded across CONTINUATION: the connection ends, GOAWAY said why.
        let mut c = conn(&[]);
        let o = open(&mut c, "/");
        drain(&mut c);
        feed(&mut c, &f(frame::HEADERS, 0, 1, &[0x88]));
        for _ in 0..4 {
            feed(&mut c, &f(frame::CONTINUATION, 0, 1, &vec![0x88; 16_384]));
        }
        let why =
            "the server sent a header block over 65536 bytes on stream 1 (the client's limit)";
        assert_eq!(failed_with(&mut c, o), Failure::Failed(why.into()));
        let frames = drain(&mut c);
        assert_eq!(kinds(&frames), [(frame::GOAWAY, 0)]);
        assert_eq!(frame::read_u32(&frames[0].3[4..]), frame::ENHANCE_YOUR_CALM);
        assert_eq!(&frames[0].3[8..], why.as_bytes());
        // Empty CONTINUATION frames without end.
        let mut c = conn(&[]);
        let o = open(&mut c, "/");
        feed(&mut c, &f(frame::HEADERS, 0, 1, &[0x88]));
        for _ in 0..MAX_BLOCK_FRAMES {
            feed(&mut c, &f(frame::CONTINUATION, 0, 1, b""));
        }
        assert_eq!(
            failed_with(&mut c, o),
            Failure::Failed(
                "the server sent stream 1's header block in over 128 frames (the client's limit)"
                    .into()
            )
        );
        // A head within the block cap whose decoded list is over 64 KiB (2,101 fields of
        // 42 bytes): its stream alone fails, reset; the connection goes on.
        let mut c = conn(&[]);
        let o = open(&mut c, "/");
        let next = open(&mut c, "/");
        drain(&mut c);
        let block = vec![0x88; 2101];
        feed(
            &mut c,
            &f(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                1,
                &block,
            ),
        );
        assert_eq!(
            failed_with(&mut c, o),
            Failure::Failed("the server's response head on stream 1 is 88242 bytes decoded, over the client's SETTINGS_MAX_HEADER_LIST_SIZE of 65536".into())
        );
        assert_eq!(kinds(&drain(&mut c)), [(frame::RST_STREAM, 1)]);
        feed(
            &mut c,
            &f(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                3,
                OK,
            ),
        );
        assert_eq!(response(&mut c, next), ok(200, 0));
        // A frame declared over 16 KiB: refused from its header.
        let mut c = conn(&[]);
        let o = open(&mut c, "/");
        assert_eq!(c.receive(&[0, 0x40, 1, frame::DATA, 0, 0, 0, 0, 1]), 9);
        assert_eq!(
            failed_with(&mut c, o),
            Failure::Failed("the server sent a DATA frame of 16385 bytes, over the client's SETTINGS_MAX_FRAME_SIZE of 16384".into())
        );
    }

    #[test]
    fn pings_are_answered_and_broken_frames_end_the_connection_with_a_reason() {
        let mut c = conn(&[]);
        feed(&mut c, &f(frame::PING, 0, 0, b"12345678"));
        feed(&mut c, &f(frame::PING, frame::ACK, 0, b"ignored!"));
        let frames = drain(&mut c);
        assert_eq!(kinds(&frames), [(frame::PING, 0)]);
        assert_eq!(
            (frames[0].1, &frames[0].3[..]),
            (frame::ACK, &b"12345678"[..])
        );
        for (bytes, why) in [
            (
                f(
                    frame::PUSH_PROMISE,
                    frame::END_HEADERS,
                    1,
                    &[0, 0, 0, 2, 0x88],
                ),
                "the server sent PUSH_PROMISE though the client's SETTINGS turned push off",
            ),
            (
                f(frame::DATA, 0, 9, b"x"),
                "the server sent DATA on stream 9, which the client never opened",
            ),
            (
                f(frame::HEADERS, frame::END_HEADERS, 2, OK),
                "the server sent HEADERS on stream 2, which the client never opened",
            ),
            (
                f(frame::PING, 0, 0, b"short"),
                "the server sent a PING frame of 5 bytes (it has 8)",
            ),
            (
                f(frame::SETTINGS, 0, 0, &[0, 5, 0, 0, 0x10, 0]),
                "the server sent SETTINGS_MAX_FRAME_SIZE 4096, outside 16384 to 16777215",
            ),
            (
                f(frame::SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 1]),
                "the server sent SETTINGS_ENABLE_PUSH 1 (a server may send only 0)",
            ),
            (
                f(frame::SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
                "the server sent SETTINGS_INITIAL_WINDOW_SIZE 2147483648, over 2^31 - 1",
            ),
            (
                f(frame::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]),
                "the server sent a connection WINDOW_UPDATE of 0",
            ),
            (
                f(frame::WINDOW_UPDATE, 0, 0, &[0x7f, 0xff, 0xff, 0xff]),
                "the server's WINDOW_UPDATE takes the connection's window over 2^31 - 1",
            ),
            (
                f(frame::HEADERS, frame::END_HEADERS, 1, &[0x80]),
                "the server's header block on stream 1 cannot be decoded: index 0",
            ),
            (
                f(frame::CONTINUATION, frame::END_HEADERS, 1, &[0x88]),
                "the server sent CONTINUATION on stream 1 with no header block to continue",
            ),
            (
                f(frame::DATA, frame::PADDED, 1, &[5, 1]),
                "the server sent a DATA frame on stream 1 padded past its end",
            ),
        ] {
            let mut c = conn(&[]);
            let o = open(&mut c, "/");
            drain(&mut c);
            feed(&mut c, &bytes);
            assert_eq!(failed_with(&mut c, o), Failure::Failed(why.into()));
            assert_eq!(c.failed(), Some(why));
            assert!(c.finished() && !c.accepts_streams());
            assert_eq!(kinds(&drain(&mut c)), [(frame::GOAWAY, 0)], "{why}");
            // Waiting requests see it gone.
            assert!(matches!(
                c.open(Head::Path("/"), None, false),
                Err(Refusal::Gone(_))
            ));
        }
        // A head without :status, DATA before the head: that stream alone.
        for (bytes, why) in [
            (
                f(frame::HEADERS, frame::END_HEADERS, 1, &[0x5f, 0x01, b'x']),
                "the server's response on stream 1 has no :status",
            ),
            (
                f(frame::DATA, 0, 1, b"x"),
                "the server sent DATA on stream 1 before its response head",
            ),
        ] {
            let mut c = conn(&[]);
            let o = open(&mut c, "/");
            drain(&mut c);
            feed(&mut c, &bytes);
            assert_eq!(failed_with(&mut c, o), Failure::Failed(why.into()));
            assert_eq!(kinds(&drain(&mut c)), [(frame::RST_STREAM, 1)], "{why}");
            assert!(c.failed().is_none());
        }
    }

    #[test]
    fn the_end_of_the_socket_fails_what_is_open() {
        let mut c = conn(&[]);
        let o = open(&mut c, "/");
        c.ended("the server closed the connection");
        assert_eq!(
            failed_with(&mut c, o),
            Failure::Failed("the server closed the connection with 1 streams open".into())
        );
        // Unused and closed: done once nothing is open, with a GOAWAY.
        let mut c = conn(&[]);
        let o = open(&mut c, "/");
        c.close();
        assert!(!c.finished() && !c.accepts_streams());
        feed(
            &mut c,
            &f(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                1,
                OK,
            ),
        );
        assert_eq!(response(&mut c, o), ok(200, 0));
        assert!(c.finished());
        drain(&mut c);
        c.farewell();
        assert_eq!(kinds(&drain(&mut c)), [(frame::GOAWAY, 0)]);
    }
}
