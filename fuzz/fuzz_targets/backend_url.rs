//! Queue and hub URLs (`--jobs-backend`, `--hub`) and everything shown of them:
//! no panic, the full text parses back, the password shown nowhere. The harness:
//! `concur::fuzzing::backend_url`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::backend_url(data));
