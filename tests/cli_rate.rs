//! Open-model runs (`--rate`) on workloads whose truth is known: `sleep:100ms` on a pool of W
//! threads serves exactly W / 0.1 s tasks per second. Timing checks are ratios with generous
//! bounds: the machine is shared, and every test that times a rate holds [`common::alone`]
//! (so does the 20,000/s run of tests/rate_fast.rs, which keeps a core busy for 5 s).

mod common;
mod rate_search;

use common::*;

#[test]
fn above_capacity_the_corrected_latency_grows_while_service_stays() {
    let _alone = alone();
    // pool:2 serves 20/s; 100 arrivals at 50/s come in 2 s and take 5 s to serve, so the
    // last one waits about 3 s in the queue.
    let (_, lines) = run_study(&[
        "-w",
        "sleep:100ms",
        "-m",
        "pool:2",
        "--rate",
        "50",
        "-n",
        "100",
        "-r",
        "1",
    ]);
    let r = only_run(&lines);
    assert_eq!(r["tasks_ok"], 100);
    let (lat, svc) = (us(r, "latency_us", "p99"), us(r, "service_us", "p99"));
    assert!(
        lat > 10.0 * svc,
        "latency p99 {lat} µs, service p99 {svc} µs"
    );
    let svc50 = us(r, "service_us", "p50");
    assert!(
        (95_000.0..150_000.0).contains(&svc50),
        "service p50 {svc50} µs"
    );
    assert!(us(r, "queue_us", "p99") > 1_000_000.0, "{r}");
    assert_eq!(r["behind"], true, "{r}");
    let achieved = r["rate_achieved"].as_f64().unwrap();
    assert!((15.0..25.0).contains(&achieved), "achieved {achieved}/s");
    assert_eq!(r["rate_asked"], 50.0);
    // The series shows the queue: in flight grows while arrivals last.
    let series = r["series"].as_array().unwrap();
    assert!(series.len() >= 4, "{series:?}");
    assert!(series[1]["in_flight"].as_u64() > series[0]["in_flight"].as_u64());
    let cell = of_type(&lines, "cell")[0];
    assert_eq!(cell["behind"], true);
    assert!(
        cell["speedup"].is_null() && cell["vs_ideal"].is_null(),
        "{cell}"
    );
}

#[test]
fn below_capacity_latency_is_the_service_time() {
    let _alone = alone();
    // pool:4 serves 40/s; at 10/s nothing waits.
    let (_, lines) = run_study(&[
        "-w",
        "sleep:100ms",
        "-m",
        "pool:4",
        "--rate",
        "10",
        "-n",
        "30",
        "-r",
        "1",
    ]);
    let r = only_run(&lines);
    assert_eq!(r["tasks_ok"], 30);
    for q in ["p50", "p99"] {
        let (lat, svc) = (us(r, "latency_us", q), us(r, "service_us", q));
        assert!(lat >= svc, "{q}: latency {lat} µs below service {svc} µs");
        assert!(lat < 1.3 * svc, "{q}: latency {lat} µs, service {svc} µs");
        assert!(
            (95_000.0..150_000.0).contains(&lat),
            "{q}: latency {lat} µs"
        );
    }
    assert_eq!(r["behind"], false, "{r}");
    let achieved = r["rate_achieved"].as_f64().unwrap();
    assert!((9.5..10.5).contains(&achieved), "achieved {achieved}/s");
}

#[test]
fn a_ramps_series_rises() {
    let _alone = alone();
    // 20/s rising to 200/s: mean 110/s, 440 tasks over 4 s.
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let (_, lines) = run_study(&[
        "-w",
        "sleep:10ms",
        "-m",
        "async:50",
        "--rate",
        "20..200",
        "--duration",
        "4s",
        "-r",
        "1",
        "--html",
        html.to_str().unwrap(),
    ]);
    // The HTML report draws the cell over time.
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("data-kind=\"series\"").count(), 1);
    assert!(page.contains("asked/s (dashed)"));
    let r = only_run(&lines);
    assert_eq!(r["tasks"], 440);
    assert_eq!(r["rate_ramp"], serde_json::json!([20.0, 200.0]));
    let s = r["series"].as_array().unwrap();
    assert!(s.len() >= 4, "{s:?}");
    let done = |i: usize| s[i]["done"].as_f64().unwrap();
    let asked = |i: usize| s[i]["rate_asked"].as_f64().unwrap();
    // About 42 in the first second, 177 in the fourth.
    assert!(done(3) > 2.5 * done(0), "{s:?}");
    assert!(
        done(0) < done(1) && done(1) < done(2) && done(2) < done(3),
        "{s:?}"
    );
    assert!(asked(0) < asked(1) && asked(2) < asked(3), "{s:?}");
}

