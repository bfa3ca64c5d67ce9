//! `units::parse_duration` and `units::parse_size` (every duration and size flag, the
//! server's query values): no panic, and what is accepted prints back (`fmt_duration_spec`,
//! whole microseconds) to text that parses to the same value.
#![no_main]
use concur::units::{fmt_duration_spec, parse_duration, parse_size};
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|text: &str| {
    if let Ok(d) = parse_duration(text) {
        let printed = fmt_duration_spec(d);
        let again = parse_duration(&printed)
            .unwrap_or_else(|e| panic!("{text:?} -> {d:?} -> {printed:?} is refused: {e}"));
        let micros = Duration::from_micros(d.as_micros() as u64);
        assert_eq!(again, micros, "{text:?} -> {printed:?}");
    }
    if let Ok(n) = parse_size(text) {
        assert_eq!(parse_size(&n.to_string()), Ok(n), "{text:?}");
    }
});
