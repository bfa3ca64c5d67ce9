//! The keys an operator lists and a party's key file (`hub::keys`), and the epoch and
//! signature texts that come from the hub. The harness: `concur::fuzzing::hub_keys`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::hub_keys(data));
