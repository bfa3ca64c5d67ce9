//! The delay server over HTTP/2: h2c by prior knowledge and h2 by ALPN answer every route as
//! HTTP/1.1 does, on the same ports; `--http1-only` refuses h2c and negotiates http/1.1;
//! one connection carries 100 streams at once (`/stats`: one connection, 100 in flight) and
//! `--max-streams` bounds them; the limits hold per stream and per connection.
//!
//! The system `curl` (built with nghttp2) is the client where it can be; for many streams over
//! one h2c connection the client is hyper's own, since curl 7.88 fails every stream after the
//! first on a reused prior-knowledge connection ("Error in the HTTP2 framing layer",
//! curl/curl#10634, fixed in 8.0).

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use common::{wait_for, Serve};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// `curl -sS ARGS URL`: the status code, the HTTP version curl saw (`1.1`, `2`, or `0` when
/// it got no answer), the body, and curl's exit code.
fn curl(args: &[&str], url: &str) -> (u16, String, Vec<u8>, i32) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-w",
            "\n%{http_code} %{http_version}",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs (the tests need the system curl, with HTTP/2)");
    let text = out.stdout;
    let cut = text
        .iter()
        .rposition(|&b| b == b'\n')
        .expect("curl's -w line");
    let tail = String::from_utf8_lossy(&text[cut + 1..]).to_string();
    let mut parts = tail.split(' ');
    let code = parts.next().unwrap().parse().unwrap();
    let version = parts.next().unwrap().to_string();
    (
        code,
        version,
        text[..cut].to_vec(),
        out.status.code().unwrap_or(-1),
    )
}

/// `GET /stats` over HTTP/1.1 (its own connection, counted in `connections`).
fn stats(base: &str, tls: &[&str]) -> serde_json::Value {
    let mut args = vec!["--http1.1"];
    args.extend_from_slice(tls);
    let (code, _, body, _) = curl(&args, &format!("{base}/stats"));
    assert_eq!(code, 200);
    serde_json::from_slice(&body).unwrap()
}

/// The routes checked over every protocol, with the status each must answer.
const ROUTES: &[(&str, u16)] = &[
    ("/add?delay=5", 200),
    ("/add?delay=0&abcdefghij", 200),
    ("/bytes/100000", 200),
    ("/bytes/0", 200),
    ("/delay/20ms", 200),
    ("/status/418", 418),
    ("/add?delay=x", 400),
    ("/add?delay=999999999", 400),
    ("/bytes/99G", 400),
    ("/no/such/route", 404),
];

/// Every route answers over `h2` (curl's flags to speak it) exactly as over HTTP/1.1 on the
/// same port: the same status and the same body; errors are the same JSON.
fn same_answers(base: &str, h2: &[&str], tls: &[&str]) {
    for (path, want) in ROUTES {
        let url = format!("{base}{path}");
        let h1_args: Vec<&str> = [&["--http1.1"][..], tls].concat();
        let h2_args: Vec<&str> = [h2, tls].concat();
        let (c1, v1, b1, _) = curl(&h1_args, &url);
        let (c2, v2, b2, _) = curl(&h2_args, &url);
        assert_eq!((c1, v1.as_str()), (*want, "1.1"), "{url} over HTTP/1.1");
        assert_eq!((c2, v2.as_str()), (*want, "2"), "{url} over HTTP/2");
        assert_eq!(
            b1, b2,
            "{url}: the bodies differ between HTTP/1.1 and HTTP/2"
        );
        // The server's own errors are JSON (`/status/CODE` answers the code it is asked for).
        if *want >= 400 && !path.starts_with("/status/") {
            let e: serde_json::Value = serde_json::from_slice(&b2)
                .unwrap_or_else(|_| panic!("{url}: not JSON: {}", String::from_utf8_lossy(&b2)));
            assert!(e["error"].is_string(), "{url}: {e}");
        }
    }
    let (_, _, add, _) = curl(&[h2, tls].concat(), &format!("{base}/add?delay=5"));
    assert_eq!(add, concur::server::ADD_BODY);
    let (_, _, bytes, _) = curl(&[h2, tls].concat(), &format!("{base}/bytes/100000"));
    assert_eq!(bytes.len(), 100_000);
}

