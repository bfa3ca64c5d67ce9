//! Model specs and scans (`model::parse`, `model::expand_scan`, `-m`) and `--peer
//! LABEL=COMMAND`: no panic; an accepted spec prints (`Model::spec`) to a spec that parses to
//! the same print, and every spec a scan (`NAME:W1,W2` or `NAME:LO..HI`) expands to parses
//! (any other spec comes back alone, as typed, for `parse` to judge).
#![no_main]
use concur::model::{expand_scan, parse};
use concur::options::PeerRequest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|spec: &str| {
    if let Ok(m) = parse(spec) {
        let printed = m.spec();
        let again = parse(&printed)
            .unwrap_or_else(|e| panic!("{spec:?} prints as {printed:?}, refused: {e}"));
        assert_eq!(again.spec(), printed, "{spec:?}");
    }
    let scan = spec
        .split_once(':')
        .is_some_and(|(_, list)| list.contains(',') || list.contains(".."));
    if let Ok(specs) = expand_scan(spec) {
        assert!(!specs.is_empty(), "{spec:?} expands to nothing");
        for s in specs.iter().filter(|_| scan) {
            if let Err(e) = parse(s) {
                panic!("{spec:?} expands to {s:?}, refused: {e}");
            }
        }
    }
    let _ = PeerRequest::parse(spec);
});
