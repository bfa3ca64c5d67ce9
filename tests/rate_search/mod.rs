//! Checks a `--rate auto` run line against the search's own mechanism (src/study/search.rs),
//! for a pool of W slots serving tasks of a known delay d: its capacity is W / d.

use concur::measure::open::KEPT_UP;
use concur::plan::rate::PROBE_DURATION;
use concur::study::search::{MAX_PROBES, MIN_PROBE_TASKS, PRECISION};
use serde_json::Value;

/// The most a run of `n` tasks on `w` slots, each task taking at least `d` seconds, can
/// achieve: `(n - 1) / (last end - first end)`, where after the first end each slot ends at
/// most one task every `d`, so n tasks' ends span at least `d × (n / w - 1)`.
pub fn most_achievable(n: f64, w: f64, d: f64) -> f64 {
    (n - 1.0) / (d * (n / w - 1.0))
}

/// Checks `run`'s search under the SLO `p<slo_us` on `workers` slots of `delay_s`, and
/// returns the rate found. Every probe's verdict matches its own figures; the rate found is
/// the highest that passed and every probe above it failed; the bracket closed within the
/// search's precision (or it ran out of probes); the search started at half the capacity
/// (where nothing queues) and went up from a pass there, down from a failure; and no passing
/// rate is more than a probe of its size could achieve on W slots.
pub fn check_search(run: &Value, workers: u64, delay_s: f64, slo_us: f64) -> f64 {
    let (w, d) = (workers as f64, delay_s);
    assert_eq!(run["workers"].as_u64(), Some(workers), "{run}");
    assert_eq!(run["delay_s"].as_f64(), Some(delay_s), "{run}");
    let search = &run["rate_search"];
    let probes = search["probes"].as_array().expect("probes");
    assert!(
        !probes.is_empty() && probes.len() <= MAX_PROBES,
        "{probes:?}"
    );
    let rate = |p: &Value| p["rate"].as_f64().unwrap();
    // Each verdict: ok exactly when the probe achieved 99% of its rate and kept the SLO (a
    // hair of slack for the pace's rounding to nanoseconds).
    for p in probes {
        let (achieved, lat) = (p["achieved"].as_f64(), p["latency_us"].as_f64());
        let kept_up = achieved.map(|a| a >= KEPT_UP * rate(p) * (1.0 - 1e-9));
        let kept_slo = lat.map(|l| l <= slo_us);
        if p["ok"] == true {
            assert_eq!((kept_up, kept_slo), (Some(true), Some(true)), "{p}");
        } else if let (Some(up), Some(slo)) = (kept_up, kept_slo) {
            let below = achieved.unwrap() < KEPT_UP * rate(p) * (1.0 + 1e-9);
            assert!(!(up && slo) || below, "failed though it kept both: {p}");
        }
    }
    // The start: half the capacity.
    let capacity = w / d;
    assert!(
        (rate(&probes[0]) - 0.5 * capacity).abs() < 1e-9,
        "first probe: {}",
        probes[0]
    );
    // Half the capacity queues nothing, so it passes on a machine that can time a sleep; on a
    // starved one (a load average of 96 was seen beside other tests) it may not, and then the
    // search must have gone below it.
    let found = search["sustained"].as_f64().expect("a rate found");
    if probes[0]["ok"] == true {
        assert!(found >= rate(&probes[0]), "{search}");
    } else {
        assert!(found < rate(&probes[0]), "{search}");
    }
    let best = probes
        .iter()
        .filter(|p| p["ok"] == true)
        .map(rate)
        .fold(0.0, f64::max);
    assert_eq!(found, best, "{search}");
    assert_eq!(
        run["rate_asked"].as_f64(),
        Some(found),
        "the run kept is at the rate found"
    );
    let failed_above: Vec<f64> = probes
        .iter()
        .filter(|p| p["ok"] == false)
        .map(rate)
        .filter(|r| *r > found)
        .collect();
    assert!(
        !failed_above.is_empty(),
        "nothing above {found} failed: {search}"
    );
    let ceiling = failed_above.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        probes.len() == MAX_PROBES || (ceiling - found) / found <= PRECISION * (1.0 + 1e-9),
        "bracket [{found}, {ceiling}] wider than {PRECISION}: {search}"
    );
    assert!(
        !probes.iter().any(|p| p["ok"] == true && rate(p) > found),
        "{search}"
    );
    // No probe can keep up above what W slots can end: its tasks are rate × the probe's
    // duration, at least MIN_PROBE_TASKS.
    for p in probes.iter().filter(|p| p["ok"] == true) {
        let n = (rate(p) * PROBE_DURATION.as_secs_f64())
            .ceil()
            .max(MIN_PROBE_TASKS as f64);
        let most = most_achievable(n, w, d) / KEPT_UP;
        assert!(rate(p) <= most, "passed at {} > {most}/s: {p}", rate(p));
    }
    found
}
