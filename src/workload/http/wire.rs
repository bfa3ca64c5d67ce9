//! HTTP/1.1 on the wire for the clients that speak it by hand (the green client, and the tokio
//! clients' HTTP/1.1 connections): a request head written as the builder decided it, and a
//! response read with `httparse` (status, body length by `Content-Length`, chunks or the
//! connection's close, and whether the connection stays open), consuming nothing past it so
//! that a kept connection is ready for the next one.

use std::io::BufRead;

use super::request::HttpRequest;

/// `req` as bytes: the request line, every header in order, the empty line, the body.
pub(crate) fn write_request(req: &HttpRequest) -> Vec<u8> {
    let body = req.body.as_deref().unwrap_or_default();
    let mut out = Vec::with_capacity(256 + body.len());
    write_before_target(&mut out, req);
    out.extend_from_slice(req.target.as_bytes());
    write_after_target(&mut out, req);
    out
}

/// `req` as [`write_request`] writes it, in the two parts around its target: a request that
/// differs from `req` only in its target is `before + target + after`.
pub(crate) fn request_around_target(req: &HttpRequest) -> (Vec<u8>, Vec<u8>) {
    let (mut before, mut after) = (Vec::new(), Vec::new());
    write_before_target(&mut before, req);
    write_after_target(&mut after, req);
    (before, after)
}

/// The request line up to its target: `METHOD `.
fn write_before_target(out: &mut Vec<u8>, req: &HttpRequest) {
    out.extend_from_slice(req.method.as_bytes());
    out.push(b' ');
}

/// The rest of the request after its target: the request line's end, the headers as built, the
/// empty line and the body.
fn write_after_target(out: &mut Vec<u8>, req: &HttpRequest) {
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &req.headers {
        for part in [name.as_str(), ": ", value.as_str(), "\r\n"] {
            out.extend_from_slice(part.as_bytes());
        }
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(req.body.as_deref().unwrap_or_default());
}

/// The longest response head accepted.
const MAX_HEAD: usize = 64 << 10;

/// The most header lines in a response head.
const MAX_HEADERS: usize = 100;

/// How a response's body is delimited.
#[derive(Debug, PartialEq)]
enum Body {
    /// No body whatever the headers say (1xx, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    UntilClose,
}

/// What the client needs from a response head.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    body: Body,
    keep_alive: bool,
}

fn invalid(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

/// Parses a complete head at the start of `bytes`: its length and content, or `None` when more
/// bytes are needed. The response to a `HEAD` (`to_head`) has no body whatever its headers
/// say, so a missing length does not make it run to the close.
fn parse_head(bytes: &[u8], to_head: bool) -> std::io::Result<Option<(usize, Head)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(format!("bad response head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    // HTTP/1.0 closes unless asked to keep the connection, HTTP/1.1 keeps it unless told.
    let mut keep_alive = resp.version == Some(1);
    let (mut length, mut chunked) = (None, false);
    for h in resp.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<u64>()
                    .map_err(|_| invalid(format!("bad Content-Length '{value}'")))?,
            );
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            let value = value.to_ascii_lowercase();
            if value.contains("close") {
                keep_alive = false;
            } else if value.contains("keep-alive") {
                keep_alive = true;
            }
        }
    }
    // RFC 9112 section 6.3: these statuses have no body; chunked wins over a length.
    let body = if to_head || (100..200).contains(&status) || status == 204 || status == 304 {
        Body::Empty
    } else if chunked {
        Body::Chunked
    } else if let Some(n) = length {
        Body::Length(n)
    } else {
        keep_alive = false;
        Body::UntilClose
    };
    Ok(Some((
        len,
        Head {
            status,
            body,
            keep_alive,
        },
    )))
}

/// The longest chunk-size or trailer line accepted, line end included.
const MAX_LINE: usize = 4 << 10;

/// Where the reading of a response stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Reading the head.
    Head,
    /// This many body bytes still to come.
    Length(u64),
    /// Reading a chunk-size line.
    ChunkSize,
    /// This many bytes of the current chunk still to come.
    ChunkData(u64),
    /// Reading the line end after a chunk.
    ChunkEnd,
    /// Reading trailer lines up to the empty one.
    Trailer,
    /// The body runs until the server closes the connection.
    UntilClose,
    /// The response is read to its end.
    Done,
}

