//! A latency histogram from another host (`LatencyRecorder::from_wire`), as JSON or as raw V2
//! bytes: no panic, no allocation beyond what the input justifies (run with -rss_limit_mb), an
//! accepted one reads back the same. The harness: `concur::fuzzing::histogram`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| concur::fuzzing::histogram(data));
