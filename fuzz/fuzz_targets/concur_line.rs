//! An external program's stdout and its `CONCUR {json}` line (`--peer`, the classic programs),
//! made into the run line of an external cell: no panic, every task accounted for, the run
//! line read back as written. The harness: `concur::fuzzing::concur_line`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::concur_line(data));
