//! HTTP/2 in the tokio clients (`async`, `async-local`) against the delay server: h2c by prior
//! knowledge and h2 by ALPN over TLS with exact checksums, one connection carrying 100 streams
//! (as the server counted them), `--connections`, `--no-keepalive`, the fall back to HTTP/1.1
//! against a server that offers only it, and the refusals.

mod common;

use common::*;
use concur::server::{InProcessServer, ServeTls, ServerOptions, DEFAULT_MAX_STREAMS};
use serde_json::Value;

/// The tokio models, 4 workers each.
const TOKIO: &[&str] = &["async:4", "async-local:4"];

/// A delay server in this process, over TLS (a self-signed certificate, written to a file for
/// `--cacert`) or not.
fn server(tls: bool) -> (InProcessServer, tempfile::TempDir, std::path::PathBuf) {
    let s = InProcessServer::start(
        ServerOptions {
            tls: tls.then_some(ServeTls::SelfSigned),
            ..ServerOptions::ephemeral()
        },
        2,
    )
    .expect("server starts");
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    if let Some(cert) = &s.cert {
        std::fs::write(&ca, &cert.cert_pem).unwrap();
    }
    (s, dir, ca)
}

/// `concur run -w http:URL --http2 ARGS`, which must succeed; its run lines.
fn run_h2(url: &str, args: &[&str]) -> Vec<Value> {
    let w = format!("http:{url}");
    let mut all = vec!["-w", w.as_str(), "-r", "1", "--http2"];
    all.extend(args);
    let (_, lines) = run_study(&all);
    of_type(&lines, "run").into_iter().cloned().collect()
}

/// A run line's connection counts: (opened, reused).
fn conns(r: &Value) -> (u64, u64) {
    (
        r["connections_opened"].as_u64().unwrap(),
        r["connections_reused"].as_u64().unwrap(),
    )
}

#[test]
fn h2c_and_h2_over_tls_fetch_the_exact_checksum_on_one_connection() {
    for tls in [false, true] {
        let (s, _dir, ca) = server(tls);
        // 50 ms a request: the 4 streams of a slot-full client are sent long before the
        // first answer, so the peak is W exactly.
        let url = format!("{}/add?name=t{{rand}}&delay=50", s.base_url());
        let mut args = vec!["-n", "20", "-m", TOKIO[0], "-m", TOKIO[1]];
        if tls {
            args.extend(["--cacert", ca.to_str().unwrap()]);
        }
        let runs = run_h2(&url, &args);
        assert_eq!(runs.len(), TOKIO.len());
        for r in &runs {
            assert_eq!(r["status"], "ok", "{r}");
            assert_eq!(r["bytes"], 200, "10 bytes × 20: {r}");
            assert_eq!(r["http_version"], "2", "{r}");
            assert_eq!(
                conns(r),
                (1, 19),
                "one connection carries every stream: {r}"
            );
            // W streams at once on the one connection: multiplexed (a client that sent one
            // request at a time, async-local once, showed 1 and passed `1..=4`).
            assert_eq!(r["peak_streams_per_connection"], 4, "{r}");
            assert_eq!(
                r["server_max_concurrent_streams"],
                u64::from(DEFAULT_MAX_STREAMS),
                "{r}"
            );
            assert_eq!(r["tls_us"].is_object(), tls, "{r}");
        }
        let st = s.stats.snapshot();
        assert_eq!(st.requests, 40);
        assert_eq!((st.connections, st.h2_connections), (2, 2), "{st:?}");
    }
}

#[test]
fn without_http2_the_run_line_is_as_before() {
    let (s, _dir, _ca) = server(false);
    let w = format!("http:{}/add?name=x&delay=1", s.base_url());
    let (_, lines) = run_study(&["-w", &w, "-m", "async:2", "-n", "4", "-r", "1"]);
    let r = only_run(&lines);
    assert_eq!(r["bytes"], 40, "{r}");
    for field in [
        "http_version",
        "peak_streams_per_connection",
        "server_max_concurrent_streams",
    ] {
        assert!(r.get(field).is_none(), "{field}: {r}");
    }
    assert_eq!(s.stats.snapshot().h2_connections, 0);
}

#[test]
fn one_connection_carries_100_streams_at_once() {
    let (s, _dir, _ca) = server(false);
    let url = format!("{}/delay/300ms", s.base_url());
    let runs = run_h2(&url, &["-n", "100", "-m", "async:100"]);
    let r = &runs[0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["bytes"], 800, "\"delayed\\n\" × 100: {r}");
    assert_eq!(r["http_version"], "2", "{r}");
    assert_eq!(conns(r), (1, 99), "{r}");
    assert_eq!(r["peak_streams_per_connection"], 100, "{r}");
    let st = s.stats.snapshot();
    assert_eq!((st.connections, st.h2_connections), (1, 1), "{st:?}");
    assert_eq!(st.peak_in_flight, 100, "{st:?}");
}

