//! A job payload from Redis or SQLite (`jobs::Job::parse`): no panic, and an accepted job
//! written back reads back equal. The harness: `concur::fuzzing::job`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::job(data));
