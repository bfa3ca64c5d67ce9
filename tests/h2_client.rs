//! The HTTP/2 client of `async` and `async-local` (src/workload/http/h2/) against a server of
//! this test's own that speaks HTTP/2 frame by frame and misbehaves on purpose: small and
//! changing SETTINGS (MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE), a GOAWAY mid-run and one
//! at every request, RST_STREAM, response heads over CONTINUATION frames with Huffman strings
//! and the dynamic table (RFC 7541 C.6), a header block over the client's limit, and bodies
//! larger than the client's windows. The server checks what the client must do (limits and
//! windows respected, WINDOW_UPDATE sent, GOAWAY on a broken head) and the runs' lines what
//! the client reports, counts exact.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::Value;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 1;
const ACK: u8 = 1;
const END_HEADERS: u8 = 4;

/// Every answer's body.
const BODY: &[u8] = b"0123456789";

/// `:status: 200`, static index 8.
const OK_HEAD: &[u8] = &[0x88];

/// What the server does.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// SETTINGS_MAX_CONCURRENT_STREAMS 2 and SETTINGS_INITIAL_WINDOW_SIZE 1,000; after its
    /// fifth answer, 1 and 3,000.
    Limits,
    /// On the first connection, GOAWAY (last stream 5) when the fourth request comes; the
    /// streams above it are never answered. Other connections answer everything.
    GoawayMidRun,
    /// GOAWAY (last stream 0) at every connection's first request.
    GoawayAlways,
    /// RST_STREAM on stream 3 (INTERNAL_ERROR) and stream 5 (REFUSED_STREAM).
    Resets,
    /// Streams 1, 3 and 5 answered with RFC 7541 C.6's three heads (Huffman, the dynamic
    /// table, evictions at 256 bytes) over CONTINUATION frames; stream 7 with a 103 first.
    Continuation,
    /// The first connection's first answer: a header block of 80,000 bytes over CONTINUATION.
    Oversized,
    /// Bodies of 3,000,000 bytes, sent within the client's windows.
    BigBodies,
}