#[test]
fn h2c_by_prior_knowledge_answers_every_route_as_http1_does_on_the_same_port() {
    let s = Serve::start(&[]);
    same_answers(&s.url, &["--http2-prior-knowledge"], &[]);
    let st = stats(&s.url, &[]);
    assert_eq!(st["h2_connections"], ROUTES.len() as u64 + 2, "{st}");
    // Two curls a route, two more, and this probe.
    assert_eq!(st["connections"], 2 * ROUTES.len() as u64 + 3, "{st}");
}

#[test]
fn h2_by_alpn_answers_every_route_as_http1_does_on_the_same_tls_port() {
    let s = Serve::tls_self_signed(&[], &[]);
    let cert = s.cert_path().to_str().unwrap().to_string();
    let tls = ["--cacert", cert.as_str()];
    same_answers(&s.url, &["--http2"], &tls);
    let st = stats(&s.url, &tls);
    assert_eq!(st["h2_connections"], ROUTES.len() as u64 + 2, "{st}");
    assert_eq!(st["tls_handshakes"], 2 * ROUTES.len() as u64 + 3, "{st}");
}

#[test]
fn http1_only_refuses_h2c_and_negotiates_http11_by_alpn() {
    let plain = Serve::start(&["--http1-only"]);
    let (code, version, _, rc) = curl(
        &["--http2-prior-knowledge"],
        &format!("{}/add?delay=5", plain.url),
    );
    assert!(
        rc != 0 && code == 0 && version == "0",
        "h2c got an answer: {code} HTTP/{version}"
    );
    let (code, version, body, _) = curl(&[], &format!("{}/add?delay=5", plain.url));
    assert_eq!(
        (code, version.as_str(), &body[..]),
        (200, "1.1", &b"ok: added\n"[..])
    );
    assert_eq!(stats(&plain.url, &[])["h2_connections"], 0);

    let tls = Serve::tls_self_signed(&["--http1-only"], &[]);
    let cert = tls.cert_path().to_str().unwrap().to_string();
    let (code, version, body, _) = curl(
        &["--http2", "--cacert", &cert],
        &format!("{}/add?delay=5", tls.url),
    );
    assert_eq!(
        (code, version.as_str(), &body[..]),
        (200, "1.1", &b"ok: added\n"[..])
    );
    assert_eq!(stats(&tls.url, &["--cacert", &cert])["h2_connections"], 0);
}

#[test]
fn max_streams_zero_is_refused_with_one_line() {
    let out = common::concur()
        .args(["serve", "--max-streams", "0"])
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--max-streams '0' must be at least 1"),
        "{err}"
    );
}

/// A runtime for hyper's client.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An h2c connection to `addr` by prior knowledge, with `window` bytes of stream window.
async fn h2c<B>(addr: SocketAddr, window: u32) -> hyper::client::conn::http2::SendRequest<B>
where
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(window)
        .handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

fn get(path: &str) -> hyper::Request<Empty<Bytes>> {
    hyper::Request::get(format!("http://localhost{path}"))
        .body(Empty::new())
        .unwrap()
}

/// `n` GETs of `path` at once over one h2c connection; the answers' bodies, then `/stats`
/// asked over the same connection.
fn streams_over_one_connection(
    addr: SocketAddr,
    n: usize,
    path: &str,
) -> (Vec<Bytes>, serde_json::Value) {
    runtime().block_on(async {
        let mut send = h2c(addr, 65_535).await;
        // One request first: its answer comes after the server's SETTINGS, so that the client
        // knows the server's stream limit before it opens the others.
        let first = send.send_request(get("/add?delay=0")).await.unwrap();
        first.into_body().collect().await.unwrap();
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let mut send = send.clone();
                let req = get(path);
                tokio::spawn(async move {
                    let resp = send.send_request(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    assert_eq!(resp.version(), hyper::Version::HTTP_2);
                    resp.into_body().collect().await.unwrap().to_bytes()
                })
            })
            .collect();
        let mut bodies = Vec::new();
        for t in tasks {
            bodies.push(t.await.unwrap());
        }
        let resp = send.clone().send_request(get("/stats")).await.unwrap();
        let st = resp.into_body().collect().await.unwrap().to_bytes();
        (bodies, serde_json::from_slice(&st).unwrap())
    })
}

