//! The I/O half: the delay server's answers, the http workload under every model against an
//! in-process server, connection errors, disconnects and timeouts. (Thousands of connections
//! at once are in tests/many_connections.rs, so that they never run beside this file's timing
//! checks: the exact server peak, the rate search.)

mod common;
mod rate_search;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use concur::server::{InProcessServer, ServerOptions};

fn server() -> InProcessServer {
    InProcessServer::start(ServerOptions::ephemeral(), 2).expect("server starts")
}

/// One GET over a fresh connection: the whole response as text.
fn get_raw(s: &InProcessServer, path: &str) -> String {
    let mut c = TcpStream::connect(s.addr).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    text
}

/// One GET over a fresh connection: (status, body).
fn get(s: &InProcessServer, path: &str) -> (u16, String) {
    let text = get_raw(s, path);
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

#[test]
fn server_answers_and_refuses_bad_input_with_json_400s() {
    let s = server();
    assert_eq!(
        get(&s, "/add?name=x&delay=20&cachebust=abc"),
        (200, "ok: added\n".into())
    );
    assert_eq!(get(&s, "/bytes/1k").1.len(), 1024);
    assert_eq!(get(&s, "/status/503").0, 503);
    assert_eq!(get(&s, "/delay/10ms").0, 200);
    for (path, param, needle) in [
        ("/add?delay=abc", "delay", "'abc'"),
        ("/add?delay=-5", "delay", "'-5'"),
        ("/add?delay=60000", "delay", "above the maximum"),
        ("/delay/soon", "duration", "'soon'"),
        ("/delay/11s", "delay", "above the maximum"),
        ("/bytes/lots", "n", "'lots'"),
        ("/bytes/1G", "n", "above the maximum"),
        ("/status/99", "code", "'99'"),
        ("/status/abc", "code", "'abc'"),
    ] {
        let (status, body) = get(&s, path);
        assert_eq!(status, 400, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["parameter"], param, "{path}");
        assert!(
            v["error"].as_str().unwrap().contains(needle),
            "{path}: {body}"
        );
    }
    let stats: serde_json::Value = serde_json::from_str(&get(&s, "/stats").1).unwrap();
    assert!(stats["requests"].as_u64().unwrap() >= 13);
    assert_eq!(stats["in_flight"], 0);
}

#[test]
fn the_server_decodes_query_values_before_reading_them() {
    let s = server();
    // The delay the server slept is in its Server-Timing header.
    for (path, slept) in [
        ("/add?delay=%31%30", "delay;dur=10.000"),
        ("/add?name=a+b%26c&delay=%37", "delay;dur=7.000"),
        ("/add?d%65lay=3", "delay;dur=3.000"),
        ("/add?delay=2&delay=9", "delay;dur=2.000"),
    ] {
        let text = get_raw(&s, path).to_ascii_lowercase();
        assert!(text.starts_with("http/1.1 200"), "{path}: {text}");
        assert!(
            text.contains(&format!("server-timing: {slept}\r\n")),
            "{path}: {text}"
        );
    }
    // The error names the decoded value: what the server tried to read.
    for (path, needle) in [
        ("/add?delay=1+0", "'1 0'"),
        ("/add?delay=%2D5", "'-5'"),
        ("/add?delay=%zz", "'%zz'"),
    ] {
        let (status, body) = get(&s, path);
        assert_eq!(status, 400, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(
            v["error"].as_str().unwrap().contains(needle),
            "{path}: {body}"
        );
    }
}

#[test]
fn every_model_fetches_the_exact_checksum() {
    let s = server();
    let url = format!("http:{}/add?name=t{{rand}}&delay=5", s.base_url());
    let mut args: Vec<String> = vec![
        "-w".into(),
        url,
        "-n".into(),
        "20".into(),
        "-r".into(),
        "1".into(),
    ];
    let models = common::models_accepting_exactly("http:http://127.0.0.1:1/x", 4, HTTP_MODELS_4);
    for m in &models {
        args.extend(["-m".into(), m.into()]);
    }
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let (_, lines) = run_study(&args);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), models.len());
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["bytes"], 200, "{}: 10 bytes × 20", r["model"]);
        assert_eq!(r["nature"], "delay");
        assert!(r["latency_us"]["p50"].as_u64().unwrap() >= 5000, "{r}");
    }
}

