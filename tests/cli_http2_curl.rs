//! `curl:W --http2` end to end against `concur serve` speaking HTTP/2: exact checksums over
//! h2c (prior knowledge) and h2 (ALPN over TLS), W streams multiplexed on one connection as
//! the server counted them, the ALPN fallback to HTTP/1.1 against a server that offers only
//! 1.1, and HTTP/1.1 kept without `--http2` against a server that offers h2.

mod common;

use common::*;
use serde_json::Value;

/// Every run is bounded: a request that hangs fails after this, a run after `RUN_LIMIT`.
const REQUEST_LIMIT: &str = "10s";
const RUN_LIMIT: &str = "60s";

/// `concur run -r 1 ARGS` (which must succeed) with its limits; its one run line.
fn one_run(args: &[&str]) -> Value {
    let mut all = vec![
        "-r",
        "1",
        "--request-timeout",
        REQUEST_LIMIT,
        "--timeout",
        RUN_LIMIT,
    ];
    all.extend_from_slice(args);
    let (_, lines) = run_study(&all);
    only_run(&lines).clone()
}

/// The server's `GET /stats`, over a connection of its own (HTTP/1.1; the self-signed
/// certificate is not checked: only the counters matter here).
fn stats(s: &Serve) -> Value {
    let mut body = Vec::new();
    let mut easy = curl::easy::Easy::new();
    easy.url(&format!("{}/stats", s.url)).unwrap();
    easy.http_version(curl::easy::HttpVersion::V11).unwrap();
    easy.ssl_verify_peer(false).unwrap();
    easy.ssl_verify_host(false).unwrap();
    easy.timeout(std::time::Duration::from_secs(10)).unwrap();
    {
        let mut t = easy.transfer();
        t.write_function(|d| {
            body.extend_from_slice(d);
            Ok(d.len())
        })
        .unwrap();
        t.perform().expect("GET /stats");
    }
    serde_json::from_slice(&body).expect("/stats is JSON")
}

/// Checks a run of `tasks` requests to `/add` (10 bytes each) that all went out in HTTP/2
/// on one connection.
fn assert_exact_over_one_h2_connection(r: &Value, tasks: u64) {
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["tasks_ok"], tasks, "{r}");
    assert_eq!(r["bytes"], 10 * tasks, "10 bytes per /add: {r}");
    assert_eq!(r["http_version"], "2", "{r}");
    assert_eq!(r["connections_opened"], 1, "one connection (PIPEWAIT): {r}");
    assert_eq!(r["connections_reused"], tasks - 1, "{r}");
    let peak = r["peak_streams_per_connection"].as_u64().expect("a peak");
    assert!((1..=8).contains(&peak), "at most W streams: {r}");
}

#[test]
fn curl_w_over_h2c_is_exact_on_one_connection() {
    let s = Serve::start(&[]);
    let url = format!("http:{}/add?delay=20", s.url);
    let r = one_run(&["-w", &url, "-m", "curl:8", "-n", "40", "--http2"]);
    assert_exact_over_one_h2_connection(&r, 40);
    let st = stats(&s);
    assert_eq!(st["requests"], 40, "{st}");
    assert_eq!(st["h2_connections"], 1, "{st}");
}

#[test]
fn curl_w_over_h2_by_alpn_is_exact_on_one_connection() {
    let s = Serve::tls_self_signed(&[], &[]);
    let url = format!("http:{}/add?delay=20", s.url);
    let ca = s.cert_path().to_string_lossy().into_owned();
    let r = one_run(&[
        "-w", &url, "-m", "curl:8", "-n", "40", "--http2", "--cacert", &ca,
    ]);
    assert_exact_over_one_h2_connection(&r, 40);
    assert!(r["tls_us"]["p50"].as_u64().unwrap() > 0, "{r}");
    let st = stats(&s);
    assert_eq!(st["h2_connections"], 1, "{st}");
    assert_eq!(
        st["tls_handshakes"],
        1 + 1,
        "the run's and this request's: {st}"
    );
}