#[test]
fn connections_spreads_the_streams_and_no_keepalive_opens_one_per_request() {
    let (s, _dir, _ca) = server(false);
    let url = format!("{}/delay/300ms", s.base_url());
    let runs = run_h2(
        &url,
        &["-n", "100", "-m", "async:100", "--connections", "4"],
    );
    let r = &runs[0];
    assert_eq!(r["bytes"], 800, "{r}");
    assert_eq!(conns(r), (4, 96), "{r}");
    assert_eq!(r["peak_streams_per_connection"], 25, "round robin: {r}");
    let st = s.stats.snapshot();
    assert_eq!((st.connections, st.h2_connections), (4, 4), "{st:?}");
    assert_eq!(st.peak_in_flight, 100, "{st:?}");

    let (s, _dir, _ca) = server(false);
    let url = format!("{}/add?name=k&delay=1", s.base_url());
    for m in TOKIO {
        let r = &run_h2(&url, &["-n", "8", "-m", m, "--no-keepalive"])[0];
        assert_eq!(r["bytes"], 80, "{r}");
        assert_eq!(conns(r), (8, 0), "a connection per request: {r}");
        assert_eq!(r["peak_streams_per_connection"], 1, "{r}");
        assert_eq!(r["http_version"], "2", "{r}");
    }
    assert_eq!(s.stats.snapshot().h2_connections, 16);
}

#[test]
fn a_server_that_offers_only_http1_gets_http1_recorded_as_such() {
    let server = Serve::tls_self_signed(&["--http1-only"], &[]);
    let url = format!("{}/add?name=f{{rand}}&delay=5", server.url);
    let ca = server.cert_path().to_str().unwrap().to_string();
    let runs = run_h2(
        &url,
        &["-n", "20", "-m", TOKIO[0], "-m", TOKIO[1], "--cacert", &ca],
    );
    for r in &runs {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["bytes"], 200, "{r}");
        assert_eq!(r["http_version"], "1.1", "{r}");
        let (opened, reused) = conns(r);
        assert!(
            (1..=4).contains(&opened) && opened + reused == 20,
            "the HTTP/1.1 pool: {r}"
        );
        assert!(r.get("peak_streams_per_connection").is_none(), "{r}");
    }
}

#[test]
fn an_open_run_over_http2_releases_every_arrival_as_a_stream_on_one_connection() {
    let (s, _dir, _ca) = server(false);
    // 50 ms a request, one released every 10 ms: about 5 in flight at once.
    let url = format!("{}/add?name=r{{rand}}&delay=50", s.base_url());
    let models = ["async:8", "async-local:8", "curl:8"];
    let mut args = vec!["-n", "40", "--rate", "100"];
    for m in &models {
        args.extend(["-m", m]);
    }
    let runs = run_h2(&url, &args);
    assert_eq!(runs.len(), models.len());
    for (r, m) in runs.iter().zip(models) {
        assert_eq!(r["model"], m, "{r}");
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(
            (r["tasks_ok"].as_u64(), r["tasks_failed"].as_u64()),
            (Some(40), Some(0)),
            "{r}"
        );
        assert_eq!(r["bytes"], 400, "10 bytes × 40: {r}");
        assert_eq!(r["http_version"], "2", "{r}");
        assert_eq!(r["rate_asked"], 100.0, "{r}");
        assert_eq!(
            conns(r),
            (1, 39),
            "every arrival a stream on one connection: {r}"
        );
        // Arrivals overlap (50 ms each, 10 ms apart): streams at once on the one connection.
        assert!(r["peak_streams_per_connection"].as_u64() >= Some(2), "{r}");
        // Latency is counted from each arrival's scheduled time, so it covers the service.
        assert!(
            us(r, "latency_us", "max") >= us(r, "service_us", "max"),
            "{r}"
        );
        assert!(
            us(r, "service_us", "p50") >= 50_000.0,
            "the server's 50 ms: {r}"
        );
    }
    let st = s.stats.snapshot();
    assert_eq!(st.requests, 120, "{st:?}");
    assert_eq!(
        (st.connections, st.h2_connections),
        (3, 3),
        "one per run: {st:?}"
    );
}