#[test]
fn a_url_without_rand_is_fetched_as_given_by_every_client() {
    // Appending letters made this `delay=5xkqjwezbtd`, a 400 for every request.
    let s = server();
    let url = format!("http:{}/add?name=c&delay=5", s.base_url());
    let mut args = vec!["-w", url.as_str(), "-n", "6", "-r", "1"];
    for m in ["seq", "async:3", "curl:3", "green:3"] {
        args.extend(["-m", m]);
    }
    let (_, lines) = run_study(&args);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 4);
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["bytes"], 60, "{r}");
    }
    assert_eq!(
        s.stats.snapshot().requests,
        24,
        "one request per task, no retries"
    );
}

#[test]
fn the_in_process_server_counts_real_concurrency() {
    let _alone = alone();
    // No --url: concur starts its own server and records its peak in-flight per run.
    let (_, lines) = run_study(&[
        "-w",
        "http:/add?name={rand}&delay=200",
        "-m",
        "async:25",
        "-m",
        "seq",
        "-n",
        "50",
        "-r",
        "1",
    ]);
    let peak = |m: &str| {
        runs_of(&lines, m)[0]["server_peak_in_flight"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(peak("async:25"), 25);
    assert_eq!(peak("seq"), 1);
    let cell = of_type(&lines, "cell")
        .into_iter()
        .find(|c| c["model"] == "async:25")
        .unwrap();
    assert!((cell["ideal_s"].as_f64().unwrap() - 0.4).abs() < 1e-9);
}

#[test]
fn with_url_a_concur_server_gives_each_run_its_own_peak_and_another_server_none() {
    let _alone = alone();
    // `concur serve` started apart: its /stats is reset before each run and read after it,
    // so each run's peak is its own (seq's 1 after async:8's 8, and again for the second
    // repetition), as with the server concur starts in-process.
    let s = Serve::start(&[]);
    let (_, lines) = run_study(&[
        "--url",
        &s.url,
        "-w",
        "http:/delay/200ms",
        "-m",
        "async:8",
        "-m",
        "seq",
        "-n",
        "8",
        "-r",
        "2",
    ]);
    let peaks = |m: &str| -> Vec<Option<i64>> {
        runs_of(&lines, m)
            .iter()
            .map(|r| r["server_peak_in_flight"].as_i64())
            .collect()
    };
    assert_eq!(peaks("async:8"), [Some(8), Some(8)]);
    assert_eq!(peaks("seq"), [Some(1), Some(1)]);
    let cell = |m: &str| {
        of_type(&lines, "cell")
            .into_iter()
            .find(|c| c["model"] == m)
            .map(|c| c["server_peak_in_flight"].clone())
    };
    assert_eq!(cell("async:8"), Some(8.into()));
    // A server of another kind: its GET /stats (the one request that asks) answers
    // something that is not concur's counters, so nothing else is sent to /stats, the runs
    // succeed and their server peak stays empty.
    let other =
        Canned::start("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".into());
    let base = format!("http://{}", other.addr);
    let (_, lines) = run_study(&[
        "--url", &base, "-w", "http:/x", "-m", "async:2", "-n", "2", "-r", "2",
    ]);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}");
        assert!(r["server_peak_in_flight"].is_null(), "{r}");
    }
    let seen = other.seen.lock().unwrap().clone();
    let stats: Vec<&String> = seen.iter().filter(|l| l.contains("/stats")).collect();
    assert_eq!(stats, ["GET /stats HTTP/1.1"], "{seen:?}");
    assert_eq!(seen.len(), 5, "one /stats and four tasks: {seen:?}");
}

#[test]
fn a_closed_port_gives_connect_errors_and_the_run_finishes() {
    let _alone = alone();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http:http://127.0.0.1:{port}/add?x={{rand}}");
    let t = Instant::now();
    let mut args = vec!["-w", url.as_str(), "-n", "6", "-r", "1"];
    for m in [
        "seq",
        "thread",
        "async:3",
        "async-local:3",
        "curl:3",
        "green:3",
    ] {
        args.extend(["-m", m]);
    }
    let (_, lines) = run_failing_study(&args);
    assert!(t.elapsed() < Duration::from_secs(30));
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 6, "one run per model: {runs:?}");
    for r in runs {
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["failures"]["connect"], 6, "{r}");
        assert_eq!(r["tasks_ok"], 0);
    }
}

