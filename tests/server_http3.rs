//! The delay server over HTTP/3 (`concur serve --http3`): QUIC on the TCP port's number, the
//! same routes and answers as HTTP/1.1 and HTTP/2, many streams over one connection with exact
//! counts and bytes, the limits (`--max-streams`, `--max-connections`, `--max-in-flight`,
//! `--echo-budget`, the four timeouts) held and counted as on TCP, a graceful SIGTERM, `Alt-Svc` announced on the TCP answers only
//! with `--http3`, and `--http3` without a certificate refused with one line.
//!
//! The client is quinn and h3 (tests/common/http3.rs), not concur's own.

mod common;
#[path = "common/http3.rs"]
mod http3;

use std::process::Command;
use std::time::Duration;

use common::Serve;
use http3::H3;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `concur serve --tls-self-signed --http3 ARGS`.
fn serve_h3(args: &[&str]) -> Serve {
    let mut all = vec!["--http3"];
    all.extend_from_slice(args);
    Serve::tls_self_signed(&all, &[])
}

/// Waits for `cond` (async) until `limit`, panicking with `what` when it never holds.
async fn until<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `curl -sS -D - ARGS URL` over TCP: the head's lines, lowercased, and the body.
fn curl_head(args: &[&str], url: &str) -> (Vec<String>, Vec<u8>) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-D", "-"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "curl {args:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = out.stdout;
    let end = text
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&text[..end])
        .lines()
        .map(|l| l.to_ascii_lowercase())
        .collect();
    (head, text[end + 4..].to_vec())
}

#[test]
fn http3_without_a_certificate_is_refused_with_one_line_naming_what_it_needs() {
    let out = common::concur_process()
        .args(["serve", "--addr", "127.0.0.1:0", "--http3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--http3 needs TLS (QUIC always encrypts): add --tls-self-signed, or --tls-cert FILE and --tls-key FILE"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn every_route_answers_over_http3_as_over_http1() {
    let s = serve_h3(&[]);
    let cert = s.cert_path().to_path_buf();
    let cacert = ["--http1.1", "--cacert", cert.to_str().unwrap()];
    runtime().block_on(async {
        let c = H3::connect(s.addr, &cert)
            .await
            .expect("the QUIC handshake");
        for (path, want) in [
            ("/add?delay=5", 200),
            ("/bytes/100000", 200),
            ("/bytes/0", 200),
            ("/delay/20ms", 200),
            ("/status/418", 418),
            ("/add?delay=x", 400),
            ("/bytes/99G", 400),
            ("/no/such/route", 404),
        ] {
            let a = c.get(path).await;
            assert_eq!(a.status, want, "{path}");
            let (_, b1) = curl_head(&cacert, &format!("{}{path}", s.url));
            assert_eq!(a.body, b1, "{path}: HTTP/3's body differs from HTTP/1.1's");
            if let Some(n) = a.headers.get("content-length") {
                assert_eq!(n.to_str().unwrap(), a.body.len().to_string(), "{path}");
            }
            // The server announces HTTP/3 over TCP, not over HTTP/3 itself.
            assert!(a.headers.get("alt-svc").is_none(), "{path}");
        }
        assert_eq!(c.get("/bytes/100000").await.body, vec![b'x'; 100_000]);
        // A body goes through the stream to /echo and back, byte for byte.
        let sent: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let a = c.request("POST", "/echo", &sent).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.body, sent);
        let st = c.stats().await;
        assert_eq!(st["h3_connections"], 1, "{st}");
        assert_eq!(st["h2_connections"], 0, "{st}");
    });
}

#[test]
fn one_quic_connection_carries_100_delay_streams_at_once() {
    let s = serve_h3(&[]);
    let cert = s.cert_path().to_path_buf();
    runtime().block_on(async {
        let c = std::sync::Arc::new(H3::connect(s.addr, &cert).await.unwrap());
        let started = std::time::Instant::now();
        let tasks: Vec<_> = (0..100)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move { c.get(&format!("/delay/300ms?i={i}")).await })
            })
            .collect();
        let mut bytes = 0;
        for t in tasks {
            let a = t.await.unwrap();
            assert_eq!(a.status, 200);
            assert_eq!(a.body, b"delayed\n");
            assert_eq!(a.headers["server-timing"], "delay;dur=300.000");
            bytes += a.body.len();
        }
        assert_eq!(bytes, 100 * b"delayed\n".len());
        // At once: 100 delays of 300 ms in well under 100 × 300 ms.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        let st = c.stats().await;
        assert_eq!(st["connections"], 1, "{st}");
        assert_eq!(st["h3_connections"], 1, "{st}");
        assert_eq!(st["tls_handshakes"], 1, "{st}");
        assert_eq!(st["peak_in_flight"], 100, "{st}");
        // `/stats` is not counted as a request.
        assert_eq!(st["requests"], 100, "{st}");
    });
}

