//! HTTP/3 in the tokio clients (`async`, `async-local`, `--http3`) against concur's own server
//! serving HTTP/3 (`--http3`, QUIC on the UDP port of its TCP port, a self-signed certificate
//! trusted with `--cacert`): exact checksums over one connection and over `--connections`,
//! large bodies, `--no-keepalive`, a server that refuses every request or is gone, an
//! untrusted certificate, the crawl study's `h3` rows, and the refusals.

mod common;

use common::*;
use concur::server::{InProcessServer, ServeTls, ServerOptions};
use serde_json::Value;

/// The tokio models, 4 workers each.
const TOKIO: &[&str] = &["async:4", "async-local:4"];

/// A delay server in this process serving HTTP/1.1, HTTP/2 and HTTP/3 over TLS (a self-signed
/// certificate, written to a file for `--cacert`).
fn server() -> (InProcessServer, tempfile::TempDir, String) {
    let s = InProcessServer::start(
        ServerOptions {
            tls: Some(ServeTls::SelfSigned),
            http3: true,
            ..ServerOptions::ephemeral()
        },
        2,
    )
    .expect("server starts");
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &s.cert.as_ref().expect("a certificate").cert_pem).unwrap();
    let ca = ca.to_str().unwrap().to_string();
    (s, dir, ca)
}

/// `concur run -w http:URL --http3 ARGS`, exiting with `code`; its run lines.
fn run_h3(url: &str, args: &[&str], code: i32) -> Vec<Value> {
    let w = format!("http:{url}");
    let mut all = vec!["-w", w.as_str(), "-r", "1", "--http3"];
    all.extend(args);
    let (_, lines) = run_study_exiting(&all, code);
    of_type(&lines, "run").into_iter().cloned().collect()
}

/// A run line's connection counts: (opened, reused).
fn conns(r: &Value) -> (u64, u64) {
    (
        r["connections_opened"].as_u64().unwrap(),
        r["connections_reused"].as_u64().unwrap(),
    )
}

/// A run line's task counts: (ok, failed).
fn tasks(r: &Value) -> (u64, u64) {
    (
        r["tasks_ok"].as_u64().unwrap(),
        r["tasks_failed"].as_u64().unwrap(),
    )
}

#[test]
fn both_tokio_models_fetch_the_exact_checksum_as_streams_on_one_quic_connection() {
    let (s, _dir, ca) = server();
    // 50 ms a request: the 4 streams of a full client are open long before the first answer.
    let url = format!("{}/add?name=t{{rand}}&delay=50", s.base_url());
    assert!(url.starts_with("https://"), "{url}");
    let runs = run_h3(
        &url,
        &["-n", "20", "-m", TOKIO[0], "-m", TOKIO[1], "--cacert", &ca],
        0,
    );
    assert_eq!(runs.len(), TOKIO.len());
    for r in &runs {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(tasks(r), (20, 0), "{r}");
        assert_eq!(r["bytes"], 200, "10 bytes × 20: {r}");
        assert_eq!(r["http3"], true, "{r}");
        assert_eq!(r["http_version"], "3", "{r}");
        assert_eq!(
            conns(r),
            (1, 19),
            "one connection carries every stream: {r}"
        );
        assert_eq!(r["peak_streams_per_connection"], 4, "{r}");
        // QUIC's handshake is TLS's: a TLS time, no TCP connect.
        assert!(r["tls_us"].is_object(), "{r}");
        assert!(r.get("connect_us").is_none(), "{r}");
    }
    let st = s.stats.snapshot();
    assert_eq!(st.requests, 40, "{st:?}");
    assert_eq!(st.h3_connections, 2, "one QUIC connection a run: {st:?}");
}

#[test]
fn connections_spreads_the_streams_and_bodies_arrive_whole() {
    let (s, _dir, ca) = server();
    let url = format!("{}/delay/300ms", s.base_url());
    let r = &run_h3(
        &url,
        &[
            "-n",
            "100",
            "-m",
            "async:100",
            "--connections",
            "4",
            "--cacert",
            &ca,
        ],
        0,
    )[0];
    assert_eq!(tasks(r), (100, 0), "{r}");
    assert_eq!(r["bytes"], 800, "\"delayed\\n\" × 100: {r}");
    assert_eq!(conns(r), (4, 96), "{r}");
    assert_eq!(
        r["peak_streams_per_connection"], 25,
        "a task group a connection: {r}"
    );
    assert_eq!(s.stats.snapshot().peak_in_flight, 100);

    // 200,000 bytes a response, 10 at once on one connection: far beyond QUIC's first windows.
    let url = format!("{}/bytes/200000", s.base_url());
    for m in TOKIO {
        let r = &run_h3(&url, &["-n", "10", "-m", m, "--cacert", &ca], 0)[0];
        assert_eq!(tasks(r), (10, 0), "{r}");
        assert_eq!(r["bytes"], 2_000_000, "{m}: {r}");
    }
}

