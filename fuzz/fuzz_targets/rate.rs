//! `--rate` and `--slo` (`study::rate::parse_rate`, `parse_slo`): no panic; an accepted rate
//! is finite and above 0, a ramp does not fall.
#![no_main]
use concur::study::rate::{parse_rate, parse_slo, Rate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    // The text is the rate, or `RATE\nSLO` for the pair.
    let (rate, slo) = match text.split_once('\n') {
        Some((r, s)) => (r, Some(s)),
        None => (text, None),
    };
    match parse_rate(rate, slo) {
        Ok(Rate::Fixed(r)) => assert!(r.is_finite() && r > 0.0, "{text:?}: {r}"),
        Ok(Rate::Ramp(a, b)) => {
            assert!(a.is_finite() && b.is_finite() && 0.0 < a && a < b, "{text:?}")
        }
        Ok(Rate::Auto(_)) => assert!(slo.is_some(), "{text:?}"),
        Err(_) => {}
    }
    let _ = parse_slo(text);
});