#[test]
fn max_streams_bounds_the_requests_open_on_one_quic_connection() {
    let s = serve_h3(&["--max-streams", "10"]);
    let cert = s.cert_path().to_path_buf();
    runtime().block_on(async {
        let c = std::sync::Arc::new(H3::connect(s.addr, &cert).await.unwrap());
        let tasks: Vec<_> = (0..40)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move { c.get("/add?delay=100").await })
            })
            .collect();
        for t in tasks {
            let a = t.await.unwrap();
            assert_eq!(
                (a.status, &a.body[..]),
                (200, &concur::server::ADD_BODY[..])
            );
        }
        let st = c.stats().await;
        assert_eq!(st["requests"], 40, "{st}");
        // QUIC's stream limit: the client waited for credit, the server never held more.
        assert_eq!(st["peak_in_flight"], 10, "{st}");
        assert_eq!(st["over_in_flight"], 0, "{st}");
    });
}

#[test]
fn beyond_max_in_flight_a_stream_is_answered_503_as_on_tcp() {
    // Under 16 no slot is kept back: 4 admitted, the rest refused at once.
    let s = serve_h3(&["--max-in-flight", "4"]);
    let cert = s.cert_path().to_path_buf();
    runtime().block_on(async {
        let c = std::sync::Arc::new(H3::connect(s.addr, &cert).await.unwrap());
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move { c.get("/delay/2s").await })
            })
            .collect();
        let mut ok = 0;
        let mut refused = 0;
        for t in tasks {
            let a = t.await.unwrap();
            match a.status {
                200 => ok += 1,
                503 => {
                    refused += 1;
                    assert_eq!(a.headers["retry-after"], "1");
                    let e: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
                    let why = e["error"].as_str().unwrap();
                    assert!(
                        why.contains(
                            "the server has 4 requests in flight, its limit (--max-in-flight)"
                        ),
                        "{why}"
                    );
                }
                other => panic!("status {other}"),
            }
        }
        assert_eq!((ok, refused), (4, 2));
        let st = c.stats().await;
        assert_eq!(st["over_in_flight"], 2, "{st}");
        assert_eq!(st["requests"], 4, "{st}");
    });
}

#[test]
fn beyond_max_connections_a_quic_connection_is_refused_and_counted() {
    let s = serve_h3(&["--max-connections", "2"]);
    let cert = s.cert_path().to_path_buf();
    runtime().block_on(async {
        let a = H3::connect(s.addr, &cert).await.unwrap();
        let b = H3::connect(s.addr, &cert).await.unwrap();
        assert_eq!(b.get("/add").await.status, 200);
        let third = H3::connect(s.addr, &cert).await;
        match third {
            Err(quinn::ConnectionError::ConnectionClosed(c)) => assert_eq!(
                c.error_code,
                quinn::TransportErrorCode::CONNECTION_REFUSED,
                "{c}"
            ),
            Err(e) => panic!("refused otherwise: {e}"),
            Ok(_) => panic!("a third connection was served beyond --max-connections 2"),
        }
        let st = a.stats().await;
        assert_eq!(st["over_capacity"], 1, "{st}");
        assert_eq!(st["open_connections"], 2, "{st}");
        assert_eq!(st["h3_connections"], 2, "{st}");
        // One closes: a new connection is served again.
        b.quic.close(0u32.into(), b"done");
        drop(b);
        until(
            "the second connection to close",
            Duration::from_secs(10),
            || {
                let a = &a;
                async move { a.stats().await["open_connections"] == 1 }
            },
        )
        .await;
        let d = H3::connect(s.addr, &cert).await.expect("served again");
        assert_eq!(d.get("/add").await.status, 200);
        assert_eq!(a.stats().await["over_capacity"], 1);
    });
}

