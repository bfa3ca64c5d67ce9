//! An HTTP/3 request head as h3 hands it to the delay server (`server::http3`), answered by
//! the routes every protocol shares and shaped for HTTP/3: no panic, no `Connection`, an exact
//! `Content-Length`, JSON errors. The harness: `concur::fuzzing::http3_request`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::http3_request(data));