#[test]
fn one_h2c_connection_carries_100_streams_at_once() {
    let s = Serve::start(&[]);
    let (bodies, st) = streams_over_one_connection(s.addr, 100, "/add?delay=300");
    assert!(bodies.iter().all(|b| &b[..] == concur::server::ADD_BODY));
    // One connection carried them all.
    assert_eq!(st["connections"], 1, "{st}");
    assert_eq!(st["h2_connections"], 1, "{st}");
    assert_eq!(st["peak_in_flight"], 100, "{st}");
    // `/stats` is not counted as a request.
    assert_eq!(st["requests"], 101, "{st}");
}

#[test]
fn max_streams_bounds_the_requests_open_on_one_connection() {
    let s = Serve::start(&["--max-streams", "10"]);
    let (bodies, st) = streams_over_one_connection(s.addr, 40, "/add?delay=100");
    assert_eq!(bodies.len(), 40);
    assert!(bodies.iter().all(|b| &b[..] == concur::server::ADD_BODY));
    assert_eq!(st["h2_connections"], 1, "{st}");
    assert_eq!(st["peak_in_flight"], 10, "{st}");
}

#[test]
fn one_h2_tls_connection_carries_100_streams_with_curl_parallel() {
    let s = Serve::tls_self_signed(&[], &[]);
    let cert = s.cert_path().to_str().unwrap().to_string();
    let urls: Vec<String> = (0..100)
        .map(|i| format!("{}/add?delay=300&i={i}", s.url))
        .collect();
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--http2", "--cacert", &cert])
        .args([
            "--parallel",
            "--parallel-max",
            "100",
            "-w",
            "[%{http_version}]",
        ])
        .args(&urls)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("ok: added\n").count(), 100, "{text}");
    assert_eq!(text.matches("[2]").count(), 100, "{text}");
    let st = stats(&s.url, &["--cacert", &cert]);
    // curl's connection and this probe's.
    assert_eq!(st["connections"], 2, "{st}");
    assert_eq!(st["h2_connections"], 1, "{st}");
    assert_eq!(st["peak_in_flight"], 100, "{st}");
}

#[test]
fn a_silent_h2c_connection_is_closed_after_the_idle_timeout() {
    use std::io::{Read, Write};
    let s = Serve::start(&["--idle-timeout", "1s"]);
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The preface and an empty SETTINGS frame, then nothing.
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    let started = std::time::Instant::now();
    let mut sink = Vec::new();
    // The server's SETTINGS, its ACK, then GOAWAY or EOF: read to the end.
    let _ = c.read_to_end(&mut sink);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(8), "closed after {waited:?}");
    wait_for(
        "the idle timeout to be counted",
        Duration::from_secs(5),
        || {
            let st = stats(&s.url, &[]);
            st["idle_timeouts"] == 1 && st["h2_connections"] == 1
        },
    );
}

#[test]
fn an_h2_client_that_grants_no_window_is_closed_after_the_write_timeout() {
    let s = Serve::start(&["--write-timeout", "1s", "--idle-timeout", "30s"]);
    let addr = s.addr;
    let url = s.url.clone();
    runtime().block_on(async move {
        // A 64 KiB stream window, never opened further: the body is never read.
        let mut send = h2c(addr, 65_535).await;
        let resp = send.send_request(get("/bytes/10M")).await.unwrap();
        assert_eq!(resp.status(), 200);
        let started = std::time::Instant::now();
        let url2 = url.clone();
        tokio::task::spawn_blocking(move || {
            wait_for(
                "the write timeout to close the connection",
                Duration::from_secs(10),
                || {
                    let st = stats(&url2, &[]);
                    st["write_timeouts"] == 1 && st["open_connections"] == 1
                },
            )
        })
        .await
        .unwrap();
        assert!(started.elapsed() >= Duration::from_millis(900));
        drop(resp);
    });
}