#[test]
fn a_quic_connection_without_requests_is_closed_after_the_idle_timeout() {
    let s = serve_h3(&["--idle-timeout", "1s"]);
    let cert = s.cert_path().to_path_buf();
    runtime().block_on(async {
        let c = H3::connect(s.addr, &cert).await.unwrap();
        assert_eq!(c.get("/add").await.status, 200);
        let closed = tokio::time::timeout(Duration::from_secs(10), c.quic.closed())
            .await
            .expect("closed within 10 s");
        assert!(
            closed.to_string().contains("no request for --idle-timeout"),
            "{closed}"
        );
        let d = H3::connect(s.addr, &cert).await.unwrap();
        let st = d.stats().await;
        assert_eq!(st["idle_timeouts"], 1, "{st}");
        assert_eq!(st["open_connections"], 1, "{st}");
    });
}

#[test]
fn alt_svc_announces_http3_on_tcp_answers_with_http3_only() {
    let s = serve_h3(&[]);
    let cert = s.cert_path().to_str().unwrap().to_string();
    let want = format!("alt-svc: h3=\":{}\"", s.addr.port());
    for proto in ["--http1.1", "--http2"] {
        for path in ["/add", "/no/such/route"] {
            let (head, _) = curl_head(&[proto, "--cacert", &cert], &format!("{}{path}", s.url));
            assert!(head.contains(&want), "{proto} {path}: {head:?}");
        }
    }
    drop(s);
    let plain = Serve::tls_self_signed(&[], &[]);
    let cert = plain.cert_path().to_str().unwrap().to_string();
    for proto in ["--http1.1", "--http2"] {
        let (head, _) = curl_head(&[proto, "--cacert", &cert], &format!("{}/add", plain.url));
        assert!(
            !head.iter().any(|l| l.starts_with("alt-svc")),
            "{proto}: {head:?}"
        );
    }
}

#[test]
fn the_quic_side_keeps_the_header_body_and_write_timeouts() {
    let s = serve_h3(&[
        "--header-timeout",
        "1s",
        "--body-timeout",
        "1s",
        "--write-timeout",
        "1s",
    ]);
    let cert = s.cert_path().to_path_buf();
    runtime().block_on(async {
        let c = H3::connect(s.addr, &cert).await.unwrap();
        // A body that stops half way: 408 on its stream, the connection still serves.
        let a = c.unfinished_post("/echo", b"half a body", None).await;
        assert_eq!(a.status, 408);
        let e: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        assert!(
            e["error"].as_str().unwrap().contains("--body-timeout 1s"),
            "{e}"
        );
        assert!(a.headers.get("connection").is_none());
        // An answer the client takes none of: cut after the write timeout.
        let (status, stalled) = c.get_head("/bytes/10M").await;
        assert_eq!(status, 200);
        until(
            "the stalled answer to be cut",
            Duration::from_secs(10),
            || {
                let c = &c;
                async move { c.stats().await["write_timeouts"] == 1 }
            },
        )
        .await;
        drop(stalled);
        // A request head that never ends (the first byte of a HEADERS frame, no more).
        let (_endpoint, bare) = http3::quic(s.addr, &cert).await.unwrap();
        let (mut send, _recv) = bare.open_bi().await.unwrap();
        send.write_all(&[0x01]).await.unwrap();
        until(
            "the unfinished head to time out",
            Duration::from_secs(10),
            || {
                let c = &c;
                async move { c.stats().await["header_timeouts"] == 1 }
            },
        )
        .await;
        let st = c.stats().await;
        assert_eq!(st["body_timeouts"], 1, "{st}");
        assert_eq!(st["write_timeouts"], 1, "{st}");
        assert_eq!(st["idle_timeouts"], 0, "{st}");
        assert_eq!(c.get("/add").await.status, 200);
    });
}

