//! `--rate` and `--slo` (`study::rate::parse_rate`, `parse_slo`): no panic; an accepted rate
//! is finite and above 0, a ramp does not fall. The harness: `concur::fuzzing::rate`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::rate(data));