#[test]
fn connections_c_spreads_the_w_streams_over_c_connections() {
    let s = Serve::start(&[]);
    let url = format!("http:{}/add?delay=50", s.url);
    let r = one_run(&[
        "-w",
        &url,
        "-m",
        "curl:8",
        "-n",
        "32",
        "--http2",
        "--connections",
        "2",
    ]);
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["bytes"], 320, "{r}");
    assert_eq!(r["http_version"], "2", "{r}");
    assert_eq!(r["connections_opened"], 2, "{r}");
    // ceil(8 / 2) streams on each connection, libcurl's cap: measured on libcurl's own clock,
    // neither more (a reused handle overlapping its previous stream) nor fewer.
    assert_eq!(
        r["peak_streams_per_connection"], 4,
        "ceil(8 / 2) streams a connection: {r}"
    );
    assert_eq!(stats(&s)["h2_connections"], 2);
}

#[test]
fn curl_100_is_100_streams_in_flight_on_one_connection() {
    let _alone = alone();
    let s = Serve::start(&[]);
    // Connections the server accepted before the run (this request's).
    let before = stats(&s)["connections"].as_u64().unwrap();
    let url = format!("http:{}/delay/300ms", s.url);
    let r = one_run(&["-w", &url, "-m", "curl:100", "-n", "100", "--http2"]);
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["tasks_ok"], 100, "{r}");
    assert_eq!(r["http_version"], "2", "{r}");
    assert_eq!(r["connections_opened"], 1, "{r}");
    assert_eq!(r["peak_streams_per_connection"], 100, "{r}");
    let st = stats(&s);
    // The run's one connection, and this /stats request's own (HTTP/1.1).
    assert_eq!(st["connections"].as_u64().unwrap() - before, 1 + 1, "{st}");
    assert_eq!(st["h2_connections"], 1, "{st}");
    assert_eq!(st["peak_in_flight"], 100, "all 100 at once: {st}");
}

#[test]
fn a_server_that_offers_only_http1_gets_http1_over_alpn() {
    let s = Serve::tls_self_signed(&["--http1-only"], &[]);
    let url = format!("http:{}/add?delay=5", s.url);
    let ca = s.cert_path().to_string_lossy().into_owned();
    let r = one_run(&[
        "-w", &url, "-m", "curl:4", "-n", "8", "--http2", "--cacert", &ca,
    ]);
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["bytes"], 80, "{r}");
    assert_eq!(r["http_version"], "1.1", "{r}");
    assert!(r.get("peak_streams_per_connection").is_none(), "{r}");
    // HTTP/1.1 carries one request at a time: still at most one connection (--connections 1).
    assert_eq!(r["connections_opened"], 1, "{r}");
    assert_eq!(stats(&s)["h2_connections"], 0);
}

#[test]
fn without_http2_a_server_that_offers_h2_is_spoken_to_in_http1() {
    let s = Serve::tls_self_signed(&[], &[]);
    let url = format!("http:{}/add?delay=5", s.url);
    let ca = s.cert_path().to_string_lossy().into_owned();
    for flags in [&[][..], &["--http1.1"][..]] {
        let mut args = vec!["-w", &url, "-m", "curl:4", "-n", "8", "--cacert", &ca];
        args.extend_from_slice(flags);
        let r = one_run(&args);
        assert_eq!(r["status"], "ok", "{flags:?}: {r}");
        assert_eq!(r["bytes"], 80, "{flags:?}: {r}");
        assert_eq!(r["http_version"], "1.1", "{flags:?}: {r}");
        // As before HTTP/2: one connection per transfer in flight.
        assert_eq!(r["connections_opened"], 4, "{flags:?}: {r}");
    }
    assert_eq!(stats(&s)["h2_connections"], 0);
}