#[test]
fn http2_is_refused_where_it_cannot_be_spoken() {
    let w = "http:http://127.0.0.1:1/x";
    // Every model but the three whose clients speak HTTP/2, named here so that the code under
    // test does not choose them; the registry has no other.
    let http1_only = [
        "seq",
        "thread",
        "spawn",
        "fork",
        "pool:2",
        "rayon:2",
        "green:2",
        "actor:2",
        "jobs:2",
        "jobs-memory:2",
        "jobs-redis:2",
        "jobs-procs:2",
    ];
    let family = |m: &str| m.split(':').next().unwrap().to_string();
    let mut covered: Vec<String> = http1_only.iter().map(|m| family(m)).collect();
    covered.extend(concur::model::HTTP2_MODELS.iter().map(|m| m.to_string()));
    covered.sort();
    let mut registry: Vec<String> = concur::model::REGISTRY
        .iter()
        .map(|e| e.name.to_string())
        .collect();
    registry.sort();
    assert_eq!(
        covered, registry,
        "a model neither refused nor speaking HTTP/2"
    );
    for m in http1_only {
        let err = refused_before_any_run(&["run", "-w", w, "-m", m, "--http2"]);
        assert_eq!(
            err.trim(),
            format!("concur: --http2: model '{m}' speaks only HTTP/1.1 (models that speak HTTP/2: async, async-local, curl)"),
            "{m}"
        );
    }
    let err = refused_before_any_run(&["run", "-w", "sleep:1ms", "-m", "async:2", "--http2"]);
    assert_eq!(
        err.trim(),
        "concur: --http2 applies to http: workloads; 'sleep:1ms' is not one"
    );
    let err = refused_before_any_run(&[
        "run",
        "-w",
        w,
        "-m",
        "async:2",
        "--http2",
        "--connections",
        "0",
    ]);
    assert!(
        err.contains("--connections '0' must be at least 1"),
        "{err}"
    );
    for (args, why) in [
        (
            vec!["--http2", "--http1.1"],
            "the argument '--http2' cannot be used with '--http1.1'",
        ),
        (
            vec!["--connections", "2"],
            "--connections '2' applies with --http2 or --http3 (the connections that carry their streams)",
        ),
    ] {
        let mut all = vec!["run", "-w", w, "-m", "async:2"];
        all.extend(&args);
        let err = refused_before_any_run(&all);
        assert!(
            err.starts_with(&format!("concur: {why}")),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn crawl_with_http2_adds_h2_rows_beside_the_http1_rows_and_says_what_multiplexing_saved() {
    let (dir, path) = results_path();
    let advice = dir.path().join("advice.json");
    succeeds(
        concur()
            .args([
                "run", "crawl", "--quick", "--http2", "-r", "1", "--warmup", "0",
            ])
            .args(["-q", "--json"])
            .arg(&path)
            .arg("--export")
            .arg(format!("json={}", advice.display())),
    );
    let lines = read_lines(&path);
    let runs = of_type(&lines, "run");
    let h2 = |r: &&&Value| r["http2"] == true;
    // Every HTTP/1.1 row is still there, unchanged; the h2 rows are the models that speak it.
    let mut h2_models: Vec<&str> = runs
        .iter()
        .filter(h2)
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    h2_models.sort_unstable();
    assert_eq!(
        h2_models,
        ["async-local:100", "async:100", "async:1000", "curl:100"]
    );
    for m in [
        "seq",
        "thread",
        "pool:100",
        "async:100",
        "async-local:100",
        "curl:100",
        "green:100",
        "async:1000",
    ] {
        let h1: Vec<&&Value> = runs
            .iter()
            .filter(|r| r["model"] == m && r.get("http2").is_none())
            .collect();
        assert_eq!(h1.len(), 1, "{m}: {h1:?}");
        assert_eq!(h1[0]["status"], "ok", "{}", h1[0]);
        if let Some(v) = h1[0].get("http_version") {
            assert_eq!(v, "1.1", "{m}");
        }
    }
    for r in runs.iter().filter(h2) {
        let m = r["model"].as_str().unwrap();
        let h1 = runs
            .iter()
            .find(|o| o["model"] == m && o.get("http2").is_none())
            .unwrap();
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["http_version"], "2", "{r}");
        assert_eq!(r["bytes"], h1["bytes"], "{m}: the same replies over both");
        assert_eq!(r["connections_opened"], 1, "{r}");
    }
    let a100 = runs
        .iter()
        .find(|r| r["model"] == "async:100" && h2(r))
        .unwrap();
    assert_eq!(a100["peak_streams_per_connection"], 100, "{a100}");
    // The advice compares each model with itself over HTTP/1.1.
    let doc: Value = serde_json::from_slice(&std::fs::read(&advice).unwrap()).unwrap();
    let text = doc["advice"].to_string();
    assert!(
        text.contains("Over HTTP/2, every request in flight"),
        "{text}"
    );
    for m in ["async:100", "curl:100"] {
        assert!(
            text.contains(&format!(
                "{m} 1 connection instead of 100 (99 fewer TCP handshakes)"
            )),
            "{m}: {text}"
        );
    }
}

#[test]
fn http2_on_a_study_without_http_work_is_refused() {
    for study in ["gil", "mailer", "tasks"] {
        let err = refused_before_any_run(&["run", study, "--http2"]);
        assert_eq!(
            err.trim(),
            format!("concur: --http2 adds HTTP/2 rows to the crawl study (and the tour's crawl); the {study} study makes no HTTP requests"),
            "{study}"
        );
    }
}