/// A request body that sends one chunk and then nothing, never ending.
struct Stalled(bool);

impl hyper::body::Body for Stalled {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if self.0 {
            return std::task::Poll::Pending;
        }
        self.0 = true;
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(
            b"part",
        )))))
    }
}

#[test]
fn the_body_timeout_cuts_one_stream_and_the_connections_others_go_on() {
    use http_body_util::Either;
    let s = Serve::start(&["--body-timeout", "1s"]);
    let addr = s.addr;
    runtime().block_on(async move {
        let send = h2c::<Either<Empty<Bytes>, Stalled>>(addr, 65_535).await;
        let post = hyper::Request::post("http://localhost/echo")
            .body(Either::Right(Stalled(false)))
            .unwrap();
        let get = hyper::Request::get("http://localhost/add?delay=1500")
            .body(Either::Left(Empty::new()))
            .unwrap();
        let (mut a, mut b) = (send.clone(), send.clone());
        let stalled = tokio::spawn(async move { a.send_request(post).await.unwrap() });
        let slow = tokio::spawn(async move { b.send_request(get).await.unwrap() });
        let cut = stalled.await.unwrap();
        assert_eq!(cut.status(), 408);
        assert!(cut.headers().get("connection").is_none());
        let e: serde_json::Value =
            serde_json::from_slice(&cut.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert!(
            e["error"].as_str().unwrap().contains("--body-timeout 1s"),
            "{e}"
        );
        let done = slow.await.unwrap();
        assert_eq!(done.status(), 200);
        let body = done.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], concur::server::ADD_BODY);
        let st = send
            .clone()
            .send_request(
                hyper::Request::get("http://localhost/stats")
                    .body(Either::Left(Empty::new()))
                    .unwrap(),
            )
            .await
            .unwrap();
        let st: serde_json::Value =
            serde_json::from_slice(&st.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(st["body_timeouts"], 1, "{st}");
        // One connection carried all three.
        assert_eq!(st["connections"], 1, "{st}");
        assert_eq!(st["h2_connections"], 1, "{st}");
    });
}

/// `GET PATH` over HTTP/1.1 on a connection of its own: the status and the body (status 0 when
/// the server closed the connection without an answer).
fn get_h1(addr: SocketAddr, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut text = Vec::new();
    let _ = s.read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text).to_string();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
    (status, body.unwrap_or_default())
}

/// `/stats` over an HTTP/2 connection the test holds.
async fn stats_over<B>(send: &mut hyper::client::conn::http2::SendRequest<B>) -> serde_json::Value
where
    B: hyper::body::Body + Default + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let req = hyper::Request::get("http://localhost/stats")
        .body(B::default())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap()
}