#[test]
fn a_client_that_disconnects_mid_delay_frees_its_slot() {
    let _alone = alone();
    let s = server();
    let mut c = TcpStream::connect(s.addr).unwrap();
    write!(c, "GET /delay/8s HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    wait_for("the request in flight", Duration::from_secs(5), || {
        s.stats.snapshot().in_flight == 1
    });
    let t = Instant::now();
    drop(c);
    wait_for("the slot freed", Duration::from_secs(5), || {
        s.stats.snapshot().in_flight == 0
    });
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "freed only when the delay ended"
    );
}

#[test]
fn a_silent_client_is_disconnected_after_the_header_timeout() {
    let _alone = alone();
    let opts = ServerOptions {
        header_timeout: Duration::from_millis(300),
        ..ServerOptions::ephemeral()
    };
    let s = InProcessServer::start(opts, 1).unwrap();
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 64];
    let n = c.read(&mut buf).unwrap_or(0);
    let took = t.elapsed();
    assert_eq!(n, 0, "the server should close, not answer");
    // Closed by the header timeout (the server's own count says which deadline closed it;
    // the server counts it as the connection ends, so the count may follow the close by a
    // moment), never before it, and within a second of it (a timeout of 300 ms that closed
    // after 4 s passed `< 5 s`).
    common::wait_for("the header timeout counted", Duration::from_secs(5), || {
        s.stats.snapshot().header_timeouts == 1
    });
    assert_eq!(s.stats.snapshot().header_timeouts, 1);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_millis(1300), "{took:?}");
}

#[test]
fn crawl_shortcut_runs_one_cell_against_any_server() {
    let s = server();
    let (dir, path) = results_path();
    let url = format!("{}/add?name={{rand}}&delay=10", s.base_url());
    concur()
        .current_dir(dir.path())
        .args([
            "crawl", &url, "-n", "20", "-c", "5", "--model", "curl", "-q", "--json",
        ])
        .arg(&path)
        .assert()
        .success();
    let lines = read_lines(&path);
    let r = of_type(&lines, "run")[0];
    assert_eq!(r["model"], "curl:5");
    assert_eq!(r["bytes"], 200);
}

#[test]
fn a_crawl_whose_requests_all_get_400_exits_1() {
    // `delay=abc` is refused by the server with 400 on every request: the crawl writes its
    // results and exits 1 (with -i, 0).
    let s = server();
    let url = format!("{}/add?name={{rand}}&delay=abc", s.base_url());
    let (code, lines) = crawl(&[&url, "-n", "30", "-c", "5"]);
    assert_eq!(code, Some(1));
    let r = of_type(&lines, "run")[0];
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["failures"]["http_4xx"], 30, "{r}");
    let (code, _) = crawl(&[&url, "-n", "5", "-c", "5", "-i"]);
    assert_eq!(code, Some(0));
}

#[test]
fn urls_that_cannot_work_are_refused_before_any_run() {
    for (url, needle) in [
        ("http://[::1", "does not parse"),
        ("https:127.0.0.1:1/x", "must start with https://"),
        ("ftp://127.0.0.1/x", "'ftp:'"),
        ("http:///x", "no host"),
        ("http://127.0.0.1:65536/x", "does not parse"),
        ("http://127.0.0.1:0/x", "port 0"),
        ("/add?name=a b", "cannot be sent"),
    ] {
        let spec = format!("http:{url}");
        let err = refused_before_any_run(&["run", "-w", &spec, "-m", "seq", "-q"]);
        assert!(err.contains(&format!("'{url}'")), "{spec}: {err}");
        assert!(err.contains(needle), "{spec}: {err}");
        assert!(err.contains("allowed: http://"), "{spec}: {err}");
    }
    let err = refused_before_any_run(&["crawl", "http://[::1", "-n", "1", "-q"]);
    assert!(err.contains("'http://[::1'"), "{err}");
}

#[test]
fn models_that_cannot_run_a_workload_are_refused_up_front() {
    for (w, m, needle) in [
        ("fib:10", "curl:2", "http workloads only"),
        ("read", "green:2", "blocking std I/O"),
    ] {
        let err = refused_before_any_run(&["run", "-w", w, "-m", m]);
        assert!(err.contains(needle), "{w} {m}: {err}");
    }
    refused_before_any_run(&["run", "-w", "sleep:1ms", "-m", "green:2", "--gil"]);
}

