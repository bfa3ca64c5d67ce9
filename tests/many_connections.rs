//! Thousands of connections at once: 10,000 under `async`, and more than 1,024 under `curl`,
//! `green` and `pool` (a descriptor numbered 1,024 or more is where select(2) stops working:
//! libcurl must be built to poll, see .cargo/config.toml). Heavy tests, in a binary of their
//! own so that no timing check runs beside them, and run one at a time.

mod common;

use std::time::Duration;

use common::*;
use concur::server::{InProcessServer, ServerOptions};

fn server() -> InProcessServer {
    InProcessServer::start(ServerOptions::ephemeral(), 2).expect("server starts")
}

#[test]
fn ten_thousand_concurrent_connections_are_served() {
    let _alone = alone();
    let s = server();
    let url = format!("http:{}/add?name={{rand}}&delay=4000", s.base_url());
    let (_, lines) = run_study(&[
        "-w",
        &url,
        "-m",
        "async:10000",
        "-n",
        "10000",
        "-r",
        "1",
        "--timeout",
        "120s",
    ]);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 1);
    let r = runs[0];
    assert_eq!(r["status"], "ok", "{}", r["error"]);
    assert_eq!(r["tasks_ok"], 10_000);
    assert_eq!(r["bytes"], 100_000);
    // Every request reached the server and none is left in flight.
    wait_for(
        "the server's handlers to finish",
        Duration::from_secs(10),
        || s.stats.snapshot().in_flight == 0,
    );
    let stats = s.stats.snapshot();
    assert_eq!(stats.requests, 10_000);
    // All 10,000 in flight at once: each waits 4 s at the server, and the client opens the
    // last of its connections well within that (about 0.5 s here, alone), so a client that
    // held back any (a cap, a pool of connections) shows less than 10,000.
    assert_eq!(stats.peak_in_flight, 10_000);
}

/// 1,200 requests of 1.5 s with 1,200 workers: every connection is open at once, so the
/// client's sockets take descriptors past 1,023. libcurl built without `HAVE_POLL` falls back
/// to select(), which cannot watch them: about half the requests of `curl:2000` failed with
/// "Could not connect to server", and no run had more than ~1,014 connections open.
#[test]
fn more_than_1024_connections_at_once_fail_nothing_under_curl_green_and_pool() {
    let _alone = alone();
    const W: u64 = 1_200;
    let (_, lines) = run_study(&[
        "-w",
        "http:/add?name={rand}&delay=1500",
        "-m",
        "curl:1200",
        "-m",
        "green:1200",
        "-m",
        "pool:1200",
        "-n",
        "1200",
        "-r",
        "1",
        "--timeout",
        "60s",
    ]);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 3, "{runs:?}");
    for r in runs {
        let m = &r["model"];
        assert_eq!(r["status"], "ok", "{m}: {}", r["error"]);
        assert_eq!(r["tasks_failed"], 0, "{m}: {}", r["failures"]);
        assert_eq!(r["tasks_ok"], W, "{m}");
        assert_eq!(r["bytes"], 10 * W, "{m}: 10 bytes a reply");
        // The study's own server saw more than 1,024 requests in flight at once: the client
        // held that many sockets, so some were numbered past 1,023.
        let peak = r["server_peak_in_flight"].as_u64().unwrap_or(0);
        assert!(
            (1_100..=W).contains(&peak),
            "{m}: only {peak} connections open at once"
        );
    }
}

/// `curl:600` runs its transfers on three libcurl multi handles of 200 (each with a connection
/// pool of its own, driven through libcurl's socket interface from one epoll set): every
/// request is answered, each of the 600 connections is opened once and kept for the next
/// requests, and 600 are in flight at once.
#[test]
fn curl_over_several_multi_handles_keeps_every_connection_alive() {
    let _alone = alone();
    let s = server();
    let url = format!("http:{}/add?name={{rand}}&delay=300", s.base_url());
    let (_, lines) = run_study(&[
        "-w",
        &url,
        "-m",
        "curl:600",
        "-n",
        "2400",
        "-r",
        "1",
        "--timeout",
        "60s",
    ]);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 1);
    let r = runs[0];
    assert_eq!(r["status"], "ok", "{}", r["error"]);
    assert_eq!(r["tasks_failed"], 0, "{}", r["failures"]);
    assert_eq!(r["tasks_ok"], 2_400);
    assert_eq!(r["bytes"], 24_000, "10 bytes a reply");
    assert_eq!(r["connections_opened"], 600, "{r}");
    assert_eq!(r["connections_reused"], 1_800, "{r}");
    wait_for(
        "the server's handlers to finish",
        Duration::from_secs(10),
        || s.stats.snapshot().in_flight == 0,
    );
    let stats = s.stats.snapshot();
    assert_eq!(stats.requests, 2_400);
    assert!(
        (500..=600).contains(&stats.peak_in_flight),
        "peak in flight {}",
        stats.peak_in_flight
    );
}
