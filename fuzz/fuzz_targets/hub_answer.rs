//! An answer a study reads from a run's list (`PartDone`, opened with and without the hub key,
//! checked by `merge::check_ended`, converted and merged): no panic, and the merged run line is
//! one `concur report` reads; the same bytes as an agent's refusal notice and as the unchecked
//! body of an answer whose signature was refused. The harness: `concur::fuzzing::hub_answer`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::hub_answer(data));
