//! The delay server's `/add?delay=MS` query (`server::routes::add_delay`), as any client may
//! send it: no panic; what is accepted is within `--max-delay`; what is refused names the
//! `delay` parameter; a plain number of milliseconds in range is accepted as that many.
#![no_main]
use concur::server::routes::add_delay;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

const MAX: Duration = Duration::from_secs(10);

fuzz_target!(|query: &str| {
    match add_delay(MAX, query) {
        Ok(d) => assert!(d <= MAX, "{query:?} -> {d:?}"),
        Err(e) => assert_eq!(e.parameter, "delay", "{query:?}: {}", e.error),
    }
    if let Ok(ms) = query.parse::<u32>() {
        let plain = format!("delay={ms}");
        let want = Duration::from_millis(u64::from(ms));
        match add_delay(MAX, &plain) {
            Ok(d) => assert_eq!(d, want, "{plain}"),
            Err(_) => assert!(want > MAX, "{plain} refused"),
        }
    }
});
