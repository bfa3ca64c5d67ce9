//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte frame header read and checked against the
//! client's limit, and every frame the client sends written straight into the connection's one
//! output buffer (no frame value, no codec between the state and the bytes).

/// What a client sends first on every connection (RFC 9113 §3.4).
pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The length of a frame header.
pub(super) const HEADER_LEN: usize = 9;

/// The largest frame payload either side accepts until told otherwise, and the smallest a
/// peer may announce (RFC 9113 §4.2, §6.5.2). The client never raises its own.
pub(super) const DEFAULT_MAX_FRAME: u32 = 16_384;

/// The largest `SETTINGS_MAX_FRAME_SIZE` a peer may announce.
pub(super) const MAX_FRAME_LIMIT: u32 = (1 << 24) - 1;

/// The largest flow-control window (RFC 9113 §6.9.1).
pub(super) const MAX_WINDOW: i64 = (1 << 31) - 1;

/// The largest stream identifier.
pub(super) const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// Frame types (RFC 9113 §6).
pub(super) const DATA: u8 = 0x0;
pub(super) const HEADERS: u8 = 0x1;
pub(super) const PRIORITY: u8 = 0x2;
pub(super) const RST_STREAM: u8 = 0x3;
pub(super) const SETTINGS: u8 = 0x4;
pub(super) const PUSH_PROMISE: u8 = 0x5;
pub(super) const PING: u8 = 0x6;
pub(super) const GOAWAY: u8 = 0x7;
pub(super) const WINDOW_UPDATE: u8 = 0x8;
pub(super) const CONTINUATION: u8 = 0x9;

/// Flags.
pub(super) const END_STREAM: u8 = 0x1;
pub(super) const ACK: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;
pub(super) const PADDED: u8 = 0x8;
pub(super) const PRIORITY_FLAG: u8 = 0x20;

/// Settings identifiers (RFC 9113 §6.5.2).
pub(super) const HEADER_TABLE_SIZE: u16 = 0x1;
pub(super) const ENABLE_PUSH: u16 = 0x2;
pub(super) const MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub(super) const INITIAL_WINDOW_SIZE: u16 = 0x4;
pub(super) const MAX_FRAME_SIZE: u16 = 0x5;
pub(super) const MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Error codes (RFC 9113 §7).
pub(super) const NO_ERROR: u32 = 0x0;
pub(super) const PROTOCOL_ERROR: u32 = 0x1;
pub(super) const FLOW_CONTROL_ERROR: u32 = 0x3;
pub(super) const FRAME_SIZE_ERROR: u32 = 0x6;
pub(super) const REFUSED_STREAM: u32 = 0x7;
pub(super) const CANCEL: u32 = 0x8;
pub(super) const COMPRESSION_ERROR: u32 = 0x9;
pub(super) const ENHANCE_YOUR_CALM: u32 = 0xb;

/// An error code's name as RFC 9113 §7 gives it, or its number in hex.
pub(super) fn error_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(name) => (*name).to_string(),
        None => format!("error code {code:#x}"),
    }
}

/// A frame type's name, for messages.
pub(super) fn kind_name(kind: u8) -> String {
    const NAMES: [&str; 10] = [
        "DATA",
        "HEADERS",
        "PRIORITY",
        "RST_STREAM",
        "SETTINGS",
        "PUSH_PROMISE",
        "PING",
        "GOAWAY",
        "WINDOW_UPDATE",
        "CONTINUATION",
    ];
    match NAMES.get(kind as usize) {
        Some(name) => (*name).to_string(),
        None => format!("frame type {kind:#x}"),
    }
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    /// The payload's length.
    pub(super) len: u32,
    pub(super) kind: u8,
    pub(super) flags: u8,
    /// The stream, its reserved bit cleared.
    pub(super) stream: u32,
}

