//! Workload specs (`workload::parse`): no panic, and an accepted spec prints to a spec that
//! parses to the same print. The harness: `concur::fuzzing::workload_spec`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::workload_spec(data));