#[test]
fn auto_finds_a_pools_capacity() {
    let _alone = alone();
    // pool:4 on sleep:100ms serves 40/s; above it the queue breaks p99 < 150 ms.
    let (out, lines) = run_study(&[
        "-w",
        "sleep:100ms",
        "-m",
        "pool:4",
        "--rate",
        "auto",
        "--slo",
        "p99<150ms",
    ]);
    let r = only_run(&lines);
    // Between half the capacity (the search's start, which must pass) and what 4 slots of
    // 100 ms can end, within the search's precision of a rate that failed.
    rate_search::check_search(r, 4, 0.1, 150_000.0);
    assert!(us(r, "latency_us", "p99") <= 150_000.0, "{r}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("(auto)"), "{table}");
}

#[test]
fn live_lines_go_to_stderr_for_open_runs_only() {
    let _alone = alone();
    let run = |extra: &[&str]| {
        let (dir, path) = results_path();
        let out = concur()
            .current_dir(dir.path())
            .args([
                "run",
                "-w",
                "sleep:10ms",
                "-m",
                "pool:2",
                "-r",
                "1",
                "--warmup",
                "0",
            ])
            .args(extra)
            .arg("--json")
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let open = run(&["--rate", "40", "-n", "50", "--interval", "200ms"]);
    let live = open.lines().filter(|l| l.contains(" due, ")).count();
    assert!(live >= 3, "{open}");
    assert!(!open.contains("concur-live"), "{open}");
    let closed = run(&["-n", "20"]);
    assert!(!closed.contains(" due, "), "{closed}");
}

#[test]
fn a_warm_up_shows_no_live_lines_unless_verbose() {
    let _alone = alone();
    let stderr = |extra: &[&str]| {
        let (dir, path) = results_path();
        let out = concur()
            .current_dir(dir.path())
            .args(["run", "-w", "sleep:10ms", "-m", "pool:2", "-r", "1"])
            .args([
                "--warmup",
                "1",
                "--rate",
                "40",
                "-n",
                "20",
                "--interval",
                "100ms",
            ])
            .args(extra)
            .arg("--json")
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    // Tasks due so far, of each live line that starts with `prefix`: it only grows within a
    // run, so a drop is a second run's lines.
    let due = |text: &str, prefix: &str| -> Vec<u64> {
        text.lines()
            .filter(|l| l.starts_with(prefix) && l.contains(" due, "))
            .map(|l| {
                let before = l.split(" due, ").next().unwrap_or_default();
                before
                    .rsplit(' ')
                    .next()
                    .unwrap_or_default()
                    .parse()
                    .unwrap()
            })
            .collect()
    };
    let one_run = |due: &[u64], text: &str| {
        assert!(due.len() >= 2, "{text}");
        assert!(
            due.windows(2).all(|w| w[0] <= w[1]),
            "two runs' lines: {text}"
        );
    };
    let quiet = stderr(&[]);
    assert!(!quiet.contains("warm-up sleep"), "{quiet}");
    one_run(&due(&quiet, "sleep:10ms pool:2 ×20:"), &quiet);
    let verbose = stderr(&["--verbose"]);
    one_run(&due(&verbose, "warm-up sleep:10ms pool:2 ×20:"), &verbose);
    one_run(&due(&verbose, "sleep:10ms pool:2 ×20:"), &verbose);
}

#[test]
fn a_grain_releases_on_its_ticks_and_is_recorded() {
    let _alone = alone();
    // 40/s for 20 tasks on a 100 ms grain: releases at the ticks 0, 100, 200 ms…, four tasks
    // a tick, each as late as the tick after its due time (never early).
    let (out, lines) = run_study(&[
        "-w",
        "sleep:1ms",
        "-m",
        "pool:4",
        "--rate",
        "40",
        "-n",
        "20",
        "--grain",
        "100ms",
        "-r",
        "1",
    ]);
    let r = only_run(&lines);
    assert_eq!(r["tasks_ok"], 20);
    assert_eq!(r["grain_us"], 100_000, "{r}");
    assert_eq!(of_type(&lines, "cell")[0]["grain_us"], 100_000);
    // The table says the rate was released on ticks, beside the rate.
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("40.0 @100.0 ms"), "{table}");
    // Each tick's lag behind its tasks' due times: 0, 25, 50 and 75 ms. A release sleeps to
    // its tick, so the lag is never less than that (the machine may add to it).
    let lag = |q| us(r, "lag_us", q);
    assert!(lag("p50") >= 25_000.0, "{r}");
    assert!(lag("max") >= 75_000.0, "{r}");
    assert!(lag("p50") < 75_000.0, "{r}");
}

#[test]
fn bad_rates_are_refused_before_any_work() {
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "0"], "--rate '0'"),
        (&["--rate", "-5"], "--rate '-5'"),
        (&["--rate", "lots"], "--rate 'lots'"),
        (&["--rate", "500..100"], "--rate '500..100'"),
        (&["--duration", "5s"], "--duration '5s'"),
        (&["--rate", "auto"], "--rate auto needs --slo"),
        (
            &["--rate", "auto", "--slo", "p99 under 1s"],
            "--slo 'p99 under 1s'",
        ),
        (&["--rate", "auto", "--slo", "p99<soon"], "--slo 'p99<soon'"),
        (
            &["--rate", "10", "--slo", "p99<1s"],
            "--slo applies to --rate auto",
        ),
        (
            &["--rate", "auto", "--slo", "p99<1s", "--warmup", "1"],
            "--warmup does not apply",
        ),
        (
            &["--rate", "auto", "--slo", "p99<1s", "--peer", "p=true"],
            "--peer 'p=true' runs an external program, which follows no arrival schedule",
        ),
        (&["--grain", "1ms"], "--grain '1ms' applies to open runs"),
        (&["--rate", "10", "--grain", "0"], "--grain '0s' must be"),
        (&["--rate", "10", "--grain", "2s"], "--grain '2s' must be"),
    ];
    for (extra, needle) in cases {
        let (dir, path) = results_path();
        let out = concur()
            .current_dir(dir.path())
            .args(["run", "-w", "sleep:1ms", "-m", "seq"])
            .args(*extra)
            .arg("--json")
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains(needle),
            "{extra:?}: expected '{needle}' in {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{extra:?}: {err}");
        assert!(!path.exists(), "{extra:?}: results written");
    }
    // crawl and advise take --rate and refuse the same way.
    for cmd in [
        &["crawl", "http://127.0.0.1:9/", "--rate", "0"][..],
        &["advise", "-w", "fib:1", "--rate", "9..3"][..],
    ] {
        let out = concur().args(cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {out:?}");
    }
}