/// What the server saw, over all its connections.
#[derive(Default, Debug)]
struct Seen {
    connections: usize,
    answered: usize,
    /// Request bodies' lengths, as they ended.
    bodies: Vec<usize>,
    /// The most streams open at once before the SETTINGS change, and after the client
    /// acknowledged it.
    max_open_before: usize,
    max_open_after: usize,
    changed_acked: bool,
    /// WINDOW_UPDATE frames from the client: on the connection, on streams.
    conn_updates: usize,
    stream_updates: usize,
    /// GOAWAY frames from the client: (code, debug data).
    goaways: Vec<(u32, String)>,
    /// What the client did wrong.
    violations: Vec<String>,
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn settings(list: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (id, v) in list {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn read_frame(r: &mut TcpStream) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut h = [0u8; 9];
    r.read_exact(&mut h)?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
    let mut p = vec![0u8; len];
    r.read_exact(&mut p)?;
    Ok((h[3], h[4], u32_at(&h[5..]) & 0x7fff_ffff, p))
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// RFC 7541 C.6.1 to C.6.3: `:status` 302, 307 and 200 with Huffman strings, each head
/// naming entries the one before added; the first preceded by a table size update to 256.
fn rfc_heads() -> [Vec<u8>; 3] {
    let mut first = vec![0x3f, 0xe1, 0x01];
    first.extend(hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"));
    [
        first,
        hex("4883 640e ffc1 c0bf"),
        hex("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07"),
    ]
}

/// The fake server on a free loopback port: its URL and what it saw.
fn serve(script: Script) -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let all = seen.clone();
    std::thread::spawn(move || {
        for (n, sock) in listener.incoming().enumerate() {
            let Ok(sock) = sock else { return };
            all.lock().unwrap().connections += 1;
            let seen = all.clone();
            std::thread::spawn(move || {
                if let Err(why) = Conn::new(n, sock, script, seen.clone()).run() {
                    seen.lock().unwrap().violations.push(why);
                }
            });
        }
    });
    (url, seen)
}

/// One connection of the fake server.
struct Conn {
    n: usize,
    sock: TcpStream,
    script: Script,
    seen: Arc<Mutex<Seen>>,
    /// Streams open (requests seen, not answered), with their body bytes so far.
    open: BTreeMap<u32, usize>,
    requests: usize,
    answered: usize,
    /// The windows the server gave the client: its initial one and each stream's now.
    given_initial: i64,
    given: BTreeMap<u32, i64>,
    /// The client's windows for the server's sending: the connection's, the initial one,
    /// each stream's.
    conn_window: i64,
    client_initial: i64,
    windows: BTreeMap<u32, i64>,
    /// Bodies to send as the windows allow: (stream, bytes left).
    sending: VecDeque<(u32, usize)>,
    acks: usize,
    change_sent: bool,
    gone_after: Option<u32>,
    rfc_heads: VecDeque<Vec<u8>>,
}

impl Conn {
    fn new(n: usize, sock: TcpStream, script: Script, seen: Arc<Mutex<Seen>>) -> Conn {
        Conn {
            n,
            sock,
            script,
            seen,
            open: BTreeMap::new(),
            requests: 0,
            answered: 0,
            given_initial: 65_535,
            given: BTreeMap::new(),
            conn_window: 65_535,
            client_initial: 65_535,
            windows: BTreeMap::new(),
            sending: VecDeque::new(),
            acks: 0,
            change_sent: false,
            gone_after: None,
            rfc_heads: rfc_heads().into_iter().collect(),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.sock
            .write_all(bytes)
            .map_err(|e| format!("write: {e}"))
    }

    fn violation(&self, why: String) {
        self.seen.lock().unwrap().violations.push(why);
    }

    fn run(mut self) -> Result<(), String> {
        let mut preface = [0u8; 24];
        if self.sock.read_exact(&mut preface).is_err() {
            return Ok(());
        }
        if preface != PREFACE {
            return Err(format!("preface {preface:?}"));
        }
        let first: &[(u16, u32)] = match self.script {
            Script::Limits => &[(3, 2), (4, 1000)],
            _ => &[(3, 100)],
        };
        if self.script == Script::Limits {
            self.given_initial = 1000;
        }
        self.send(&settings(first))?;
        while let Ok((kind, flags, id, p)) = read_frame(&mut self.sock) {
            self.frame(kind, flags, id, &p)?;
            self.flush()?;
        }
        Ok(())
    }

    fn frame(&mut self, kind: u8, flags: u8, id: u32, p: &[u8]) -> Result<(), String> {
        match kind {
            SETTINGS if flags & ACK == 0 => {
                for s in p.chunks_exact(6) {
                    if u16::from_be_bytes([s[0], s[1]]) == 4 {
                        self.client_initial = i64::from(u32_at(&s[2..]));
                    }
                }
                self.send(&frame(SETTINGS, ACK, 0, b""))?;
            }
            SETTINGS => {
                self.acks += 1;
                if self.acks == 2 && self.change_sent {
                    self.seen.lock().unwrap().changed_acked = true;
                }
            }
            PING if flags & ACK == 0 => self.send(&frame(PING, ACK, 0, p))?,
            WINDOW_UPDATE => {
                let inc = i64::from(u32_at(p) & 0x7fff_ffff);
                let mut s = self.seen.lock().unwrap();
                if id == 0 {
                    s.conn_updates += 1;
                    self.conn_window += inc;
                } else {
                    s.stream_updates += 1;
                    *self.windows.entry(id).or_insert(self.client_initial) += inc;
                }
            }
            RST_STREAM => {
                self.open.remove(&id);
            }
            GOAWAY => {
                let debug = String::from_utf8_lossy(&p[8..]).into_owned();
                self.seen
                    .lock()
                    .unwrap()
                    .goaways
                    .push((u32_at(&p[4..]), debug));
            }
            HEADERS => {
                if flags & END_HEADERS == 0 {
                    self.violation(format!("a request head in several frames on {id}"));
                }
                self.open.insert(id, 0);
                self.given.insert(id, self.given_initial);
                self.requests += 1;
                let open = self.open.len();
                {
                    let mut s = self.seen.lock().unwrap();
                    if s.changed_acked {
                        s.max_open_after = s.max_open_after.max(open);
                    } else if !self.change_sent {
                        s.max_open_before = s.max_open_before.max(open);
                    }
                }
                if self.script == Script::Limits {
                    let limit = if self.seen.lock().unwrap().changed_acked {
                        1
                    } else {
                        2
                    };
                    if open > limit {
                        self.violation(format!("{open} streams open, over the limit of {limit}"));
                    }
                }
                if flags & END_STREAM != 0 {
                    self.request_done(id)?;
                }
            }
            DATA => {
                let len = p.len();
                let window = self.given.entry(id).or_insert(0);
                *window -= len as i64;
                if *window < 0 {
                    self.violation(format!("stream {id}: DATA past the window the server gave"));
                }
                if let Some(body) = self.open.get_mut(&id) {
                    *body += len;
                }
                if len > 0 {
                    // Read at once: give the window back.
                    *self.given.get_mut(&id).unwrap() += len as i64;
                    let inc = (len as u32).to_be_bytes();
                    let mut out = frame(WINDOW_UPDATE, 0, 0, &inc);
                    out.extend(frame(WINDOW_UPDATE, 0, id, &inc));
                    self.send(&out)?;
                }
                if flags & END_STREAM != 0 {
                    self.request_done(id)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A whole request on stream `id`: answered as the script says.
    fn request_done(&mut self, id: u32) -> Result<(), String> {
        let body = self.open.get(&id).copied().unwrap_or(0);
        self.seen.lock().unwrap().bodies.push(body);
        if let Some(last) = self.gone_after {
            if id > last {
                // Refused by the GOAWAY: never answered.
                self.open.remove(&id);
                return Ok(());
            }
        }
        match self.script {
            Script::GoawayAlways => {
                let mut p = 0u32.to_be_bytes().to_vec();
                p.extend(0u32.to_be_bytes());
                p.extend(b"draining");
                self.gone_after = Some(0);
                self.open.remove(&id);
                return self.send(&frame(GOAWAY, 0, 0, &p));
            }
            Script::GoawayMidRun if self.n == 0 && self.requests == 4 => {
                let mut p = 5u32.to_be_bytes().to_vec();
                p.extend(0u32.to_be_bytes());
                self.gone_after = Some(5);
                self.send(&frame(GOAWAY, 0, 0, &p))?;
                if id > 5 {
                    self.open.remove(&id);
                    return Ok(());
                }
            }
            Script::Resets if id == 3 || id == 5 => {
                let code: u32 = if id == 3 { 2 } else { 7 };
                self.open.remove(&id);
                return self.send(&frame(RST_STREAM, 0, id, &code.to_be_bytes()));
            }
            Script::Oversized if self.n == 0 && id == 1 => {
                let mut out = frame(HEADERS, 0, 1, OK_HEAD);
                for i in 0..5 {
                    let flags = if i == 4 { END_HEADERS } else { 0 };
                    out.extend(frame(CONTINUATION, flags, 1, &[0x88; 16_000]));
                }
                self.open.remove(&id);
                return self.send(&out);
            }
            Script::BigBodies => {
                let mut out = frame(HEADERS, END_HEADERS, id, OK_HEAD);
                self.open.remove(&id);
                self.sending.push_back((id, 3_000_000));
                return self.send(&std::mem::take(&mut out));
            }
            _ => {}
        }
        self.answer(id)
    }

    /// The usual answer: a head, then BODY with END_STREAM.
    fn answer(&mut self, id: u32) -> Result<(), String> {
        self.open.remove(&id);
        let mut out = Vec::new();
        if self.script == Script::Continuation && id == 7 {
            // An informational 103 first, read past.
            out.extend(frame(
                HEADERS,
                END_HEADERS,
                id,
                &[0x08, 0x03, b'1', b'0', b'3'],
            ));
        }
        match self.rfc_heads.pop_front() {
            Some(head) if self.script == Script::Continuation => {
                // In frames of at most 9 bytes: HEADERS and CONTINUATIONs.
                let pieces: Vec<&[u8]> = head.chunks(9).collect();
                for (i, piece) in pieces.iter().enumerate() {
                    let kind = if i == 0 { HEADERS } else { CONTINUATION };
                    let flags = if i + 1 == pieces.len() {
                        END_HEADERS
                    } else {
                        0
                    };
                    out.extend(frame(kind, flags, id, piece));
                }
            }
            _ => out.extend(frame(HEADERS, END_HEADERS, id, OK_HEAD)),
        }
        out.extend(frame(DATA, END_STREAM, id, BODY));
        self.send(&out)?;
        self.answered += 1;
        self.seen.lock().unwrap().answered += 1;
        if self.script == Script::Limits && self.answered == 5 {
            // Fewer streams, a larger window, mid-run.
            self.change_sent = true;
            let delta = 3000 - self.given_initial;
            self.given_initial = 3000;
            for w in self.given.values_mut() {
                *w += delta;
            }
            self.send(&settings(&[(3, 1), (4, 3000)]))?;
        }
        Ok(())
    }

    /// Sends what the client's windows allow of the bodies being sent.
    fn flush(&mut self) -> Result<(), String> {
        while let Some(&(id, left)) = self.sending.front() {
            let window = *self.windows.entry(id).or_insert(self.client_initial);
            let n = (left as i64).min(window).min(self.conn_window).min(16_384);
            if n <= 0 {
                // Another stream may have window: rotate once through them.
                if self
                    .sending
                    .iter()
                    .all(|(s, _)| self.windows.get(s).copied().unwrap_or(self.client_initial) <= 0)
                    || self.conn_window <= 0
                {
                    return Ok(());
                }
                let front = self.sending.pop_front().unwrap();
                self.sending.push_back(front);
                continue;
            }
            let n = n as usize;
            let end = n == left;
            let out = frame(DATA, if end { END_STREAM } else { 0 }, id, &vec![b'x'; n]);
            self.send(&out)?;
            self.conn_window -= n as i64;
            *self.windows.get_mut(&id).unwrap() -= n as i64;
            if end {
                self.sending.pop_front();
                self.seen.lock().unwrap().answered += 1;
            } else {
                self.sending.front_mut().unwrap().1 -= n;
            }
        }
        Ok(())
    }
}

/// `concur run -w http:URL --http2 -r 1 ARGS` exiting with `code`: its run lines.
fn run(url: &str, args: &[&str], code: i32) -> Vec<Value> {
    let w = format!("http:{url}/x?i={{i}}");
    let mut all = vec!["-w", w.as_str(), "-r", "1", "--http2"];
    all.extend(["--request-timeout", "20s"]);
    all.extend(args);
    let (_, lines) = run_study_exiting(&all, code);
    of_type(&lines, "run").into_iter().cloned().collect()
}

fn counts(r: &Value) -> (u64, u64, u64) {
    (
        r["tasks_ok"].as_u64().unwrap(),
        r["tasks_failed"].as_u64().unwrap(),
        r["bytes"].as_u64().unwrap(),
    )
}

#[test]
fn small_limits_and_a_settings_change_mid_run_are_respected() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'b'; 5000]).unwrap();
    for model in ["async:8", "async-local:8"] {
        let (url, seen) = serve(Script::Limits);
        let runs = run(
            &url,
            &[
                "-n",
                "20",
                "-m",
                model,
                "--method",
                "POST",
                "--body",
                body.to_str().unwrap(),
            ],
            0,
        );
        let r = &runs[0];
        assert_eq!(counts(r), (20, 0, 200), "{model}: {r}");
        assert_eq!(r["peak_streams_per_connection"], 2, "{model}: {r}");
        assert_eq!(r["server_max_concurrent_streams"], 2, "{model}: {r}");
        assert_eq!(r["connections_opened"], 1, "{model}: {r}");
        let s = seen.lock().unwrap();
        assert!(s.violations.is_empty(), "{model}: {s:?}");
        // Every body of 5,000 bytes came whole through windows of 1,000, then 3,000.
        assert_eq!(s.bodies, vec![5000; 20], "{model}");
        assert_eq!(s.answered, 20, "{model}");
        assert!(
            s.changed_acked,
            "{model}: the client acknowledged the change"
        );
        assert_eq!(s.max_open_before, 2, "{model}: {s:?}");
        assert_eq!(s.max_open_after, 1, "{model}: {s:?}");
    }
}

#[test]
fn a_goaway_mid_run_sends_the_unprocessed_requests_again_on_a_new_connection() {
    for model in ["async:4", "async-local:4"] {
        let (url, seen) = serve(Script::GoawayMidRun);
        let runs = run(&url, &["-n", "20", "-m", model], 0);
        let r = &runs[0];
        assert_eq!(counts(r), (20, 0, 200), "{model}: {r}");
        assert_eq!(r["connections_opened"], 2, "{model}: {r}");
        let s = seen.lock().unwrap();
        assert_eq!((s.connections, s.answered), (2, 20), "{model}: {s:?}");
        assert!(s.violations.is_empty(), "{model}: {s:?}");
    }
}

#[test]
fn a_server_that_goes_away_at_every_request_fails_them_with_the_reason() {
    let (url, seen) = serve(Script::GoawayAlways);
    let runs = run(&url, &["-n", "2", "-m", "async:1", "-i"], 0);
    let r = &runs[0];
    assert_eq!(counts(r), (0, 2, 0), "{r}");
    assert_eq!(r["failures"]["read"], 2, "{r}");
    assert_eq!(
        r["error"],
        "2 of 2 tasks failed (first: read: the server went away before processing stream 1 \
         (GOAWAY NO_ERROR: \"draining\", last stream 0); sent 3 times, the server processed it \
         none of them)",
        "{r}"
    );
    // Three connections a request, one per attempt.
    assert_eq!(r["connections_opened"], 6, "{r}");
    assert_eq!(seen.lock().unwrap().connections, 6);
}

#[test]
fn rst_stream_fails_its_request_and_a_refused_stream_goes_again() {
    for model in ["async:1", "async-local:1"] {
        let (url, seen) = serve(Script::Resets);
        let runs = run(&url, &["-n", "10", "-m", model, "-i"], 0);
        let r = &runs[0];
        assert_eq!(counts(r), (9, 1, 90), "{model}: {r}");
        assert_eq!(r["failures"]["read"], 1, "{model}: {r}");
        assert_eq!(
            r["error"],
            "1 of 10 tasks failed (first: read: the server reset stream 3 (INTERNAL_ERROR))",
            "{model}: {r}"
        );
        assert_eq!(r["connections_opened"], 1, "{model}: {r}");
        let s = seen.lock().unwrap();
        assert_eq!((s.connections, s.answered), (1, 9), "{model}: {s:?}");
    }
}

#[test]
fn response_heads_over_continuation_frames_with_huffman_and_the_dynamic_table_are_read() {
    for model in ["async:1", "async-local:1"] {
        let (url, seen) = serve(Script::Continuation);
        let runs = run(&url, &["-n", "6", "-m", model], 0);
        let r = &runs[0];
        // 302, 307 and 200 from RFC 7541's heads, 200 after a 103, then 200s.
        assert_eq!(counts(r), (6, 0, 60), "{model}: {r}");
        let s = seen.lock().unwrap();
        assert_eq!(s.answered, 6, "{model}");
        assert!(
            s.goaways.iter().all(|(code, _)| *code == 0),
            "{model}: {s:?}"
        );
    }
}

#[test]
fn a_header_block_over_the_clients_limit_is_refused_with_a_clear_error() {
    let (url, seen) = serve(Script::Oversized);
    let runs = run(&url, &["-n", "3", "-m", "async:1", "-i"], 0);
    let r = &runs[0];
    assert_eq!(counts(r), (2, 1, 20), "{r}");
    let why = "the server sent a header block over 65536 bytes on stream 1 (the client's limit)";
    assert_eq!(
        r["error"],
        format!("1 of 3 tasks failed (first: read: {why})"),
        "{r}"
    );
    // The connection was closed with ENHANCE_YOUR_CALM and the reason; the next one served.
    assert_eq!(r["connections_opened"], 2, "{r}");
    let s = seen.lock().unwrap();
    assert!(
        s.goaways.contains(&(0xb, why.to_string())),
        "{:?}",
        s.goaways
    );
}

#[test]
fn bodies_larger_than_the_windows_flow_as_the_client_gives_window_back() {
    for model in ["async:4", "async-local:4"] {
        let (url, seen) = serve(Script::BigBodies);
        let runs = run(&url, &["-n", "4", "-m", model], 0);
        let r = &runs[0];
        // 12 MB: over the connection's 5 MiB and each stream's 2 MiB.
        assert_eq!(counts(r), (4, 0, 12_000_000), "{model}: {r}");
        let s = seen.lock().unwrap();
        // Past the preface's update: the connection's window given back as it was read.
        assert!(
            s.conn_updates >= 2 && s.stream_updates >= 8,
            "{model}: {s:?}"
        );
        assert!(s.violations.is_empty(), "{model}: {s:?}");
    }
}

/// nghttpd (nghttp2's server) serving `dir` on a free port, h2c or over TLS with `key` and
/// `cert`, at most 10 streams a connection; killed when dropped.
struct Nghttpd {
    child: std::process::Child,
    port: u16,
}

impl Nghttpd {
    fn start(dir: &std::path::Path, tls: Option<(&str, &str)>) -> Nghttpd {
        let port = free_port();
        let mut cmd = std::process::Command::new("nghttpd");
        cmd.arg("-d").arg(dir).args(["-m", "10"]);
        match tls {
            None => cmd.args(["--no-tls", &port.to_string()]),
            Some((key, cert)) => cmd.args([&port.to_string(), key, cert]),
        };
        let child = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nghttpd starts");
        wait_for(
            "nghttpd to listen",
            std::time::Duration::from_secs(10),
            || TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        Nghttpd { child, port }
    }
}

impl Drop for Nghttpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "full tier: needs nghttpd (apt-get install nghttp2-server) and openssl"]
fn nghttpd_an_independent_server_gets_the_exact_bytes_over_h2c_and_h2() {
    require(&[Need::Nghttpd, Need::Openssl]);
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("small"), vec![b's'; 1000]).unwrap();
    std::fs::write(docs.join("big"), vec![b'b'; 3_000_000]).unwrap();
    let out = std::process::Command::new("openssl")
        .current_dir(dir.path())
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args([
            "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "1",
        ])
        .args(["-subj", "/CN=127.0.0.1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (key, cert) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
    for tls in [false, true] {
        let server = Nghttpd::start(
            &docs,
            tls.then_some((key.to_str().unwrap(), cert.to_str().unwrap())),
        );
        let scheme = if tls { "https" } else { "http" };
        // 200 small answers with 20 in flight over a limit of 10; 6 bodies past the windows.
        for (path, n, size) in [("small", 200u64, 1000u64), ("big", 6, 3_000_000)] {
            let w = format!("http:{scheme}://127.0.0.1:{}/{path}", server.port);
            let n_text = n.to_string();
            let mut args = vec!["-w", &w, "-n", &n_text, "-r", "1", "--http2"];
            args.extend(["-m", "async:20", "-m", "async-local:20"]);
            if tls {
                args.push("-k");
            }
            let (_, lines) = run_study(&args);
            let runs = of_type(&lines, "run");
            assert_eq!(runs.len(), 2);
            for r in runs {
                assert_eq!(counts(r), (n, 0, n * size), "tls {tls}: {r}");
                assert_eq!(r["http_version"], "2", "{r}");
                assert_eq!(r["connections_opened"], 1, "{r}");
                assert_eq!(r["server_max_concurrent_streams"], 10, "{r}");
                if path == "small" {
                    assert_eq!(r["peak_streams_per_connection"], 10, "{r}");
                }
            }
        }
    }
}
