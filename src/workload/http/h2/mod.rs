//! HTTP/2 for the tokio clients (`async`, `async-local`), written for concur as its HTTP/1.1
//! client was (`wire.rs`): what a client that sends a cell's requests and counts their body
//! bytes needs of RFC 9113 and RFC 7541, and nothing it does not. It replaced the `h2` crate,
//! whose stream store, `http` header maps and URIs and general HPACK encoder cost about as
//! much CPU a request as h2load spends on everything (docs/benchmarks.md §22).
//!
//! One file a job: the frames on the wire (`frame.rs`), HPACK's Huffman code (`huffman.rs`),
//! HPACK itself (`hpack.rs`: the response decoder, the request encoder), the connection's
//! state without I/O (`conn.rs`: streams in flat arrays, windows, settings, GOAWAY and
//! RST_STREAM), and the I/O around it (`driver.rs`: the handshake, the task that reads and
//! writes the socket, the futures a request awaits).

mod conn;
mod driver;
mod frame;
mod hpack;
mod huffman;

pub(super) use conn::Failure;
#[cfg(feature = "fuzzing")]
pub(crate) use conn::{fuzz_server_bytes, BenchExchange};
pub(super) use driver::{handshake, Connection};
#[cfg(test)]
pub(super) use hpack::fields_sent;
pub(super) use hpack::{Head, Template};