/// Waits, in async code, until `cond` holds, at most `limit`.
async fn until<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + limit;
    while !cond().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn an_h2c_connection_past_the_connection_cap_is_answered_503_and_closed() {
    let s = Serve::start(&["--max-connections", "2"]);
    let addr = s.addr;
    runtime().block_on(async move {
        let mut a = h2c::<Empty<Bytes>>(addr, 65_535).await;
        // This connection is the only one open.
        until(
            "this connection to be the only one open",
            Duration::from_secs(10),
            || {
                let mut a = a.clone();
                async move { stats_over(&mut a).await["open_connections"] == 1 }
            },
        )
        .await;
        let mut b = h2c::<Empty<Bytes>>(addr, 65_535).await;
        assert_eq!(
            b.send_request(get("/add?delay=0")).await.unwrap().status(),
            200
        );
        // The third, at the cap: the preface of h2c gets the raw HTTP/1.1 503 and a close.
        let refused = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = c.write_all(concur::server::conn::H2_PREFACE);
            let mut text = Vec::new();
            let _ = c.read_to_end(&mut text);
            String::from_utf8_lossy(&text).to_string()
        })
        .await
        .unwrap();
        assert!(refused.starts_with("HTTP/1.1 503 "), "{refused}");
        assert!(
            refused.contains("the server has 2 connections open, its limit (--max-connections)"),
            "{refused}"
        );
        let st = stats_over(&mut a).await;
        assert_eq!(st["over_capacity"], 1, "{st}");
        assert_eq!(st["open_connections"], 2, "{st}");
        assert_eq!(st["h2_connections"], 2, "{st}");
        // One closes: a new connection is served again.
        drop(b);
        until(
            "the second connection to close",
            Duration::from_secs(10),
            || {
                let mut a = a.clone();
                async move { stats_over(&mut a).await["open_connections"] == 1 }
            },
        )
        .await;
        let mut d = h2c::<Empty<Bytes>>(addr, 65_535).await;
        let resp = d.send_request(get("/add?delay=0")).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(stats_over(&mut a).await["over_capacity"], 1);
    });
}

/// The server's drain on SIGTERM (`ServerOptions::shutdown_grace`, 10 s for `concur serve`).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

#[test]
fn sigterm_lets_the_h2_streams_in_flight_finish_and_the_server_exits_0() {
    let _alone = common::alone();
    let mut s = Serve::start(&[]);
    let addr = s.addr;
    let pid = s.child.id() as i32;
    const DELAY_MS: u64 = 1500;
    let (bodies, took) = runtime().block_on(async move {
        let send = h2c::<Empty<Bytes>>(addr, 65_535).await;
        let streams: Vec<_> = (0..5)
            .map(|i| {
                let mut send = send.clone();
                let req = get(&format!("/add?delay={DELAY_MS}&i={i}"));
                tokio::spawn(async move {
                    let resp = send.send_request(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    resp.into_body().collect().await.unwrap().to_bytes()
                })
            })
            .collect();
        until("5 streams in flight", Duration::from_secs(10), || {
            let mut send = send.clone();
            async move { stats_over(&mut send).await["in_flight"] == 5 }
        })
        .await;
        // SAFETY: signalling the server this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let sent = std::time::Instant::now();
        let mut bodies = Vec::new();
        for t in streams {
            bodies.push(t.await.unwrap());
        }
        (bodies, sent.elapsed())
    });
    assert_eq!(bodies.len(), 5);
    assert!(bodies.iter().all(|b| &b[..] == concur::server::ADD_BODY));
    assert!(
        took < Duration::from_millis(DELAY_MS) + Duration::from_secs(3),
        "{took:?}"
    );
    // It stopped accepting, and exits 0 once its streams are done: within the grace.
    let mut status = None;
    wait_for(
        "the server to exit",
        SHUTDOWN_GRACE + Duration::from_secs(5),
        || {
            status = s.child.try_wait().unwrap();
            status.is_some()
        },
    );
    assert_eq!(status.unwrap().code(), Some(0));
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still accepting"
    );
}

