//! Model specs and scans (`model::parse`, `model::expand_scan`) and `--peer`: no panic, specs
//! print back, scans expand to specs that parse. The harness: `concur::fuzzing::model_spec`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::model_spec(data));
