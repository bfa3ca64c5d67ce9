//! `-H 'Name: value'` as the plan checks it and every client sends it: no panic, no header
//! split off a value, a credential's value masked where shown. The harness:
//! `concur::fuzzing::header`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::header(data));
