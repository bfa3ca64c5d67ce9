//! Workload specs (`workload::parse`, `-w`, `advise`'s argument, a job's payload): no panic,
//! and an accepted spec prints (`Workload::spec`) to a spec that parses to the same print.
#![no_main]
use concur::workload::{parse, WorkloadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|spec: &str| {
    let opts = WorkloadOptions::default();
    if let Ok(w) = parse(spec, &opts) {
        let printed = w.spec();
        let again = parse(&printed, &opts)
            .unwrap_or_else(|e| panic!("{spec:?} prints as {printed:?}, refused: {e}"));
        assert_eq!(again.spec(), printed, "{spec:?}");
    }
});
