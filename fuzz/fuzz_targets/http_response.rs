//! The green client's HTTP/1.1 response parser: no panic, nothing consumed past the input, the
//! same answer in one read or in pieces. The harness: `concur::fuzzing::http_response`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::http_response(data));