#[test]
fn sigterm_lets_the_http3_streams_in_flight_finish_and_the_server_exits_0() {
    let _alone = common::alone();
    let mut s = serve_h3(&[]);
    let cert = s.cert_path().to_path_buf();
    let addr = s.addr;
    let pid = s.child.id() as i32;
    const DELAY_MS: u64 = 1500;
    let (answers, took) = runtime().block_on(async {
        let c = std::sync::Arc::new(H3::connect(addr, &cert).await.unwrap());
        let streams: Vec<_> = (0..5)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move { c.get(&format!("/add?delay={DELAY_MS}&i={i}")).await })
            })
            .collect();
        until("5 streams in flight", Duration::from_secs(10), || {
            let c = &c;
            async move { c.stats().await["in_flight"] == 5 }
        })
        .await;
        // SAFETY: signalling the server this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let sent = std::time::Instant::now();
        let mut answers = Vec::new();
        for t in streams {
            answers.push(t.await.unwrap());
        }
        (answers, sent.elapsed())
    });
    assert_eq!(answers.len(), 5);
    for a in &answers {
        assert_eq!(
            (a.status, &a.body[..]),
            (200, &concur::server::ADD_BODY[..])
        );
    }
    assert!(
        took < Duration::from_millis(DELAY_MS) + Duration::from_secs(3),
        "{took:?}"
    );
    let status = common::wait_exit(&mut s.child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_in_process_server_speaks_http3_on_its_tcp_port_number() {
    use concur::server::{InProcessServer, ServeTls, ServerOptions};
    let server = InProcessServer::start(
        ServerOptions {
            http3: true,
            tls: Some(ServeTls::SelfSigned),
            ..ServerOptions::ephemeral()
        },
        1,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, &server.cert.as_ref().unwrap().cert_pem).unwrap();
    runtime().block_on(async {
        let c = H3::connect(server.addr, &cert).await.unwrap();
        let a = c.get("/add?delay=1").await;
        assert_eq!(
            (a.status, &a.body[..]),
            (200, &concur::server::ADD_BODY[..])
        );
    });
    let st = server.stats.snapshot();
    assert_eq!((st.requests, st.h3_connections), (1, 1), "{st:?}");
    // Without a certificate the in-process server refuses too, naming the flag.
    let err = InProcessServer::start(
        ServerOptions {
            http3: true,
            ..ServerOptions::ephemeral()
        },
        1,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.starts_with("--http3 needs TLS"), "{err}");
}

#[test]
fn echo_bodies_over_http3_share_the_echo_budget() {
    // 4M holds two bodies declaring 2,000,000 bytes; a third is refused before it is read.
    let s = serve_h3(&["--echo-budget", "4M", "--body-timeout", "1s"]);
    let cert = s.cert_path().to_path_buf();
    runtime().block_on(async {
        let c = std::sync::Arc::new(H3::connect(s.addr, &cert).await.unwrap());
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move {
                    c.unfinished_post("/echo", b"a start", Some(2_000_000))
                        .await
                        .status
                })
            })
            .collect();
        let mut statuses = Vec::new();
        for t in tasks {
            statuses.push(t.await.unwrap());
        }
        statuses.sort();
        // Two held their budget until their bodies missed the body timeout.
        assert_eq!(statuses, [408, 408, 503]);
        let st = c.stats().await;
        assert_eq!(st["echo_over_budget"], 1, "{st}");
        assert_eq!(st["body_timeouts"], 2, "{st}");
        // Given back: a whole body goes through again.
        let body = vec![7u8; 1_000_000];
        let a = c.request("POST", "/echo", &body).await;
        assert_eq!((a.status, a.body.len()), (200, body.len()));
    });
}