#[test]
fn no_keepalive_opens_a_quic_connection_per_request() {
    let (s, _dir, ca) = server();
    let url = format!("{}/add?name=k&delay=1", s.base_url());
    for m in TOKIO {
        let r = &run_h3(
            &url,
            &["-n", "8", "-m", m, "--no-keepalive", "--cacert", &ca],
            0,
        )[0];
        assert_eq!(tasks(r), (8, 0), "{r}");
        assert_eq!(r["bytes"], 80, "{r}");
        assert_eq!(conns(r), (8, 0), "a connection per request: {r}");
        assert_eq!(r["peak_streams_per_connection"], 1, "{r}");
    }
    assert_eq!(s.stats.snapshot().h3_connections, 16);
}

#[test]
fn a_kept_connection_outlives_gaps_between_arrivals_longer_than_the_idle_timeout() {
    let (s, _dir, ca) = server();
    // QUIC's idle timeout is the request timeout (1 s); arrivals come 1.25 s apart.
    let url = format!("{}/add?name=i{{rand}}&delay=5", s.base_url());
    let r = &run_h3(
        &url,
        &[
            "-n",
            "3",
            "-m",
            "async:2",
            "--rate",
            "0.8",
            "--request-timeout",
            "1s",
            "--cacert",
            &ca,
        ],
        0,
    )[0];
    assert_eq!(tasks(r), (3, 0), "{r}");
    assert_eq!(conns(r), (1, 2), "kept by its PINGs: {r}");
    assert_eq!(s.stats.snapshot().h3_connections, 1);
}

#[test]
fn refused_requests_and_a_gone_server_are_counted_as_errors() {
    let (s, _dir, ca) = server();
    // The server answers every request 503: each is a failed task, all of them counted.
    let url = format!("{}/status/503", s.base_url());
    for r in run_h3(
        &url,
        &["-n", "12", "-m", TOKIO[0], "-m", TOKIO[1], "--cacert", &ca],
        1,
    ) {
        assert_eq!(tasks(&r), (0, 12), "{r}");
        assert_eq!(r["failures"]["http_5xx"], 12, "{r}");
        assert_eq!(r["http_version"], "3", "{r}");
    }
    assert_eq!(s.stats.snapshot().requests, 24);
    // The server gone: no QUIC answer, every request fails at the request timeout.
    let base = s.base_url();
    drop(s);
    let url = format!("{base}/add?name=g&delay=1");
    for r in run_h3(
        &url,
        &[
            "-n",
            "6",
            "-m",
            TOKIO[0],
            "-m",
            TOKIO[1],
            "--cacert",
            &ca,
            "--request-timeout",
            "500ms",
        ],
        1,
    ) {
        assert_eq!(tasks(&r), (0, 6), "{r}");
        assert_eq!(r["bytes"], 0, "{r}");
        let failed: u64 = r["failures"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(failed, 6, "{r}");
    }
}

#[test]
fn an_untrusted_certificate_is_refused_by_the_same_verifier_as_over_tcp() {
    let (s, _dir, _ca) = server();
    let url = format!("{}/add?name=u&delay=1", s.base_url());
    let r = &run_h3(&url, &["-n", "3", "-m", "async:1"], 1)[0];
    assert_eq!(tasks(r), (0, 3), "{r}");
    assert_eq!(r["failures"]["tls"], 3, "{r}");
    // -k trusts it, as over TCP.
    let r = &run_h3(&url, &["-n", "3", "-m", "async:1", "-k"], 0)[0];
    assert_eq!((tasks(r), &r["bytes"]), ((3, 0), &Value::from(30)), "{r}");
}

#[test]
fn crawl_with_http3_adds_h3_rows_beside_the_others() {
    let (dir, path) = results_path();
    let advice = dir.path().join("advice.json");
    run_study_to(
        &path,
        &[
            "crawl",
            "--quick",
            "--http2",
            "--http3",
            "-r",
            "1",
            "--export",
            &format!("json={}", advice.display()),
        ],
    );
    let lines = read_lines(&path);
    let runs = of_type(&lines, "run");
    let h3: Vec<&&Value> = runs.iter().filter(|r| r["http3"] == true).collect();
    let mut models: Vec<&str> = h3.iter().map(|r| r["model"].as_str().unwrap()).collect();
    models.sort_unstable();
    assert_eq!(models, ["async-local:100", "async:100", "async:1000"]);
    for r in h3 {
        let m = r["model"].as_str().unwrap();
        let h1 = runs
            .iter()
            .find(|o| o["model"] == m && o.get("http2").is_none() && o.get("http3").is_none())
            .unwrap();
        let h2 = runs
            .iter()
            .find(|o| o["model"] == m && o["http2"] == true)
            .unwrap();
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["http_version"], "3", "{r}");
        assert_eq!(h2["http_version"], "2", "{h2}");
        assert_eq!(
            r["bytes"], h1["bytes"],
            "{m}: the same replies over every version"
        );
        assert_eq!(r["bytes"], h2["bytes"], "{m}");
        assert_eq!(r["connections_opened"], 1, "{r}");
        // QUIC is always TLS: the study's server ran over TLS for every row.
        assert!(h1["tls_us"].is_object(), "{h1}");
    }
    // The advice compares each model over HTTP/3 with itself over HTTP/1.1, as over HTTP/2.
    let doc: Value = serde_json::from_slice(&std::fs::read(&advice).unwrap()).unwrap();
    let text = doc["advice"].to_string();
    let h3 = text
        .split_once("Over HTTP/3, every request in flight a stream of one QUIC connection")
        .map(|(_, after)| after)
        .unwrap_or_else(|| panic!("no HTTP/3 advice: {text}"));
    assert!(
        h3.contains("async:100 1 connection instead of 100 (99 fewer TCP and TLS handshakes)"),
        "{text}"
    );
}