/// One HTTP/1.1 response read from bytes as they arrive, however they are split (sans I/O):
/// the sync driver ([`read_response_to`], the green client) and the async one
/// ([`read_response_async`], the tokio clients) both feed it. Handles `Content-Length`,
/// chunked bodies (with trailers), bodies that end when the server closes, and interim `1xx`
/// responses (skipped, as every client does); consumes nothing past the response, so a kept
/// connection is ready for the next one.
pub(crate) struct ResponseReader {
    to_head: bool,
    state: State,
    /// Bytes of a head or of a line that spans reads.
    partial: Vec<u8>,
    status: u16,
    keep_alive: bool,
    n: u64,
}

impl ResponseReader {
    /// A reader of the response to a request that was a `HEAD` (`to_head`: never a body,
    /// whatever the headers say) or not.
    pub(crate) fn new(to_head: bool) -> ResponseReader {
        ResponseReader {
            to_head,
            state: State::Head,
            partial: Vec::new(),
            status: 0,
            keep_alive: false,
            n: 0,
        }
    }

    /// The response once it is read to its end: (status, body bytes, whether the connection
    /// stays open).
    pub(crate) fn done(&self) -> Option<(u16, u64, bool)> {
        (self.state == State::Done).then_some((self.status, self.n, self.keep_alive))
    }

    /// Reads what of `bytes` belongs to the response and returns how many bytes that was: all
    /// of them unless the response ends within them. No bytes at all is a read of none, the
    /// connection's end ([`ResponseReader::closed`]).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if bytes.is_empty() {
            self.closed()?;
            return Ok(0);
        }
        let mut rest = bytes;
        while !rest.is_empty() && self.state != State::Done {
            let used = self.step(rest)?;
            rest = &rest[used..];
        }
        Ok(bytes.len() - rest.len())
    }

    /// The connection ended (a read of no bytes): the end of a body that runs to the close,
    /// an error anywhere else before the response's end.
    fn closed(&mut self) -> std::io::Result<()> {
        let what = match self.state {
            State::Done => return Ok(()),
            State::UntilClose => {
                self.state = State::Done;
                return Ok(());
            }
            State::Head => "before the response head ended",
            State::Length(_) => "in the body",
            State::ChunkData(_) => "in a chunk",
            State::ChunkSize | State::ChunkEnd | State::Trailer => "in a chunk header",
        };
        Err(invalid(format!("connection closed {what}")))
    }

    /// Reads from the start of `bytes` (not empty) and returns how many it used (at least one).
    fn step(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self.state {
            State::Head => self.head(bytes),
            State::Length(left) | State::ChunkData(left) => {
                let used = left.min(bytes.len() as u64);
                let left = left - used;
                self.state = match (self.state, left) {
                    (State::Length(_), 0) => State::Done,
                    (State::Length(_), _) => State::Length(left),
                    (_, 0) => State::ChunkEnd,
                    _ => State::ChunkData(left),
                };
                Ok(used as usize)
            }
            State::UntilClose => {
                self.n += bytes.len() as u64;
                Ok(bytes.len())
            }
            State::ChunkSize | State::ChunkEnd | State::Trailer => self.line(bytes),
            State::Done => Ok(0),
        }
    }

    /// Reads the head, in place when it arrived whole, through `partial` when it spans reads.
    fn head(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let before = self.partial.len();
        let parsed = if before == 0 {
            parse_head(bytes, self.to_head)?
        } else {
            self.partial.extend_from_slice(bytes);
            parse_head(&self.partial, self.to_head)?
        };
        let Some((len, head)) = parsed else {
            if before == 0 {
                self.partial.extend_from_slice(bytes);
            }
            if self.partial.len() > MAX_HEAD {
                return Err(invalid(format!(
                    "response head over {} KiB",
                    MAX_HEAD >> 10
                )));
            }
            return Ok(bytes.len());
        };
        self.partial.clear();
        self.status = head.status;
        self.keep_alive = head.keep_alive;
        // An interim response (100 Continue, 103 Early Hints) comes before the final one.
        if (100..200).contains(&head.status) && head.status != 101 {
            return Ok(len - before);
        }
        self.state = match head.body {
            Body::Empty | Body::Length(0) => State::Done,
            Body::Length(n) => {
                self.n = n;
                State::Length(n)
            }
            Body::Chunked => State::ChunkSize,
            Body::UntilClose => State::UntilClose,
        };
        Ok(len - before)
    }

    /// Reads a line (a chunk's size, the line end after a chunk, a trailer) into `partial`;
    /// once it is whole, acts on it.
    fn line(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let room = &bytes[..bytes.len().min(MAX_LINE - self.partial.len())];
        let Some(end) = room.iter().position(|&b| b == b'\n') else {
            self.partial.extend_from_slice(room);
            if self.partial.len() >= MAX_LINE {
                return Err(invalid(format!(
                    "a chunk-size or trailer line over {} KiB",
                    MAX_LINE >> 10
                )));
            }
            return Ok(room.len());
        };
        self.partial.extend_from_slice(&room[..=end]);
        let line = std::mem::take(&mut self.partial);
        self.state = match self.state {
            State::ChunkSize => match httparse::parse_chunk_size(&line) {
                Ok(httparse::Status::Complete((_, 0))) => State::Trailer,
                Ok(httparse::Status::Complete((_, size))) => {
                    self.n += size;
                    State::ChunkData(size)
                }
                _ => return Err(invalid("bad chunk size")),
            },
            State::ChunkEnd if is_blank(&line) => State::ChunkSize,
            State::ChunkEnd => return Err(invalid("a chunk does not end with CRLF")),
            // Trailer fields, if any, up to the empty line.
            _ if is_blank(&line) => State::Done,
            _ => State::Trailer,
        };
        // The buffer's space is kept for the next line.
        self.partial = line;
        self.partial.clear();
        Ok(end + 1)
    }
}