#[test]
fn cancelled_h2_streams_free_their_in_flight_slots_at_once() {
    const DELAY_MS: u64 = 5000;
    let s = Serve::start(&["--max-in-flight", "4"]);
    let addr = s.addr;
    runtime().block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(conn);
        let started = std::time::Instant::now();
        let mut streams = Vec::new();
        for i in 0..4 {
            let mut c = client.clone().ready().await.unwrap();
            let req = hyper::Request::get(format!("http://localhost/add?delay={DELAY_MS}&i={i}"))
                .body(())
                .unwrap();
            streams.push(c.send_request(req, true).unwrap());
        }
        // The cap is full: a request beyond it (even /stats) is answered 503. Asked on the
        // same connection, after the 4: the server takes a stream's slot when it accepts the
        // stream, in the order they came, so the 4 hold the cap before this one is looked at
        // (a /stats polled over another connection could take a slot before the 4 arrive).
        let mut c = client.clone().ready().await.unwrap();
        let req = hyper::Request::get("http://localhost/stats")
            .body(())
            .unwrap();
        let (over, _) = c.send_request(req, true).unwrap();
        assert_eq!(over.await.unwrap().status(), 503);
        // RST_STREAM (CANCEL) on each, mid-delay.
        for (_, send) in &mut streams {
            send.send_reset(h2::Reason::CANCEL);
        }
        let st = tokio::task::spawn_blocking(move || {
            let mut st = serde_json::Value::Null;
            wait_for(
                "the cancelled streams to leave",
                Duration::from_secs(10),
                || {
                    let (code, body) = get_h1(addr, "/stats");
                    if code != 200 {
                        return false;
                    }
                    st = serde_json::from_str(&body).unwrap();
                    // Every handler has run (hyper runs each on a task of its own, which
                    // may first run after the reset) and left.
                    st["in_flight"] == 0 && st["requests"] == 4
                },
            );
            st
        })
        .await
        .unwrap();
        // Freed by the resets, not by the delays' end.
        assert!(
            started.elapsed() < Duration::from_millis(DELAY_MS),
            "{:?}",
            started.elapsed()
        );
        // Dropped mid-delay, they count as requests; the slots are all free again. (Not
        // `peak_in_flight == 4`: that counts handlers, which hyper runs on tasks of their own,
        // and the 4th may first run after the 1st was cancelled; the 503 above is what shows
        // the 4 slots held at once.)
        assert_eq!(st["requests"], 4, "{st}");
        let peak = st["peak_in_flight"].as_i64().unwrap();
        assert!((1..=4).contains(&peak), "{st}");
        let refused = st["over_in_flight"].as_u64().unwrap();
        assert!(refused >= 1, "{st}");
        let mut c = client.clone();
        let mut answers = Vec::new();
        for i in 0..4 {
            c = c.ready().await.unwrap();
            let req = hyper::Request::get(format!("http://localhost/add?delay=200&j={i}"))
                .body(())
                .unwrap();
            answers.push(c.send_request(req, true).unwrap().0);
        }
        for a in answers {
            assert_eq!(a.await.unwrap().status(), 200);
        }
        let (code, body) = tokio::task::spawn_blocking(move || get_h1(addr, "/stats"))
            .await
            .unwrap();
        assert_eq!(code, 200, "{body}");
        let st: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(st["over_in_flight"].as_u64(), Some(refused), "{st}");
        assert_eq!(st["requests"], 8, "{st}");
    });
}

#[test]
fn a_stalled_preface_is_dropped_after_the_header_timeout_and_others_are_served() {
    use std::io::{Read, Write};
    let s = Serve::start(&["--header-timeout", "1s"]);
    let started = std::time::Instant::now();
    // One says nothing; one sends half the preface.
    let silent = std::net::TcpStream::connect(s.addr).unwrap();
    let mut half = std::net::TcpStream::connect(s.addr).unwrap();
    half.write_all(&concur::server::conn::H2_PREFACE[..12])
        .unwrap();
    // Meanwhile an h2c client is served.
    let (bodies, _) = streams_over_one_connection(s.addr, 3, "/add?delay=0");
    assert_eq!(bodies.len(), 3);
    for mut c in [silent, half] {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = Vec::new();
        let n = c.read_to_end(&mut sink);
        assert!(matches!(n, Ok(0)), "{n:?}: {sink:?}");
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(6),
        "closed after {waited:?}"
    );
    // The client may see its connection end a moment before the server counts why: the count
    // is waited for (under load in CI, /stats once read 1).
    let stats = || {
        let (code, body) = get_h1(s.addr, "/stats");
        assert_eq!(code, 200);
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    wait_for(
        "both stalled connections to be counted as header timeouts",
        Duration::from_secs(5),
        || stats()["header_timeouts"] == 2,
    );
    let st = stats();
    assert_eq!(st["header_timeouts"], 2, "{st}");
    assert_eq!(st["h2_connections"], 1, "{st}");
}
