//! What the fuzz targets in `fuzz/` and the instruction-count benchmark (`benches/icount.rs`)
//! need beyond the public parsers (not an API: hidden from the documentation, and free to
//! change with them). Public parsers are called where they are; what a harness needs around
//! one (a socket that delivers a response in pieces, the bytes of a request head) lives here,
//! so that nothing else has to be made public for it.

use std::io::{BufReader, Read};

use crate::workload::HttpRequest;

/// `req`'s bytes as the green client writes them (`workload::http::wire`): the request line,
/// the headers in order, the empty line and the body.
pub fn request_head(req: &HttpRequest) -> Vec<u8> {
    crate::workload::http::write_request(req)
}

/// Reads one HTTP/1.1 response from `bytes` with the green client's parser
/// (`workload::http::wire`), as it arrives from a socket in pieces of at most `piece` bytes
/// through a buffer of `capacity` bytes: (status, body bytes, kept connection) and how many
/// bytes of `bytes` it consumed.
pub fn read_response(
    bytes: &[u8],
    piece: usize,
    capacity: usize,
    to_head: bool,
) -> std::io::Result<((u16, u64, bool), usize)> {
    let mut r = BufReader::with_capacity(
        capacity.max(1),
        Pieces {
            rest: bytes,
            piece: piece.max(1),
        },
    );
    let got = crate::workload::http::read_response_to(&mut r, to_head)?;
    let consumed = bytes.len() - r.get_ref().rest.len() - r.buffer().len();
    Ok((got, consumed))
}

/// A reader that hands out at most `piece` bytes a read, as a socket does when a response
/// arrives in several segments.
struct Pieces<'a> {
    rest: &'a [u8],
    piece: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.rest.len().min(self.piece).min(out.len());
        out[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}
