//! A work item an agent takes from the hub (bounded, opened with and without the hub key, read,
//! and a share checked as the agent checks it): no panic, no command accepted without
//! --allow-commands. The harness: `concur::fuzzing::hub_work`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::hub_work(data));
