//! `units::parse_duration` and `units::parse_size`: no panic, and what is accepted prints back
//! to text that parses to the same value. The harness: `concur::fuzzing::units`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::units(data));
