//! One line of a results file (`analysis::results::parse_line`, what `concur report` and
//! `--baseline` read): no panic, and an accepted line written back as concur writes it
//! (serde_json) reads back to the same line.
#![no_main]
use concur::analysis::results::parse_line;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(Some(line)) = parse_line(bytes) {
        let text = serde_json::to_string(&line).expect("a line serialises");
        let again = parse_line(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text} is refused: {e}"))
            .expect("not blank");
        assert_eq!(again, line, "{text}");
    }
});