/// Whether a line is empty but for its line end (servers may send a bare LF).
fn is_blank(line: &[u8]) -> bool {
    line == b"\r\n" || line == b"\n"
}

/// Reads one HTTP/1.1 response: (status, body bytes read, whether the connection stays
/// open), consuming nothing past it (the reader is a state machine fed from `s`).
pub fn read_response(s: &mut impl BufRead) -> std::io::Result<(u16, u64, bool)> {
    read_response_to(s, false)
}

/// [`read_response`] for a request that was a `HEAD` (`to_head`), whose response never has a
/// body whatever its headers say.
pub fn read_response_to(s: &mut impl BufRead, to_head: bool) -> std::io::Result<(u16, u64, bool)> {
    let mut r = ResponseReader::new(to_head);
    loop {
        if let Some(done) = r.done() {
            return Ok(done);
        }
        let used = r.feed(s.fill_buf()?)?;
        s.consume(used);
    }
}

/// [`read_response_to`] from an async stream (the tokio clients' HTTP/1.1 connections).
pub(crate) async fn read_response_async(
    s: &mut (impl tokio::io::AsyncBufRead + Unpin),
    to_head: bool,
) -> std::io::Result<(u16, u64, bool)> {
    use tokio::io::AsyncBufReadExt;
    let mut r = ResponseReader::new(to_head);
    loop {
        if let Some(done) = r.done() {
            return Ok(done);
        }
        let used = r.feed(s.fill_buf().await?)?;
        s.consume(used);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Read};

    use super::*;

    #[test]
    fn a_request_around_another_target_is_that_request_written() {
        let req = |target: &str| HttpRequest {
            method: "GET".into(),
            url: format!("http://h:1{target}"),
            target: target.into(),
            headers: vec![("Host".into(), "h:1".into())],
            body: None,
        };
        let (before, after) = request_around_target(&req("/a"));
        let joined = [&before[..], b"/other?x=1", &after[..]].concat();
        assert_eq!(joined, write_request(&req("/other?x=1")));
    }

    #[test]
    fn a_request_is_written_as_built() {
        let req = HttpRequest {
            method: "POST".into(),
            url: "http://h:1/x?a=1".into(),
            target: "/x?a=1".into(),
            headers: vec![
                ("Host".into(), "h:1".into()),
                ("X-Test".into(), "0".into()),
                ("Content-Length".into(), "2".into()),
            ],
            body: Some(bytes::Bytes::from_static(b"hi")),
        };
        assert_eq!(
            write_request(&req),
            b"POST /x?a=1 HTTP/1.1\r\nHost: h:1\r\nX-Test: 0\r\nContent-Length: 2\r\n\r\nhi"
        );
    }

    #[test]
    fn responses_are_read_by_length_and_chunks() {
        let mut r: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(read_response(&mut r).unwrap(), (200, 5, true));
        let mut c: &[u8] = b"HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(read_response(&mut c).unwrap(), (503, 5, false));
    }

    /// A reader that hands out one piece per read, as a socket does when a response arrives
    /// in several segments.
    struct Pieces(std::collections::VecDeque<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let Some(mut piece) = self.0.pop_front() else {
                return Ok(0);
            };
            let n = piece.len().min(out.len());
            out[..n].copy_from_slice(&piece[..n]);
            if n < piece.len() {
                self.0.push_front(piece.split_off(n));
            }
            Ok(n)
        }
    }

    fn pieces(parts: &[&[u8]], capacity: usize) -> BufReader<Pieces> {
        BufReader::with_capacity(capacity, Pieces(parts.iter().map(|p| p.to_vec()).collect()))
    }

    #[test]
    fn heads_split_across_reads_and_larger_than_one_read_are_parsed() {
        // Split inside the status line, inside a header, and between CR and LF of the end.
        let mut r = pieces(
            &[
                b"HTTP/1.",
                b"1 200 OK\r\nContent-Le",
                b"ngth: 10\r\n\r",
                b"\nok: added\n",
            ],
            16 << 10,
        );
        assert_eq!(read_response(&mut r).unwrap(), (200, 10, true));
        // A head of about 3 KiB through an 8-byte buffer: hundreds of reads.
        let mut long = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..60 {
            long.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "v".repeat(40)).as_bytes());
        }
        long.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n");
        let mut r = pieces(&[&long], 8);
        assert_eq!(read_response(&mut r).unwrap(), (200, 4, true));
        assert_eq!(
            r.fill_buf().unwrap(),
            b"",
            "the whole response was consumed"
        );
    }

    #[test]
    fn kept_connections_are_left_at_the_next_response() {
        let two: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 Not Found\r\ntransfer-encoding: Chunked\r\n\r\n2;ext=1\r\nxy\r\n0\r\nTrailer: t\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n";
        let mut r = pieces(&[two], 5);
        assert_eq!(read_response(&mut r).unwrap(), (200, 3, true));
        assert_eq!(read_response(&mut r).unwrap(), (404, 2, true));
        assert_eq!(read_response(&mut r).unwrap(), (204, 0, true));
        // HTTP/1.0 closes unless asked; a body without a length runs to the close.
        let mut r: &[u8] = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(read_response(&mut r).unwrap(), (200, 1, false));
        let mut r: &[u8] =
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(read_response(&mut r).unwrap(), (200, 1, true));
        let mut r: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nuntil close";
        assert_eq!(read_response(&mut r).unwrap(), (200, 11, false));
    }

    #[test]
    fn a_head_response_without_a_length_keeps_its_connection() {
        let mut r: &[u8] =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(read_response_to(&mut r, true).unwrap(), (200, 0, true));
        // The same head to a GET runs to the close.
        assert_eq!(read_response_to(&mut r, false).unwrap(), (200, 0, false));
    }

    #[test]
    fn interim_responses_are_skipped() {
        let mut r: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(read_response(&mut r).unwrap(), (201, 2, true));
        assert!(r.is_empty());
    }

    #[test]
    fn the_async_reader_reads_what_the_sync_one_does() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let three: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 Not Found\r\ntransfer-encoding: Chunked\r\n\r\n2;ext=1\r\nxy\r\n0\r\nTrailer: t\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end";
        rt.block_on(async {
            // Through a 5-byte buffer: every head, line and body spans reads.
            let mut s = tokio::io::BufReader::with_capacity(5, three);
            assert_eq!(
                read_response_async(&mut s, false).await.unwrap(),
                (200, 3, true)
            );
            assert_eq!(
                read_response_async(&mut s, false).await.unwrap(),
                (404, 2, true)
            );
            assert_eq!(
                read_response_async(&mut s, false).await.unwrap(),
                (200, 10, false)
            );
            let mut cut = tokio::io::BufReader::with_capacity(5, &three[..50]);
            read_response_async(&mut cut, false).await.unwrap();
            let e = read_response_async(&mut cut, false).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        });
    }

    #[test]
    fn broken_responses_are_errors() {
        for bytes in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
            b"SMTP ready\r\n\r\n",
            b"",
        ] {
            let mut r = bytes;
            let e = read_response(&mut r).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{bytes:?}");
        }
        let mut huge = b"HTTP/1.1 200 OK\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'x', MAX_HEAD + 10));
        let mut r = pieces(&[&huge], 4096);
        assert!(read_response(&mut r)
            .unwrap_err()
            .to_string()
            .contains("over 64 KiB"));
    }
}
