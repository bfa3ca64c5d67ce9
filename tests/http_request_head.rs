//! One request head for every HTTP client: the method, target, headers and body that
//! `concur serve` saw (`GET /echo/last`) are the same whichever model made the request, with
//! one `User-Agent: concur/VERSION`; `--no-keepalive` adds `Connection: close` and nothing
//! else. The clients drifted apart before they shared one request builder (ureq sent its own
//! user agent, hyper none, libcurl only `Accept`), so this compares every client stack.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// One model per way a request is made, written out rather than taken from the registry:
/// ureq on the calling thread (`seq`), in a re-executed child (`spawn`) and in queue worker
/// processes that get the options as JSON (`jobs-procs`); hyper on a multi-thread runtime
/// (`async`), on one event loop (`async-local`) and behind mailboxes (`actor`); the hand-made
/// client in `may` coroutines (`green`); libcurl multi (`curl`).
const CLIENTS: &[&str] = &[
    "seq",
    "spawn",
    "jobs-procs:2",
    "async:2",
    "async-local:2",
    "actor:2",
    "green:2",
    "curl:2",
];

/// `concur serve` on a free loopback port, stopped when dropped.
struct Serve {
    child: Child,
    port: u16,
}

impl Serve {
    fn start() -> Serve {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("concur"))
            .args(["serve", "-q", "--addr", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let s = Serve { child, port };
        wait_for("concur serve to listen", Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        s
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET /echo/last`: the last request `/echo` saw.
    fn last_echo(&self) -> Value {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            c,
            "GET /echo/last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        c.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{text}");
        serde_json::from_str(body).unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body file every request sends: `{i}` is the task's index (0: one task).
fn body_file(dir: &std::path::Path) -> std::path::PathBuf {
    let body = dir.join("body.txt");
    std::fs::write(&body, "task={i} of one").unwrap();
    body
}

/// Runs one POST task of `http:URL` under `model`, which must succeed and count the echoed
/// body (13 bytes).
fn post_once(url: &str, model: &str, body: &std::path::Path, extra: &[&str]) {
    let (_dir, path) = results_path();
    let workload = format!("http:{url}");
    let mut args = vec!["-w", workload.as_str(), "-m", model, "-n", "1", "-r", "1"];
    args.extend(["-H", "X-Test: {i}", "--method", "POST"]);
    args.extend(["--body", body.to_str().unwrap()]);
    args.extend(extra);
    run_study_to(&path, &args);
    let lines = read_lines(&path);
    let run = of_type(&lines, "run")[0];
    assert_eq!(run["status"], "ok", "{model}: {run}");
    assert_eq!(run["bytes"], 13, "{model}: the echoed body: {run}");
}

/// The head `concur serve` saw from each client, with `extra` flags.
fn heads(s: &Serve, extra: &[&str]) -> Vec<(&'static str, Value)> {
    let dir = tempfile::tempdir().unwrap();
    let body = body_file(dir.path());
    let url = format!("{}/echo?i={{i}}", s.url());
    CLIENTS
        .iter()
        .map(|model| {
            post_once(&url, model, &body, extra);
            (*model, s.last_echo())
        })
        .collect()
}

/// Asserts that every client's head is `want`, listing every client that differs.
fn assert_all_are(heads: &[(&str, Value)], want: &Value) {
    let differ: Vec<String> = heads
        .iter()
        .filter(|(_, seen)| seen != want)
        .map(|(model, seen)| format!("{model}: {seen}"))
        .collect();
    assert!(
        differ.is_empty(),
        "expected from every client: {want}\nbut:\n{}",
        differ.join("\n")
    );
}

#[test]
fn every_client_sends_the_same_request_head() {
    let s = Serve::start();
    let mut want = json!({
        "method": "POST",
        "target": "/echo?i=0",
        "headers": {
            "host": format!("127.0.0.1:{}", s.port),
            "user-agent": format!("concur/{}", env!("CARGO_PKG_VERSION")),
            "accept": "*/*",
            "x-test": "0",
            "content-length": "13",
        },
        "body": "task=0 of one",
    });
    assert_all_are(&heads(&s, &[]), &want);
    // Without keep-alive the one difference is the header that says so.
    want["headers"]["connection"] = json!("close");
    assert_all_are(&heads(&s, &["--no-keepalive"]), &want);
}

/// The clients that speak HTTP/2 (`--http2`) here; `curl` joins them with libcurl's
/// multiplexing.
const HTTP2_CLIENTS: &[&str] = &["async:2", "async-local:2", "curl:2"];

#[test]
fn over_http2_the_host_is_the_authority_and_connection_headers_are_left_out() {
    let s = Serve::start();
    let dir = tempfile::tempdir().unwrap();
    let body = body_file(dir.path());
    let url = format!("{}/echo?i={{i}}", s.url());
    // `/echo/last` shows an HTTP/2 request's target as `:scheme://:authority:path`.
    let want = json!({
        "method": "POST",
        "target": format!("http://127.0.0.1:{}/echo?i=0", s.port),
        "headers": {
            "user-agent": format!("concur/{}", env!("CARGO_PKG_VERSION")),
            "accept": "*/*",
            "x-test": "0",
            "content-length": "13",
        },
        "body": "task=0 of one",
    });
    // Without keep-alive, and with headers that belong to one HTTP/1.1 connection given:
    // none of them goes out (RFC 9113 §8.2.2).
    let extra = [
        "--http2",
        "--no-keepalive",
        "-H",
        "Upgrade: h2c",
        "-H",
        "Keep-Alive: timeout=5",
    ];
    let heads: Vec<(&str, Value)> = HTTP2_CLIENTS
        .iter()
        .map(|model| {
            post_once(&url, model, &body, &extra);
            (*model, s.last_echo())
        })
        .collect();
    assert_all_are(&heads, &want);
}

/// A server that answers every request with an empty 200 and keeps each request head exactly
/// as it arrived (the bytes up to the empty line), for the case and order of the header names
/// that `concur serve`'s parsed headers do not show.
fn raw_server() -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn);
                loop {
                    let mut head = String::new();
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((n, v)) = line.split_once(':') {
                            if n.eq_ignore_ascii_case("content-length") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                        head.push_str(&line);
                    }
                    let mut body = vec![0; length];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    let _ = tx.send(head);
                    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
                    if r.get_mut().write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, rx)
}

/// The head each client wrote to [`raw_server`] for one `PUT` with an empty body and `args`.
fn raw_heads(args: &[&str]) -> Vec<(&'static str, String)> {
    let (base, heads) = raw_server();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "").unwrap();
    let url = format!("http:{base}/raw");
    CLIENTS
        .iter()
        .map(|model| {
            let (_d, path) = results_path();
            let mut all = vec!["-w", &url, "-m", model, "-n", "1", "-r", "1"];
            all.extend(["--method", "PUT", "--body", body.to_str().unwrap()]);
            all.extend(args);
            run_study_to(&path, &all);
            let head = heads.recv_timeout(Duration::from_secs(10)).unwrap();
            (
                *model,
                head.replace(base.trim_start_matches("http://"), "HOST"),
            )
        })
        .collect()
}

