//! The delay server's `/add?delay=MS` query (`server::routes::add_delay`): no panic, accepted
//! delays within `--max-delay`. The harness: `concur::fuzzing::query`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::query(data));
