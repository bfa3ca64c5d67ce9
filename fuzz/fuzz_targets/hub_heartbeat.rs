//! An agent's heartbeat (`hub::AgentInfo`) as `concur agents` reads and shows it: no panic, no
//! control character reaches the terminal. The harness: `concur::fuzzing::hub_heartbeat`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::hub_heartbeat(data));
