//! A fast open-model rate: 20,000 releases a second for 5 s, whose dispatcher keeps a core
//! busy and whose lag is checked to the millisecond. Alone in its own test binary, so that it
//! never runs beside another timing check (tests/cli_rate.rs).

mod common;

use common::*;

#[test]
fn a_fast_rate_is_released_on_time() {
    // fib:0 costs nothing: what is measured is the dispatcher. 5 s at 20,000/s.
    let (out, lines) = run_study(&[
        "-w",
        "fib:0",
        "-m",
        "async:4",
        "--rate",
        "20000",
        "--duration",
        "5s",
        "-r",
        "1",
    ]);
    let r = only_run(&lines);
    assert_eq!(r["tasks"], 100_000);
    assert_eq!(r["tasks_ok"], 100_000);
    // What the feature promises: a run that achieved less than 99% of the asked rate says
    // so (BEHIND in its row, `behind` in its run and cell lines), and a run that does not say
    // so achieved 99%. On a quiet machine this one achieves 99.9%; a shared 2-core machine
    // may stall the dispatcher at the very end, and the run must then be flagged, not pass
    // for one that kept up. (The hair of slack is for the pace's rounding to nanoseconds.)
    let achieved = r["rate_achieved"].as_f64().unwrap();
    let kept = 0.99 * 20_000.0;
    let behind = r["behind"].as_bool().unwrap();
    if behind {
        assert!(
            achieved < kept * (1.0 + 1e-9),
            "flagged at {achieved}/s: {r}"
        );
    } else {
        assert!(
            achieved >= kept * (1.0 - 1e-9),
            "not flagged at {achieved}/s: {r}"
        );
    }
    assert_eq!(of_type(&lines, "cell")[0]["behind"], behind);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.contains("BEHIND"), behind, "{table}");
    // Half the releases are on time to the millisecond however busy the machine is.
    assert!(us(r, "lag_us", "p50") < 1_000.0, "{r}");
}