#[test]
fn serve_shuts_down_gracefully_on_sigterm() {
    let _alone = alone();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("concur"))
        .args(["serve", "-q", "--addr", &format!("127.0.0.1:{port}")])
        .spawn()
        .unwrap();
    let mut c = None;
    wait_for("the server to listen", Duration::from_secs(10), || {
        c = TcpStream::connect(("127.0.0.1", port)).ok();
        c.is_some()
    });
    let mut c = c.unwrap();
    write!(
        c,
        "GET /delay/2s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    // Wait until the server holds the request (its /stats, over a second connection).
    wait_for("the request in flight", Duration::from_secs(10), || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            s,
            "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text.contains("\"in_flight\":1")
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // New connections are refused at once, while the request in flight goes on.
    wait_for(
        "new connections to be refused",
        Duration::from_secs(10),
        || TcpStream::connect(("127.0.0.1", port)).is_err(),
    );
    c.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    assert!(
        matches!(c.peek(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the request in flight was answered (or dropped) before new connections were refused"
    );
    c.set_nonblocking(false).unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "the request in flight was not finished: {text}"
    );
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_crawl_finds_the_rate_its_client_sustains_with_rate_auto() {
    let _alone = alone();
    // async:4 on 100 ms responses serves 40/s; no -n: the search sizes its probes itself.
    let s = server();
    let url = format!("{}/add?name={{rand}}&delay=100", s.base_url());
    let (code, lines) = crawl(&[&url, "-c", "4", "--rate", "auto", "--slo", "p99<150ms"]);
    assert_eq!(code, Some(0), "{lines:?}");
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    rate_search::check_search(runs[0], 4, 0.1, 150_000.0);
    assert_eq!(runs[0]["model"], "async:4");
}

/// A server that answers every request with the same raw bytes and closes the connection:
/// for what the delay server never sends (a redirect, a body cut short).
struct Canned {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The request line of every request it answered.
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Canned {
    fn start(reply: String) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut c) = conn else { continue };
                let reply = reply.clone();
                let lines = lines.clone();
                std::thread::spawn(move || {
                    // Reads the request head, then answers and closes.
                    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&seen);
                    let line = line.lines().next().unwrap_or_default().to_string();
                    lines.lock().unwrap().push(line);
                    let _ = c.write_all(reply.as_bytes());
                });
            }
        });
        Canned { addr, stop, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Canned {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// One client of each kind: ureq (seq), hyper (async, async-local), libcurl, green's own.
const CLIENTS: &[&str] = &["seq", "async:2", "async-local:2", "curl:2", "green:2"];

/// `concur run -w http:URL -n N` under every client, with `extra` flags; the run lines (one
/// per client, checked) whatever the exit code.
fn every_client(url: &str, n: usize, extra: &[&str]) -> Vec<serde_json::Value> {
    let (dir, path) = results_path();
    let spec = format!("http:{url}");
    let n = n.to_string();
    let mut args = vec!["-w", spec.as_str(), "-n", n.as_str(), "-r", "1"];
    for m in CLIENTS {
        args.extend(["-m", m]);
    }
    args.extend(extra);
    let out = run_into(dir.path(), &path, &args);
    let lines = read_lines(&path);
    let runs: Vec<serde_json::Value> = of_type(&lines, "run").into_iter().cloned().collect();
    assert_eq!(
        runs.len(),
        CLIENTS.len(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    runs
}

#[test]
fn no_client_takes_a_proxy_from_the_environment() {
    // A proxy where nothing listens: a client that used it would fail every request.
    let s = server();
    let (dir, path) = results_path();
    let spec = format!("http:{}/add?delay=0&name={{rand}}", s.base_url());
    let mut cmd = concur();
    cmd.current_dir(dir.path())
        .args([
            "run", "-w", &spec, "-n", "6", "-r", "1", "--warmup", "0", "-q", "--json",
        ])
        .arg(&path);
    for m in CLIENTS {
        cmd.args(["-m", m]);
    }
    for var in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env(var, "http://127.0.0.1:1");
    }
    cmd.env_remove("NO_PROXY").env_remove("no_proxy");
    let out = cmd.output().expect("concur runs");
    let lines = read_lines(&path);
    let runs = of_type(&lines, "run");
    assert_eq!(
        runs.len(),
        CLIENTS.len(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for r in runs {
        assert_eq!(r["tasks_ok"], 6, "{}: {r}", r["model"]);
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn redirects_are_not_followed() {
    // A 302 to the delay server: a client that follows it would be seen there.
    let s = server();
    let canned = Canned::start(format!(
        "HTTP/1.1 302 Found\r\nLocation: {}/add?delay=0\r\nContent-Length: 5\r\n\
         Connection: close\r\n\r\nmoved",
        s.base_url()
    ));
    for r in every_client(&canned.url("/go"), 4, &[]) {
        assert_eq!(r["status"], "ok", "a 3xx is a response like any other: {r}");
        assert_eq!(r["bytes"], 4 * 5, "the 302's own body: {r}");
    }
    assert_eq!(s.stats.snapshot().requests, 0, "a redirect was followed");
}

#[test]
fn server_errors_timeouts_and_cut_bodies_are_failures_of_their_kind() {
    let _alone = alone();
    let s = server();
    // 5xx: the server's answer, counted as http_5xx.
    for r in every_client(&format!("{}/status/503", s.base_url()), 3, &[]) {
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["failures"]["http_5xx"], 3, "{r}");
        assert_eq!(r["tasks_ok"], 0, "{r}");
    }
    // timeout: a reply later than --request-timeout.
    let t = Instant::now();
    let slow = format!("{}/delay/5s", s.base_url());
    for r in every_client(&slow, 2, &["--request-timeout", "300ms"]) {
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["failures"]["timeout"], 2, "{r}");
    }
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the requests were not cut at their timeout"
    );
    // read: the connection closes 5 bytes into a body of 100.
    let cut = Canned::start(
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nshort".into(),
    );
    for r in every_client(&cut.url("/cut"), 3, &[]) {
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["failures"]["read"], 3, "{r}");
    }
}

/// One request over a fresh connection with `method` and `body`: (status, body).
fn request(s: &InProcessServer, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut c = TcpStream::connect(s.addr).unwrap();
    write!(
        c,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nX-Probe: yes\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, text.split_once("\r\n\r\n").unwrap().1.to_string())
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn echo_last_shows_what_was_sent_and_stats_reset_starts_the_counts_again() {
    let s = server();
    let (status, body) = request(&s, "PUT", "/echo?x=1", "hello there");
    assert_eq!((status, body.as_str()), (200, "hello there"));
    let (status, last) = request(&s, "GET", "/echo/last", "");
    assert_eq!(status, 200);
    let last = json(&last);
    assert_eq!(last["method"], "PUT", "{last}");
    assert_eq!(last["target"], "/echo?x=1", "{last}");
    assert_eq!(last["headers"]["x-probe"], "yes", "{last}");
    assert_eq!(last["body"], "hello there", "{last}");

    for _ in 0..3 {
        assert_eq!(get(&s, "/add?delay=1").0, 200);
    }
    let before = json(&get(&s, "/stats").1);
    assert!(before["requests"].as_u64().unwrap() >= 4, "{before}");
    assert!(before["peak_in_flight"].as_u64().unwrap() >= 1, "{before}");
    // Only POST resets.
    assert_ne!(request(&s, "GET", "/stats/reset", "").0, 200);
    assert_eq!(json(&get(&s, "/stats").1)["requests"], before["requests"]);
    let (status, reset) = request(&s, "POST", "/stats/reset", "");
    assert_eq!(status, 200);
    let reset = json(&reset);
    for k in ["requests", "peak_in_flight", "connections"] {
        assert_eq!(reset[k], 0, "{k} after the reset: {reset}");
    }
    // `since` is in whole seconds: it moves on or stays.
    assert!(
        reset["since"].as_u64().unwrap() >= before["since"].as_u64().unwrap(),
        "{reset}"
    );
    assert_eq!(get(&s, "/add?delay=1").0, 200);
    assert_eq!(json(&get(&s, "/stats").1)["requests"], 1);
}

#[test]
fn a_body_from_standard_input_is_sent_with_every_request() {
    let s = server();
    let (dir, path) = results_path();
    let spec = format!("http:{}/echo", s.base_url());
    let out = concur()
        .current_dir(dir.path())
        .args(["run", "-w", &spec, "-m", "seq", "-n", "2", "-r", "1"])
        .args([
            "--method", "POST", "--body", "@-", "--warmup", "0", "-q", "--json",
        ])
        .arg(&path)
        .write_stdin("task {i} says hi")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = read_lines(&path);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 1);
    // The echo answers with the body: "task 0 says hi" and "task 1 says hi".
    assert_eq!(runs[0]["bytes"], 2 * 14, "{}", runs[0]);
    let last = json(&get(&s, "/echo/last").1);
    assert_eq!(last["method"], "POST", "{last}");
    assert_eq!(last["body"], "task 1 says hi", "{last}");
}