/// Asserts that every client wrote `want`, listing every client that did not.
fn assert_all_wrote(heads: &[(&str, String)], want: &str) {
    let differ: Vec<String> = heads
        .iter()
        .filter(|(_, head)| head != want)
        .map(|(model, head)| format!("{model}:\n{head}"))
        .collect();
    assert!(
        differ.is_empty(),
        "expected from every client:\n{want}but:\n{}",
        differ.join("\n")
    );
}

#[test]
fn every_client_writes_the_header_names_in_one_case_and_order() {
    let want = format!(
        "PUT /raw HTTP/1.1\r\nHost: HOST\r\nUser-Agent: concur/{}\r\nAccept: */*\r\nX-Lower: 0\r\nContent-Length: 0\r\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_all_wrote(&raw_heads(&["-H", "x-lower: {i}"]), &want);
}

#[test]
fn a_header_given_replaces_concurs_own_in_its_place() {
    // Never two user agents; a repeated name keeps its first place and its last value.
    let heads = raw_heads(&[
        "-H",
        "accept: text/plain",
        "-H",
        "user-agent: mine/{i}",
        "-H",
        "User-Agent: theirs",
    ]);
    let want = "PUT /raw HTTP/1.1\r\nHost: HOST\r\nUser-Agent: theirs\r\nAccept: text/plain\r\nContent-Length: 0\r\n";
    assert_all_wrote(&heads, want);
}

/// `curl:1` over three tasks reuses one handle: the third request is the third task's own, with
/// the same head, both when only the URL varies (the handle keeps its options and takes the
/// new URL alone) and when a header varies too (the handle is set up again).
#[test]
fn a_reused_curl_handle_sends_each_tasks_own_request() {
    let s = Serve::start();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, "fixed").unwrap();
    let workload = format!("http:{}/echo?i={{i}}", s.url());
    for (header, want) in [("X-Test: same", "same"), ("X-Test: n{i}", "n2")] {
        let (_dir, path) = results_path();
        let args = [
            "-w",
            workload.as_str(),
            "-m",
            "curl:1",
            "-n",
            "3",
            "-r",
            "1",
            "-H",
            header,
            "--method",
            "POST",
            "--body",
            body.to_str().unwrap(),
        ];
        run_study_to(&path, &args);
        let lines = read_lines(&path);
        let run = of_type(&lines, "run")[0];
        assert_eq!(run["tasks_ok"], 3, "{header}: {run}");
        let seen = s.last_echo();
        assert_eq!(seen["target"], "/echo?i=2", "{header}: {seen}");
        assert_eq!(seen["headers"]["x-test"], want, "{header}: {seen}");
        assert_eq!(seen["headers"]["content-length"], "5", "{header}: {seen}");
        assert_eq!(seen["body"], "fixed", "{header}: {seen}");
    }
}
