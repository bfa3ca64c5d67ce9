//! The HTTP/2 client's frame reader and HPACK decoder on a server's bytes: no panic, the same
//! outcome whole or in pieces, its own frames whole, windows and the HPACK table within their
//! bounds. The harness: `concur::fuzzing::h2_frames`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::h2_frames(data));
