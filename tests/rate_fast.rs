//! A fast open-model rate: 20,000 releases a second for 5 s, whose dispatcher keeps a core
//! busy and whose lag is checked to the millisecond. It holds [`common::alone`], so that it
//! never runs beside another timing check (tests/cli_rate.rs).

mod common;

use common::*;

/// The asked rate, tasks per second, and the run's length.
const RATE: f64 = 20_000.0;
const SECONDS: f64 = 5.0;

#[test]
fn a_fast_rate_is_released_on_time() {
    let _alone = alone();
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
    let n = (RATE * SECONDS) as u64;
    assert_eq!(r["tasks"], n);
    assert_eq!(r["tasks_ok"], n);
    assert_eq!(r["rate_asked"].as_f64(), Some(RATE), "{r}");
    assert!(r.get("grain_us").is_none(), "no --grain: {r}");
    // The schedule: task i is due i / RATE after the start, the last (n - 1) / RATE after it.
    // No task is released before its due time, and each ends within the run's largest
    // corrected latency (end - due) after it: L, plus a millisecond for the histogram's
    // rounding.
    let span = (n - 1) as f64 / RATE;
    let l = us(r, "latency_us", "max") * 1.001 / 1e6 + 1e-3;
    // So the ends span between span - L (the first ended as late as it could, the last on
    // time) and span + L, and the achieved rate, (n - 1) / that span, lies between:
    let achieved = r["rate_achieved"].as_f64().unwrap();
    let (lo, hi) = ((n - 1) as f64 / (span + l), (n - 1) as f64 / (span - l));
    assert!(
        (lo..=hi).contains(&achieved),
        "achieved {achieved}/s outside [{lo}, {hi}] (latency max {l} s): {r}"
    );
    // What the feature promises: a run that achieved less than 99% of the asked rate says so
    // (BEHIND in its row, `behind` in its run and cell lines), and only such a run.
    let behind = r["behind"].as_bool().unwrap();
    assert_eq!(behind, achieved < 0.99 * RATE, "achieved {achieved}/s: {r}");
    assert_eq!(of_type(&lines, "cell")[0]["behind"], behind);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.contains("BEHIND"), behind, "{table}");
    // The run lasted the schedule at least: nothing was released early.
    assert!(r["wall_s"].as_f64().unwrap() >= span, "{r}");
    // Each task's latency (end - due) holds its queue time (start - due), which holds the
    // dispatcher's lag (release - due): so do their maxima, to the histogram's rounding.
    let max = |f: &str| us(r, f, "max");
    assert!(max("lag_us") <= max("queue_us") * 1.001 + 1.0, "{r}");
    assert!(max("queue_us") <= max("latency_us") * 1.001 + 1.0, "{r}");
    // The series, one point a second: every task ends in one, a second's completions are the
    // tasks due in it give or take those due within L of its edges, and the last point is
    // no later than the last due time plus L.
    let series = r["series"].as_array().unwrap();
    let done: Vec<u64> = series.iter().map(|p| p["done"].as_u64().unwrap()).collect();
    assert_eq!(done.iter().sum::<u64>(), n, "{series:?}");
    let last_t = series.last().unwrap()["t_s"].as_f64().unwrap();
    assert!(
        last_t >= SECONDS && last_t <= (span + l).ceil(),
        "last point at {last_t} s: {series:?}"
    );
    for p in series {
        assert_eq!(p["rate_asked"].as_f64(), Some(RATE), "{p}");
        let t = p["t_s"].as_f64().unwrap();
        if t <= span - l {
            // A whole second inside the schedule.
            let d = p["done"].as_f64().unwrap();
            assert!(
                (d - RATE).abs() <= RATE * l + 1.0,
                "{d} done in the second to {t} s, {RATE} due (L = {l} s): {p}"
            );
        }
    }
    // Half the releases are on time to the millisecond (20 intervals of 50 µs) however busy
    // the machine is.
    assert!(us(r, "lag_us", "p50") < 1_000.0, "{r}");
}
