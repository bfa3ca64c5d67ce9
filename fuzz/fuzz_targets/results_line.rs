//! One line of a results file (`analysis::results::parse_line`): no panic, and an accepted line
//! written back reads back equal. The harness: `concur::fuzzing::results_line`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::results_line(data));