impl Header {
    /// Whether `flag` is set.
    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A frame too large for the client, which ends the connection (RFC 9113 §4.2).
#[derive(Debug, PartialEq)]
pub(super) struct TooLarge(pub(super) Header);

/// The next whole frame at the start of `buf`: its header and payload, or `None` while the
/// frame has not fully arrived. A header that declares more than `max` bytes is refused at
/// once, before any of its payload is waited for.
pub(super) fn next(buf: &[u8], max: u32) -> Result<Option<(Header, &[u8])>, TooLarge> {
    let Some(head) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let header = Header {
        len: u32::from_be_bytes([0, head[0], head[1], head[2]]),
        kind: head[3],
        flags: head[4],
        stream: read_u32(&head[5..9]) & MAX_STREAM_ID,
    };
    if header.len > max {
        return Err(TooLarge(header));
    }
    let end = HEADER_LEN + header.len as usize;
    Ok(buf.get(HEADER_LEN..end).map(|payload| (header, payload)))
}

/// A big-endian `u32` from the first four bytes of `b` (which has them).
pub(super) fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Appends a frame header.
fn header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = len as u32;
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// The client's preface: the magic, then its SETTINGS.
pub(super) fn preface(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    out.extend_from_slice(PREFACE);
    header(out, settings.len() * 6, SETTINGS, 0, 0);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// SETTINGS with ACK.
pub(super) fn settings_ack(out: &mut Vec<u8>) {
    header(out, 0, SETTINGS, ACK, 0);
}

/// PING with ACK, echoing `payload`.
pub(super) fn ping_ack(out: &mut Vec<u8>, payload: &[u8; 8]) {
    header(out, 8, PING, ACK, 0);
    out.extend_from_slice(payload);
}

/// WINDOW_UPDATE of `stream` (0: the connection) by `increment` (1 to 2^31 - 1).
pub(super) fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    header(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// RST_STREAM of `stream` with `code`.
pub(super) fn rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    header(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// GOAWAY: the last stream the client processed (0: it processes none a server opens), the
/// code and a short reason as debug data.
pub(super) fn goaway(out: &mut Vec<u8>, last: u32, code: u32, reason: &str) {
    let debug = &reason.as_bytes()[..reason.len().min(256)];
    header(out, 8 + debug.len(), GOAWAY, 0, 0);
    out.extend_from_slice(&last.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
}

/// DATA of `stream` carrying `data`, which fits the peer's frame size.
pub(super) fn data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    let flags = if end_stream { END_STREAM } else { 0 };
    header(out, data.len(), DATA, flags, stream);
    out.extend_from_slice(data);
}

/// HEADERS of `stream` with the header block `encode` appends, followed by as many
/// CONTINUATION frames as the peer's `max_frame` needs: the block is encoded in place, after
/// a header written with a length patched in once it is known, so a block that fits one frame
/// (every request of concur's) is never copied.
pub(super) fn headers(
    out: &mut Vec<u8>,
    stream: u32,
    end_stream: bool,
    max_frame: u32,
    encode: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
    header(out, 0, HEADERS, flags, stream);
    encode(out);
    let block = out.len() - start - HEADER_LEN;
    let max = max_frame as usize;
    if block <= max {
        let len = (block as u32).to_be_bytes();
        out[start..start + 3].copy_from_slice(&len[1..]);
        return;
    }
    // Split: the HEADERS frame keeps the first `max` bytes without END_HEADERS, each
    // CONTINUATION the next `max`, the last one END_HEADERS.
    let rest = out.split_off(start + HEADER_LEN + max);
    let len = (max as u32).to_be_bytes();
    out[start..start + 3].copy_from_slice(&len[1..]);
    out[start + 4] &= !END_HEADERS;
    let mut chunks = rest.chunks(max).peekable();
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let flags = if last { END_HEADERS } else { 0 };
        header(out, chunk.len(), CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_read_whole_or_waited_for_and_an_oversized_one_refused() {
        let mut out = Vec::new();
        window_update(&mut out, 3, 1000);
        rst_stream(&mut out, 5, CANCEL);
        let (h, payload) = next(&out, DEFAULT_MAX_FRAME).unwrap().unwrap();
        assert_eq!(
            h,
            Header {
                len: 4,
                kind: WINDOW_UPDATE,
                flags: 0,
                stream: 3
            }
        );
        assert_eq!(read_u32(payload), 1000);
        let (h, payload) = next(&out[13..], DEFAULT_MAX_FRAME).unwrap().unwrap();
        assert_eq!(
            (h.kind, h.stream, read_u32(payload)),
            (RST_STREAM, 5, CANCEL)
        );
        for cut in 0..13 {
            assert_eq!(next(&out[..cut], DEFAULT_MAX_FRAME), Ok(None), "{cut}");
        }
        // The reserved bit is not part of the stream.
        let mut r = out[..13].to_vec();
        r[5] |= 0x80;
        assert_eq!(next(&r, DEFAULT_MAX_FRAME).unwrap().unwrap().0.stream, 3);
        // Declared over the limit: refused from the header alone.
        let big = [0x00, 0x40, 0x01, DATA, 0, 0, 0, 0, 1];
        assert_eq!(
            next(&big, DEFAULT_MAX_FRAME),
            Err(TooLarge(Header {
                len: 16_385,
                kind: DATA,
                flags: 0,
                stream: 1
            }))
        );
    }

    #[test]
    fn a_header_block_longer_than_a_frame_goes_on_in_continuation_frames() {
        for (size, frames) in [(0, 1), (10, 1), (16_384, 1), (16_385, 2), (40_000, 3)] {
            let block: Vec<u8> = (0..size).map(|i| i as u8).collect();
            let mut out = vec![7];
            headers(&mut out, 9, true, DEFAULT_MAX_FRAME, |o| {
                o.extend_from_slice(&block)
            });
            let mut at = 1;
            let mut got = Vec::new();
            let mut seen = 0;
            while at < out.len() {
                let (h, p) = next(&out[at..], DEFAULT_MAX_FRAME).unwrap().unwrap();
                let kind = if seen == 0 { HEADERS } else { CONTINUATION };
                assert_eq!((h.kind, h.stream), (kind, 9), "{size}");
                assert_eq!(h.has(END_HEADERS), at + 9 + p.len() == out.len(), "{size}");
                if seen == 0 {
                    assert!(h.has(END_STREAM));
                }
                got.extend_from_slice(p);
                at += 9 + p.len();
                seen += 1;
            }
            assert_eq!((got, seen), (block, frames), "{size}");
        }
    }

    #[test]
    fn names_of_codes_and_kinds() {
        assert_eq!(error_name(REFUSED_STREAM), "REFUSED_STREAM");
        assert_eq!(error_name(0x1f), "error code 0x1f");
        assert_eq!(kind_name(CONTINUATION), "CONTINUATION");
        assert_eq!(kind_name(0xee), "frame type 0xee");
    }
}