#[test]
fn http3_is_refused_where_it_cannot_be_spoken() {
    let w = "http:https://127.0.0.1:1/x";
    for m in ["seq", "thread", "pool:2", "green:2", "curl:2", "actor:2"] {
        let err = refused_before_any_run(&["run", "-w", w, "-m", m, "--http3"]);
        assert_eq!(
            err.trim(),
            format!("concur: --http3: model '{m}' does not speak HTTP/3 (models that speak HTTP/3: async, async-local)"),
            "{m}"
        );
    }
    let err = refused_before_any_run(&[
        "run",
        "-w",
        "http:http://127.0.0.1:1/x",
        "-m",
        "async:2",
        "--http3",
    ]);
    assert_eq!(
        err.trim(),
        "concur: --http3 needs an https:// URL (QUIC is always TLS); 'http://127.0.0.1:1/x' is not one"
    );
    let err = refused_before_any_run(&["run", "-w", w, "-m", "async:2", "--http3", "--http2"]);
    assert_eq!(
        err.trim(),
        "concur: --http3 and --http2 ask for two versions of the same cells; give one (the crawl study takes both: rows of each)"
    );
    let err = refused_before_any_run(&["run", "-w", "sleep:1ms", "-m", "async:2", "--http3"]);
    assert_eq!(
        err.trim(),
        "concur: --http3 applies to http: workloads; 'sleep:1ms' is not one"
    );
    let err = refused_before_any_run(&["run", "-w", w, "-m", "async:2", "--connections", "3"]);
    assert_eq!(
        err.trim(),
        "concur: --connections '3' applies with --http2 or --http3 (the connections that carry their streams)"
    );
    let err =
        refused_before_any_run(&["run", "crawl", "--http3", "--hub", "redis://127.0.0.1:1/0"]);
    assert_eq!(
        err.trim(),
        "concur: --http3 with --hub: the study's own server (on an agent or here) serves no HTTP/3 over a hub; give --url https://HOST:PORT of a server that does (concur serve --http3)"
    );
    for study in ["gil", "mailer", "tasks"] {
        let err = refused_before_any_run(&["run", study, "--http3"]);
        assert_eq!(
            err.trim(),
            format!("concur: --http3 adds HTTP/3 rows to the crawl study (and the tour's crawl); the {study} study makes no HTTP requests"),
        );
    }
}
