//! What the fuzz targets in `fuzz/` and the instruction-count benchmark (`benches/icount.rs`)
//! need beyond the public parsers (not an API: hidden from the documentation, and free to
//! change with them). Public parsers are called where they are; what a harness needs around
//! one (a socket that delivers a response in pieces, the bytes of a request head) lives here,
//! so that nothing else has to be made public for it.
//!
//! Each fuzz target's whole harness is a function here ([`TARGETS`]): the target in
//! `fuzz/fuzz_targets/` only calls it, and `tests/fuzz_corpora.rs` replays every committed
//! corpus input through the same function, so `cargo test` catches a regression without
//! cargo-fuzz.

use std::io::{BufReader, Read};
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;

use crate::analysis::results::{Line, RunStatus};
use crate::hub::keys::{self, KeyList, PublicKey, SigningKey};
use crate::hub::merge::{self, PartOutcome, ShareBounds};
use crate::hub::seal::{OpenKey, SealKey};
use crate::hub::sign::{self, Expect, HubKey, Opener, Seen};
use crate::hub::work::{self, PartDone, PartWork, Refusal, Work};
use crate::hub::{admit, AgentInfo};
use crate::measure::latency::{LatencyRecorder, LatencyWire};
use crate::os::terminal::{escape_controls, escape_json_controls};
use crate::plan;
use crate::plan::options::StudyOptions;
use crate::plan::{CellPlan, Plan};
use crate::runner::convert;
use crate::runner::supervise::Ended;
use crate::workload::outside::Allowed;
use crate::workload::HttpRequest;

/// `req`'s bytes as the green client writes them (`workload::http::wire`): the request line,
/// the headers in order, the empty line and the body.
pub fn request_head(req: &HttpRequest) -> Vec<u8> {
    crate::workload::http::write_request(req)
}

/// Reads one HTTP/1.1 response from `bytes` with the green client's parser
/// (`workload::http::wire`), as it arrives from a socket in pieces of at most `piece` bytes
/// through a buffer of `capacity` bytes: (status, body bytes, kept connection) and how many
/// bytes of `bytes` it consumed.
pub fn read_response(
    bytes: &[u8],
    piece: usize,
    capacity: usize,
    to_head: bool,
) -> std::io::Result<((u16, u64, bool), usize)> {
    let mut r = BufReader::with_capacity(
        capacity.max(1),
        Pieces {
            rest: bytes,
            piece: piece.max(1),
        },
    );
    let got = crate::workload::http::read_response_to(&mut r, to_head)?;
    let consumed = bytes.len() - r.get_ref().rest.len() - r.buffer().len();
    Ok((got, consumed))
}

/// A reader that hands out at most `piece` bytes a read, as a socket does when a response
/// arrives in several segments.
struct Pieces<'a> {
    rest: &'a [u8],
    piece: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.rest.len().min(self.piece).min(out.len());
        out[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}

/// The text a `&str` fuzz target sees of `data`: its longest valid UTF-8 prefix (what
/// libfuzzer-sys gives a `|text: &str|` target), so that a corpus input replays the same
/// whether libFuzzer or `cargo test` (tests/fuzz_corpora.rs) feeds it.
pub fn text(data: &[u8]) -> &str {
    match std::str::from_utf8(data) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&data[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// A fuzz target's harness: the input's bytes in, a panic for what it finds.
pub type Harness = fn(&[u8]);

/// Every fuzz target by name, with the function its harness calls: what
/// `tests/fuzz_corpora.rs` replays each corpus through. A target missing here has no replay.
pub const TARGETS: &[(&str, Harness)] = &[
    ("units", units),
    ("rate", rate),
    ("workload_spec", workload_spec),
    ("model_spec", model_spec),
    ("results_line", results_line),
    ("http_response", http_response),
    ("job", job),
    ("query", query),
    ("hub_work", hub_work),
    ("hub_answer", hub_answer),
    ("hub_heartbeat", hub_heartbeat),
    ("hub_keys", hub_keys),
    ("histogram", histogram),
    ("concur_line", concur_line),
    ("backend_url", backend_url),
    ("header", header),
    ("h2_frames", h2_frames),
    ("http3_request", http3_request),
];

/// `units::parse_duration` and `units::parse_size` (every duration and size flag, the
/// server's query values): no panic, and what is accepted prints back (`fmt_duration_spec`)
/// to text that parses to the same value, to the nanosecond.
pub fn units(data: &[u8]) {
    use crate::base::units::{fmt_duration_spec, parse_duration, parse_size};
    let text = text(data);
    if let Ok(d) = parse_duration(text) {
        let printed = fmt_duration_spec(d);
        let again = parse_duration(&printed)
            .unwrap_or_else(|e| panic!("{text:?} -> {d:?} -> {printed:?} is refused: {e}"));
        assert_eq!(again, d, "{text:?} -> {printed:?}");
    }
    if let Ok(n) = parse_size(text) {
        assert_eq!(parse_size(&n.to_string()), Ok(n), "{text:?}");
    }
}

/// `--rate` and `--slo` (`study::rate::parse_rate`, `parse_slo`): no panic; an accepted rate
/// is finite and above 0, a ramp does not fall. The text is the rate, or `RATE\nSLO`.
pub fn rate(data: &[u8]) {
    use crate::plan::rate::{parse_rate, parse_slo, Rate};
    let text = text(data);
    let (rate, slo) = match text.split_once('\n') {
        Some((r, s)) => (r, Some(s)),
        None => (text, None),
    };
    match parse_rate(rate, slo) {
        Ok(Rate::Fixed(r)) => assert!(r.is_finite() && r > 0.0, "{text:?}: {r}"),
        Ok(Rate::Ramp(a, b)) => {
            assert!(
                a.is_finite() && b.is_finite() && 0.0 < a && a < b,
                "{text:?}"
            )
        }
        Ok(Rate::Auto(_)) => assert!(slo.is_some(), "{text:?}"),
        Err(_) => {}
    }
    let _ = parse_slo(text);
}

/// Workload specs (`workload::parse`, `-w`, `advise`'s argument, a job's payload): no panic,
/// and an accepted spec prints (`Workload::spec`) to a spec that parses to the same print.
pub fn workload_spec(data: &[u8]) {
    use crate::workload::{parse, WorkloadOptions};
    let spec = text(data);
    let opts = WorkloadOptions::default();
    if let Ok(w) = parse(spec, &opts) {
        let printed = w.spec();
        let again = parse(&printed, &opts)
            .unwrap_or_else(|e| panic!("{spec:?} prints as {printed:?}, refused: {e}"));
        assert_eq!(again.spec(), printed, "{spec:?}");
    }
}

/// Model specs and scans (`model::parse`, `model::expand_scan`, `-m`) and `--peer
/// LABEL=COMMAND`: no panic; an accepted spec prints (`Model::spec`) to a spec that parses to
/// the same print, and every spec a scan (`NAME:W1,W2` or `NAME:LO..HI`) expands to parses
/// (any other spec comes back alone, as typed, for `parse` to judge).
pub fn model_spec(data: &[u8]) {
    use crate::model::{expand_scan, parse};
    use crate::plan::options::PeerRequest;
    let spec = text(data);
    if let Ok(m) = parse(spec) {
        let printed = m.spec();
        let again = parse(&printed)
            .unwrap_or_else(|e| panic!("{spec:?} prints as {printed:?}, refused: {e}"));
        assert_eq!(again.spec(), printed, "{spec:?}");
    }
    let scan = spec
        .split_once(':')
        .is_some_and(|(_, list)| list.contains(',') || list.contains(".."));
    if let Ok(specs) = expand_scan(spec) {
        assert!(!specs.is_empty(), "{spec:?} expands to nothing");
        for s in specs.iter().filter(|_| scan) {
            if let Err(e) = parse(s) {
                panic!("{spec:?} expands to {s:?}, refused: {e}");
            }
        }
    }
    let _ = PeerRequest::parse(spec);
}

/// One line of a results file (`analysis::results::parse_line`, what `concur report` and
/// `--baseline` read): no panic, and an accepted line written back as concur writes it
/// (serde_json) reads back to the same line.
pub fn results_line(bytes: &[u8]) {
    use crate::analysis::results::parse_line;
    if let Ok(Some(line)) = parse_line(bytes) {
        let text = serde_json::to_string(&line)
            .unwrap_or_else(|e| panic!("{line:?} does not serialise: {e}"));
        let again = parse_line(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text} is refused: {e}"))
            .unwrap_or_else(|| panic!("{text} reads back blank"));
        assert_eq!(again, line, "{text}");
    }
}

/// The green client's HTTP/1.1 response parser (`workload/http/wire.rs`: the head with
/// httparse, bodies by length, chunks or close): no panic, nothing consumed past the input,
/// and the same answer however the bytes arrive (in one read, or in small pieces through a
/// small buffer). The first byte: the piece size (1 to 64) and whether the request was a
/// HEAD.
pub fn http_response(data: &[u8]) {
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let (piece, to_head) = (usize::from(first & 63) + 1, first & 64 != 0);
    let whole = read_response(bytes, bytes.len().max(1), bytes.len().max(1), to_head);
    let split = read_response(bytes, piece, 16, to_head);
    if let Ok((_, consumed)) = &whole {
        assert!(*consumed <= bytes.len());
    }
    // A head over 64 KiB is only refused when it spans reads; inputs stay below that.
    if bytes.len() < 60 << 10 {
        match (&whole, &split) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{bytes:?}"),
            (Err(_), Err(_)) => {}
            _ => panic!("in one read: {whole:?}; in pieces of {piece}: {split:?}"),
        }
    }
}

/// One HTTP/2 request and its answer through the client's connection state, in the steady state
/// of `async` against `concur serve` (`benches/icount.rs`'s `h2_exchange`): no socket.
pub struct H2Exchange(crate::workload::http::H2BenchExchange);

impl H2Exchange {
    /// A connection past its handshake and first answers.
    #[allow(clippy::new_without_default)]
    pub fn new() -> H2Exchange {
        H2Exchange(crate::workload::http::H2BenchExchange::new())
    }

    /// One request and its answer: (status, body bytes).
    pub fn one(&mut self) -> (u16, u64) {
        self.0.one()
    }
}

/// The HTTP/2 client's frame reader and HPACK decoder (`workload::http::h2`) on a server's
/// bytes: three streams open, the bytes fed whole and in pieces; no panic, the same outcome
/// either way, the client's own frames whole, windows and the HPACK table within bounds.
pub fn h2_frames(data: &[u8]) {
    crate::workload::http::h2_server_bytes(data);
}

/// A job payload as read from Redis or SQLite (`jobs::Job::parse`): no panic, and an
/// accepted job written back (`Job::to_json`, as it is pushed again after a failure) reads
/// back to the same job.
pub fn job(data: &[u8]) {
    use crate::jobs::Job;
    let raw = text(data);
    if let Ok(job) = Job::parse(raw) {
        let json = job.to_json();
        let again = Job::parse(&json).unwrap_or_else(|e| panic!("{json} is refused: {e}"));
        assert_eq!(again, job, "{raw:?} -> {json}");
        let _ = job.max_retries();
    }
}

/// The delay server's `/add?delay=MS` query (`server::routes::add_delay`), as any client may
/// send it: no panic; what is accepted is within `--max-delay`; what is refused names the
/// `delay` parameter; a plain number of milliseconds in range is accepted as that many.
pub fn query(data: &[u8]) {
    use crate::server::routes::add_delay;
    const MAX: Duration = Duration::from_secs(10);
    let query = text(data);
    match add_delay(MAX, query) {
        Ok(d) => assert!(d <= MAX, "{query:?} -> {d:?}"),
        Err(e) => assert_eq!(e.parameter, "delay", "{query:?}: {}", e.error),
    }
    if let Ok(ms) = query.parse::<u32>() {
        let plain = format!("delay={ms}");
        let want = Duration::from_millis(u64::from(ms));
        match add_delay(MAX, &plain) {
            Ok(d) => assert_eq!(d, want, "{plain}"),
            Err(_) => assert!(want > MAX, "{plain} refused"),
        }
    }
}

/// An HTTP/3 request as h3 hands it to the delay server once QPACK has decoded it (its
/// method, target and headers; `server::http3`), answered by the routes every protocol shares
/// and shaped for HTTP/3 (`http3::answer_head`). The input is `METHOD TARGET` on the first
/// line, `name: value` lines, an empty line and the body; a head that h3 would not hand over
/// (a method, target or header the `http` crate refuses) is skipped. No panic; no answer
/// carries `Connection` (HTTP/3 forbids it); a `Content-Length` is the body's exact length;
/// no answer is a 500 unless `/status/500` asked for it; every error the server makes
/// itself is JSON with an `error`. Delays above 0 are refused (`--max-delay 0`), so no input
/// waits.
pub fn http3_request(data: &[u8]) {
    use crate::server::{http3, routes};
    use axum::http::{header, HeaderName, HeaderValue, Method, Request, Uri};
    use http_body_util::BodyExt;
    static APP: OnceLock<axum::Router> = OnceLock::new();
    let app = APP.get_or_init(|| {
        routes::router(routes::AppState {
            stats: std::sync::Arc::new(crate::server::Stats::default()),
            max_delay: Duration::ZERO,
            max_bytes: 1 << 16,
            echo_budget: routes::EchoBudget::new(crate::server::MIN_ECHO_BUDGET),
        })
    });
    let input = text(data);
    let (head, body) = input.split_once("\n\n").unwrap_or((input, ""));
    let mut lines = head.lines();
    let first = lines.next().unwrap_or_default();
    let (method, target) = first.split_once(' ').unwrap_or(("GET", first));
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return;
    };
    let Ok(uri) = Uri::builder()
        .scheme("https")
        .authority("localhost")
        .path_and_query(target)
        .build()
    else {
        return;
    };
    let mut req = Request::new(axum::body::Body::from(body.to_string()));
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    *req.version_mut() = axum::http::Version::HTTP_3;
    for line in lines {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value.trim()),
        ) else {
            return;
        };
        req.headers_mut().append(name, value);
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    else {
        return;
    };
    let svc = hyper_util::service::TowerToHyperService::new(app.clone());
    let (parts, bytes) = rt.block_on(async {
        let Ok(answer) = hyper::service::Service::call(&svc, req).await;
        let (parts, body) = http3::answer_head(answer).into_parts();
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        (parts, bytes)
    });
    let status = parts.status.as_u16();
    let path = target.split('?').next().unwrap_or_default();
    assert!(
        !parts.headers.contains_key(header::CONNECTION),
        "{first:?}: Connection on an HTTP/3 answer"
    );
    if let Some(n) = parts.headers.get(header::CONTENT_LENGTH) {
        let n: usize = n
            .to_str()
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        if method != Method::HEAD {
            assert_eq!(n, bytes.len(), "{first:?}: Content-Length against the body");
        }
    }
    let asked = path.starts_with("/status/");
    assert!(status != 500 || asked, "{first:?}: 500");
    // A HEAD answer has no body to be JSON.
    if status >= 400 && !asked && method != Method::HEAD {
        let e: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "{first:?}: {status} not JSON: {:?}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert!(e["error"].is_string(), "{first:?}: {e}");
    }
}

/// The hub key the hub targets sign and open with (`CONCUR_HUB_KEY` in a test).
pub const TEST_HUB_KEY: &str = "concur-fuzz-hub-key-0123456789abcdef";

/// The hub's clock as the hub targets read it, ns since the epoch (2027-01-15).
pub const TEST_HUB_NS: u64 = 1_800_000_000_000_000_000;

/// The agent the hub targets' work is addressed to, and whose answers they read.
pub const TEST_AGENT: &str = "a1";

/// The run the hub targets' answers belong to (a study's id: hexadecimal).
pub const TEST_RUN: &str = "0f3a9c";

/// The share an answer is read against: 4 tasks on an agent of 2 cores, the study waiting
/// 35 s (a 30 s timeout and its lead).
pub const TEST_SHARE: ShareBounds = ShareBounds {
    tasks: 4,
    cores: 2,
    wall_max_s: 35.0,
};

/// The epoch the hub targets' agent published at join.
pub const TEST_EPOCH: &str = "19a0c0ffee-00112233445566778899aabbccddeeff";

/// The study key the hub targets' agent lists (a fixed seed), which signs their work.
pub fn test_study_key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| {
        SigningKey::from_seed(&[1; 32]).unwrap_or_else(|e| panic!("the study key: {e}"))
    })
}

/// The hub targets' agent's own key (a fixed seed), which signs their answers.
pub fn test_agent_key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| {
        SigningKey::from_seed(&[2; 32]).unwrap_or_else(|e| panic!("the agent key: {e}"))
    })
}

/// The hub targets' agent's sealing key (a fixed seed), which their shares are sealed to.
pub fn test_agent_open_key() -> &'static OpenKey {
    static KEY: OnceLock<OpenKey> = OnceLock::new();
    KEY.get_or_init(|| {
        OpenKey::from_seed(&[4; 32]).unwrap_or_else(|e| panic!("the sealing key: {e}"))
    })
}

/// Takes `key` only: a receiver's list of one.
fn only(key: PublicKey) -> impl Fn(&PublicKey) -> std::result::Result<(), String> {
    move |k| {
        if *k == key {
            Ok(())
        } else {
            Err(format!("{} is not listed", k.short()))
        }
    }
}

/// The key of [`TEST_HUB_KEY`].
pub fn test_hub_key() -> HubKey {
    HubKey::new(TEST_HUB_KEY).unwrap_or_else(|e| panic!("the test key is refused: {e}"))
}

/// A work item as an agent takes it from its list (`hub/agent.rs`): bounded
/// (`admit::check_size`), opened without a key (the text is the body) and with
/// [`TEST_HUB_KEY`] at [`TEST_HUB_NS`] (`sign::open`: a valid envelope opens once, a second
/// time is a replay), then read (`admit::read_work`) and, as the agent does, checked: a share
/// by `admit::check_part` with the default `--allow-*` (none), reply keys and study ids by
/// theirs. No panic; an accepted share runs no command, has a timeout `Duration` can hold
/// and starts within a minute of the hub's clock; an accepted reply key is printable; a work
/// item sealed and opened again is the same; a sealed share (`Work::Sealed`) opens with the
/// test agent's key only as the share it names, and a share sealed to that key opens back the
/// same, for the agent's epoch only.
pub fn hub_work(data: &[u8]) {
    let text = text(data);
    if admit::check_size(text).is_err() {
        return;
    }
    let bare = sign::open(
        None,
        TEST_AGENT,
        None,
        text,
        TEST_HUB_NS,
        &mut Seen::default(),
    );
    assert_eq!(
        bare.as_deref(),
        Ok(text),
        "without a key the message is the body"
    );
    judge_work(text);
    let key = test_hub_key();
    let mut seen = Seen::default();
    if let Ok(body) = sign::open(Some(&key), TEST_AGENT, None, text, TEST_HUB_NS, &mut seen) {
        let again = sign::open(Some(&key), TEST_AGENT, None, text, TEST_HUB_NS, &mut seen);
        assert!(again.is_err(), "{text:?} opened twice");
        judge_work(&body);
    }
    // With keys per party: signed by the listed study key, for this agent's epoch.
    let study = test_study_key().public();
    let accept = only(study);
    let e = Expect {
        to: TEST_AGENT,
        scope: None,
        epoch: Some(TEST_EPOCH),
        now_ns: TEST_HUB_NS,
    };
    let mut seen = Seen::default();
    if let Ok(o) = sign::open_with(Opener::Keys(&accept), &e, text, &mut seen) {
        assert_eq!(o.signer, Some(study), "{text:?}");
        let again = sign::open_with(Opener::Keys(&accept), &e, text, &mut seen);
        assert!(again.is_err(), "{text:?} opened twice");
        judge_work(&o.body);
    }
}

/// What an agent does with one work item's body once opened.
fn judge_work(body: &str) {
    let Ok(work) = admit::read_work(body) else {
        return;
    };
    match &work {
        Work::Part(w) => {
            let command = w.request.recipe.workload.starts_with("cmd:");
            // An `http:` target named by a host name would be resolved (DNS): a fuzz run
            // checks only shares whose target is an address.
            if resolves_offline(w) && admit::check_part(w, &Allowed::default(), TEST_HUB_NS).is_ok()
            {
                assert!(
                    !command,
                    "a command accepted without --allow-commands: {body}"
                );
                assert!(w.timeout_s.is_finite() && w.timeout_s > 0.0, "{body}");
                let _ = Duration::from_secs_f64(w.timeout_s);
                let ahead = w.start_hub_ns.abs_diff(TEST_HUB_NS);
                assert!(
                    ahead <= admit::MAX_START_DISTANCE.as_nanos() as u64,
                    "{body}"
                );
            }
        }
        Work::Serve { study, reply, .. } => {
            if admit::check_reply_key(reply).is_ok() {
                assert!(reply.chars().all(|c| c.is_ascii_graphic()), "{reply:?}");
            }
            let _ = admit::check_study_id(study);
        }
        Work::Unserve { study } => {
            if admit::check_study_id(study).is_ok() {
                assert!(
                    study.chars().all(|c| c.is_ascii_alphanumeric()),
                    "{study:?}"
                );
            }
        }
        Work::Usage { reply } => {
            let _ = admit::check_reply_key(reply);
        }
        Work::Stop => {}
        Work::Sealed { part, blob } => {
            // Opened as the test agent would: only ever the share it is sealed as.
            let key = test_agent_open_key();
            if let Ok(inner) =
                admit::open_sealed(key, TEST_AGENT, TEST_EPOCH, TEST_RUN, *part, blob)
            {
                match &inner {
                    Work::Part(w) => assert!(w.run == TEST_RUN && w.part == *part, "{body}"),
                    _ => panic!("a sealed item opened as {inner:?}"),
                }
            }
        }
    }
    // What is accepted, sealed by a study and opened by its agent, is the same work.
    let json = serde_json::to_string(&work).unwrap_or_else(|e| panic!("{work:?}: {e}"));
    // A share sealed to its agent's key opens with that key, for that epoch only.
    if let Work::Part(w) = &work {
        let (run, part) = (w.run.clone(), w.part);
        let key = test_agent_open_key();
        let sealed = work
            .clone()
            .sealed_to(&key.public(), TEST_AGENT, TEST_EPOCH)
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        let Work::Sealed { blob, .. } = &sealed else {
            panic!("a share not sealed: {sealed:?}");
        };
        assert!(blob.len() <= crate::hub::seal::MAX_SEALED_CHARS, "{body}");
        let opened = admit::open_sealed(key, TEST_AGENT, TEST_EPOCH, &run, part, blob)
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        let again = serde_json::to_string(&opened).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again, json, "sealed and opened");
        assert!(admit::open_sealed(key, TEST_AGENT, "0-1", &run, part, blob).is_err());
    }
    let key = test_hub_key();
    let sealed = sign::seal(Some(&key), TEST_AGENT, TEST_RUN, TEST_HUB_NS, json.clone());
    let opened = sign::open(
        Some(&key),
        TEST_AGENT,
        Some(TEST_RUN),
        &sealed,
        TEST_HUB_NS,
        &mut Seen::default(),
    );
    assert_eq!(opened.as_deref(), Ok(json.as_str()), "sealed: {sealed}");
    // And signed by the study's own key for the agent's epoch.
    let at = sign::Address {
        to: TEST_AGENT,
        scope: TEST_RUN,
        epoch: TEST_EPOCH,
        at_ns: TEST_HUB_NS,
    };
    let sealed = sign::seal_with(sign::Sealer::Own(test_study_key()), &at, json.clone());
    let accept = only(test_study_key().public());
    let e = Expect {
        to: TEST_AGENT,
        scope: Some(TEST_RUN),
        epoch: Some(TEST_EPOCH),
        now_ns: TEST_HUB_NS,
    };
    let opened = sign::open_with(Opener::Keys(&accept), &e, &sealed, &mut Seen::default());
    assert_eq!(opened.map(|o| o.body), Ok(json), "sealed: {sealed}");
}

/// Whether checking `w`'s target resolves no host name: its workload is not `http:`, or its
/// URL names an address (or does not parse: refused before any lookup).
fn resolves_offline(w: &PartWork) -> bool {
    let r = &w.request.recipe;
    let (name, args) = r.workload.split_once(':').unwrap_or((&r.workload, ""));
    if name != "http" {
        return true;
    }
    match crate::workload::http::connect_address(args, r.options.base_url.as_deref()) {
        Ok(connect) => connect.parse::<std::net::SocketAddr>().is_ok(),
        Err(_) => true,
    }
}

/// An answer as a study reads it from a run's list (`hub/executor.rs`): bounded
/// (`merge::ANSWER_MAX_BYTES`), read as a `PartDone` both bare and opened with
/// [`TEST_HUB_KEY`] for `study` in [`TEST_RUN`]; a run's account checked against
/// [`TEST_SHARE`] (`merge::check_ended`), then, if it passes, made into the run line the
/// study's runner would (`convert::classify`, `convert::convert`) and merged twice over
/// (`merge::merge`, two hosts that said the same). No panic; an accepted answer keeps at most
/// 20 stderr lines, its histograms decode, and the merged run line is one `concur report`
/// reads back.
pub fn hub_answer(data: &[u8]) {
    if data.len() > merge::ANSWER_MAX_BYTES {
        return;
    }
    read_answer(data);
    // An agent's refusal notice: taken only within its bound, its reason clean and short.
    if let Some(r) = Refusal::read(data) {
        assert!(data.len() <= work::REFUSAL_MAX_BYTES);
        assert!(r.why.chars().count() <= work::REFUSAL_WHY_CHARS, "{r:?}");
        assert!(!r.why.chars().any(char::is_control), "{r:?}");
        assert!(r.scope.chars().count() <= 128, "{r:?}");
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // An answer whose signature was refused: its body, read unchecked, as the study reads it.
    if let Some(body) = sign::body_of(text) {
        read_answer(body.as_bytes());
    }
    let key = test_hub_key();
    let mut seen = Seen::default();
    let opened = sign::open(
        Some(&key),
        "study",
        Some(TEST_RUN),
        text,
        TEST_HUB_NS,
        &mut seen,
    );
    if let Ok(body) = opened {
        read_answer(body.as_bytes());
    }
    // Signed by the agent the share went to, with its own key.
    let accept = only(test_agent_key().public());
    let e = Expect {
        to: "study",
        scope: Some(TEST_RUN),
        epoch: None,
        now_ns: TEST_HUB_NS,
    };
    if let Ok(o) = sign::open_with(Opener::Keys(&accept), &e, text, &mut Seen::default()) {
        read_answer(o.body.as_bytes());
    }
}

fn read_answer(bytes: &[u8]) {
    let Ok(done) = serde_json::from_slice::<PartDone>(bytes) else {
        return;
    };
    let Some(mut ended) = done.ended else {
        return;
    };
    if merge::check_ended(&mut ended, TEST_SHARE).is_err() {
        return;
    }
    assert!(ended.stderr_tail.len() <= merge::STDERR_TAIL_LINES);
    for l in &ended.stderr_tail {
        assert!(l.chars().count() <= merge::TEXT_MAX_CHARS + 1, "{l:?}");
    }
    assert!(ended.wall_s.is_finite() && ended.wall_s <= TEST_SHARE.wall_max_s);
    let report = ended.report.as_ref();
    let latency = report.and_then(|r| r.latency_hdr.clone());
    let queue_wait = report.and_then(|r| r.queue_wait_hdr.clone());
    for w in latency.iter().chain(queue_wait.iter()) {
        if let Err(e) = LatencyRecorder::from_wire(w) {
            panic!("an accepted answer's histogram does not decode: {e}");
        }
    }
    let (plan, whole, host) = answer_cells();
    let ended: Ended = ended.into();
    let first_task_ns = ended.report.as_ref().and_then(|r| r.first_task_ns);
    let verdict = convert::classify(&ended, plan.timeout);
    let run = convert::convert(host, 0, ended, verdict);
    let part = |share| PartOutcome {
        host: format!("a{share}"),
        share,
        tasks: TEST_SHARE.tasks,
        run: Some(run.clone()),
        lost: None,
        latency: latency.clone(),
        queue_wait: queue_wait.clone(),
        clock: done.clock,
        first_task_ns,
    };
    let base = convert::template(whole, 0, RunStatus::Ok, 0.0, None);
    let merged = merge::merge(base, vec![part(0), part(1)], 0.2);
    let line = serde_json::to_string(&Line::Run(merged))
        .unwrap_or_else(|e| panic!("a merged run line does not serialise: {e}"));
    if let Err(e) = crate::analysis::results::parse_line(line.as_bytes()) {
        panic!("a merged run line concur report refuses ({e}): {line}");
    }
}

/// The plan an answer is read in (`fib:5` under `seq`, 8 tasks over 2 hosts, a 30 s
/// timeout), its cell and one host's share of it.
fn answer_cells() -> &'static (Plan, CellPlan, CellPlan) {
    static CELLS: OnceLock<(Plan, CellPlan, CellPlan)> = OnceLock::new();
    CELLS.get_or_init(|| {
        let opts = StudyOptions {
            workloads: vec!["fib:5".into()],
            models: vec!["seq".into()],
            tasks: vec![2 * TEST_SHARE.tasks],
            repeat: crate::plan::options::RepeatArg { repeat: Some(1) },
            warmup: Some(0),
            timeout: Duration::from_secs(30),
            ..StudyOptions::default()
        };
        let plan = plan::build(&opts)
            .unwrap_or_else(|e| panic!("the answer target's plan: {e}"))
            .over_hosts(&[2]);
        let whole = plan.cells[0].clone();
        let mut host = whole.clone();
        host.key.hosts = None;
        host.key.tasks = TEST_SHARE.tasks;
        (plan, whole, host)
    })
}

/// An agent's heartbeat as the study and `concur agents` read it (`hub::AgentInfo`): no
/// panic; written back as `concur agents --format json` prints it (its controls escaped,
/// `escape_json_controls`) it reads back the same; every text of it as the table shows it
/// (`escape_controls`) holds no control character and no bidirectional override.
pub fn hub_heartbeat(data: &[u8]) {
    let Ok(info) = serde_json::from_slice::<AgentInfo>(data) else {
        return;
    };
    let json = serde_json::to_string(&info).unwrap_or_else(|e| panic!("{info:?}: {e}"));
    let shown = escape_json_controls(&json);
    let again: AgentInfo = serde_json::from_str(&shown)
        .unwrap_or_else(|e| panic!("{json} printed as {shown} does not read back: {e}"));
    assert_eq!(again, info, "{shown}");
    assert!(!shown.chars().any(unsafe_char), "{shown:?}");
    let texts = [&info.name, &info.host, &info.version, &info.doing];
    for t in texts.into_iter().chain(info.addr.as_ref()) {
        let e = escape_controls(t);
        assert!(!e.chars().any(unsafe_char), "{t:?} shows as {e:?}");
    }
    let _ = info.version_refusal();
    // A signed heartbeat: the key that signed it is the one it names.
    if let Ok(k) = crate::hub::beat_signer(&info) {
        assert_eq!(info.key.as_deref().map(PublicKey::parse), Some(Ok(k)));
    }
    if let Some(k) = &info.seal_key {
        if let Ok(key) = SealKey::parse(k) {
            assert_eq!(&key.to_string(), k);
        }
    }
    if let Some(e) = &info.epoch {
        if sign::check_epoch(e).is_ok() {
            assert!(
                e.chars().all(|c| c.is_ascii_hexdigit() || c == '-'),
                "{e:?}"
            );
        }
    }
    let _ = crate::hub::clock::describe(&info.clock());
    let _ = crate::hub::executor::busy_names([&info]);
    let _ = TEST_HUB_NS.saturating_sub(info.beat_hub_ns) as f64 / 1e9;
}

/// The keys an operator lists and a party's key file (`hub::keys`), an epoch and a signature
/// as they come from the hub: a key list (`KeyList::parse`: a file, `CONCUR_STUDY_KEYS`), a
/// public key, a PEM key file, a signature, an epoch, an agent's sealing key and a sealed
/// share's blob (`hub::seal`). No panic; a list accepted holds at most `keys::MAX_LISTED`
/// keys, each written back reads back the same; a key file accepted signs what its public key
/// verifies.
pub fn hub_keys(data: &[u8]) {
    let text = text(data);
    if let Ok(list) = KeyList::parse(text) {
        assert!(list.len() <= keys::MAX_LISTED);
        for k in list.iter() {
            assert_eq!(PublicKey::parse(&k.to_string()), Ok(*k));
        }
    }
    if let Ok(k) = PublicKey::parse(text) {
        assert_eq!(k.to_string(), text);
    }
    if let Ok(sig) = keys::read_signature(text) {
        assert_eq!(keys::signature_text(&sig), text);
        let _ = test_study_key().public().verifies(b"concur", &sig);
    }
    let _ = sign::check_epoch(text);
    // A sealing key from a heartbeat, and a sealed share's blob as the agent opens it.
    if let Ok(k) = SealKey::parse(text) {
        assert_eq!(k.to_string(), text);
    }
    let ad = crate::hub::seal::share_ad(TEST_AGENT, TEST_EPOCH, TEST_RUN, 0);
    let _ = test_agent_open_key().open(&ad, text);
    if let Ok(key) = SigningKey::from_pem(text) {
        let sig = keys::read_signature(&key.sign(b"concur"))
            .unwrap_or_else(|e| panic!("a signature of ours: {e}"));
        assert!(key.public().verifies(b"concur", &sig));
    }
}

/// A character a terminal would act on.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// A latency histogram from another host (`measure::latency::LatencyRecorder::from_wire`):
/// the input is a `LatencyWire` (JSON) when it parses as one, else its bytes are the
/// histogram's (base64-encoded into `hdr_v2`, with exact figures taken from its first
/// bytes). No panic and no allocation the input's size does not justify (libFuzzer's
/// `-rss_limit_mb`, tests/fuzz_corpora.rs's peak RSS); an accepted histogram holds `count`
/// values, and written back (`to_wire`) reads back to the same histogram.
pub fn histogram(data: &[u8]) {
    let wire = match serde_json::from_slice::<LatencyWire>(data) {
        Ok(w) => w,
        Err(_) => {
            let n = |i: usize| u64::from(data.get(i).copied().unwrap_or(1).max(1));
            let (count, v) = (n(0), n(1));
            let exact = serde_json::json!({
                "hdr_v2": base64::engine::general_purpose::STANDARD.encode(data),
                "count": count, "min_us": v, "max_us": v, "sum_us": count * v
            });
            match serde_json::from_value::<LatencyWire>(exact) {
                Ok(w) => w,
                Err(e) => panic!("a wire histogram of {} bytes: {e}", data.len()),
            }
        }
    };
    let Ok(rec) = LatencyRecorder::from_wire(&wire) else {
        return;
    };
    assert_eq!(rec.histogram().len(), wire.exact.count, "{wire:?}");
    let back = rec
        .to_wire()
        .unwrap_or_else(|| panic!("an accepted histogram writes nothing: {wire:?}"));
    let again = LatencyRecorder::from_wire(&back)
        .unwrap_or_else(|e| panic!("{back:?}, written back, is refused: {e}"));
    assert_eq!(again.histogram(), rec.histogram(), "{wire:?}");
    let _ = rec.summary();
}

/// An external program's stdout (`--peer`, the classic programs) as the runner reads it: the
/// last `CONCUR {json}` line (`supervise::last_concur_line`), judged and made into the run line
/// of a 4-task external cell that exited 0 (`convert::classify_external`,
/// `convert::convert_external`). No panic; the line found is the input's last line that starts
/// with `CONCUR `; the run accounts for every task of the cell (`tasks_ok + tasks_failed`), an
/// ok run failed none; an ok run's wall is the line's `wall_s` when it has one; the run line
/// reads back (`concur report`) as written.
pub fn concur_line(data: &[u8]) {
    use crate::measure::rusage::ChildUsage;
    use crate::runner::supervise::{last_concur_line, CONCUR_PREFIX};
    let found = last_concur_line(data);
    let last = data
        .split(|&b| b == b'\n')
        .rfind(|l| l.starts_with(CONCUR_PREFIX.as_bytes()))
        .map(|l| {
            String::from_utf8_lossy(&l[CONCUR_PREFIX.len()..])
                .trim()
                .to_string()
        });
    assert_eq!(found, last, "the last CONCUR line of {data:?}");
    let (plan, cell) = peer_cell();
    let ended = Ended {
        waited: Ok(ChildUsage {
            exit_code: Some(0),
            signal: None,
            user_s: 0.25,
            sys_s: 0.05,
            max_rss_kib: 4096,
            ctx_voluntary: 3,
            ctx_involuntary: 1,
        }),
        killed_for: None,
        wall_s: 1.0,
        pss: crate::measure::memory::TreePss::peak(Some(4096)),
        report: None,
        concur_line: found.clone(),
        stderr_tail: Vec::new(),
    };
    let verdict = convert::classify_external(&ended, plan.timeout);
    let run = convert::convert_external(cell, 0, ended, verdict);
    let tasks = cell.key.tasks;
    assert_eq!(
        run.tasks_ok + run.tasks_failed,
        tasks,
        "{found:?}: {} ok and {} failed of {tasks} tasks",
        run.tasks_ok,
        run.tasks_failed
    );
    if run.status == RunStatus::Ok {
        assert_eq!(run.tasks_failed, 0, "{found:?}");
        let said = found
            .as_deref()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .and_then(|v| v.get("wall_s").and_then(serde_json::Value::as_f64));
        if let Some(wall) = said {
            assert_eq!(run.wall_s, wall, "{found:?}");
        }
    }
    assert!(run.wall_s.is_finite() && run.wall_s >= 0.0, "{found:?}");
    let line = Line::Run(run);
    let text = serde_json::to_string(&line)
        .unwrap_or_else(|e| panic!("{found:?}: the run line does not serialise: {e}"));
    match crate::analysis::results::parse_line(text.as_bytes()) {
        Ok(Some(again)) => assert_eq!(again, line, "{text}"),
        other => panic!("{found:?}: concur report reads {text} as {other:?}"),
    }
}

/// The plan a `CONCUR` line is read in (`fib:5` under `seq`, 4 tasks, and the external cell
/// `prog=true` beside it) and its external cell.
fn peer_cell() -> &'static (Plan, CellPlan) {
    static CELLS: OnceLock<(Plan, CellPlan)> = OnceLock::new();
    CELLS.get_or_init(|| {
        let opts = StudyOptions {
            workloads: vec!["fib:5".into()],
            models: vec!["seq".into()],
            tasks: vec![4],
            repeat: crate::plan::options::RepeatArg { repeat: Some(1) },
            warmup: Some(0),
            timeout: Duration::from_secs(30),
            peers: crate::plan::options::PeerOptions {
                peers: vec!["prog=true".into()],
                ..Default::default()
            },
            ..StudyOptions::default()
        };
        let plan =
            plan::build(&opts).unwrap_or_else(|e| panic!("the concur_line target's plan: {e}"));
        let cell = plan
            .cells
            .iter()
            .find(|c| matches!(c.kind, plan::CellKind::External { .. }))
            .unwrap_or_else(|| panic!("no external cell in {:?}", plan.cells))
            .clone();
        (plan, cell)
    })
}

/// A queue or hub URL (`--jobs-backend`, `CONCUR_JOBS_BACKEND`: `BackendUrl`;
/// `--hub`, `CONCUR_HUB`: `HubUrl::parse`), and everything shown of it: its `Display`, the
/// clear-text password warning, the one-line refusal. No panic; an accepted URL's full text
/// (`expose`, what a child process gets) parses back to the same URL. The password as the
/// Redis client would send it (the URL's, percent-decoded) is shown nowhere: when it is written
/// once in the input, nothing shown of the input holds it unless the same text with the
/// password replaced by as many `Q`s shows it too (then it is words of the message itself).
pub fn backend_url(data: &[u8]) {
    use crate::hub::HubUrl;
    use crate::jobs::BackendUrl;
    let s = text(data);
    let shown = |s: &str| -> Vec<String> {
        let mut out = Vec::new();
        match s.parse::<BackendUrl>() {
            Ok(b) => {
                let again: BackendUrl = b
                    .expose()
                    .parse()
                    .unwrap_or_else(|e| panic!("{s:?}: its full text is refused: {e}"));
                assert_eq!(again, b, "{s:?}");
                out.push(b.to_string());
                out.push(format!("{b:?}"));
                out.extend(b.cleartext_password_warning("--jobs-backend"));
            }
            Err(e) => out.push(e.to_string()),
        }
        match HubUrl::parse(s) {
            Ok(h) => {
                assert_eq!(HubUrl::parse(h.expose()).ok().as_ref(), Some(&h), "{s:?}");
                out.push(h.to_string());
                out.push(format!("{h:?}"));
                out.push(h.scrub(&format!("the hub {} failed: {}", h, h.expose())));
            }
            Err(e) => out.push(e.to_string()),
        }
        out
    };
    let texts = shown(s);
    // Only a Redis URL has a password that is sent; `sqlite://a:b@c` is a file's name.
    if !(s.starts_with("redis://") || s.starts_with("rediss://")) {
        return;
    }
    let Some(password) = url::Url::parse(s)
        .ok()
        .and_then(|u| u.password().map(str::to_string))
    else {
        return;
    };
    let decoded = percent_decode(&password);
    // Looked for after the scheme: `rediss://:s\n\ns@host` has the password `ss` (the URL
    // parser drops newlines), which only the scheme's `rediss` holds as written.
    let after_scheme = s.find("://").map_or(0, |i| i + 3);
    let rest = &s[after_scheme..];
    if decoded.is_empty() || decoded.contains('*') || !written_once(rest, &password) {
        return;
    }
    // Where the password is written (as typed, escapes and all): not where its decoded text
    // happens to occur (`redis://u@:%40s@ss` decodes to `@s`, which the host's `@ss` holds).
    let Some(at) = rest.find(&password).map(|i| after_scheme + i) else {
        return;
    };
    // The reference hides the password's letters and digits only, escaped ones too: its
    // blanks, controls and punctuation stay, so that it is refused (or not) for the same
    // reason, in the same words (a password " a" is in "… a URL holds no blanks …" either way).
    let q = hide_alphanumerics(&password);
    let reference = shown(&format!("{}{q}{}", &s[..at], &s[at + password.len()..]));
    for (t, r) in texts
        .iter()
        .zip(reference.iter().chain(std::iter::repeat(&String::new())))
    {
        assert!(
            !t.contains(&decoded) || r.contains(&decoded),
            "{s:?}: the password {decoded:?} is shown: {t}"
        );
    }
}

/// A URL's password as written, its letters and digits (written or `%XX`-escaped) made `Q`,
/// every other character and escape kept.
fn hide_alphanumerics(written: &str) -> String {
    let mut out = String::with_capacity(written.len());
    let mut rest = written;
    while let Some(c) = rest.chars().next() {
        let escape = rest
            .get(..3)
            .filter(|e| e.starts_with('%'))
            .and_then(|e| u8::from_str_radix(&e[1..], 16).ok());
        match escape {
            Some(b) if (b as char).is_ascii_alphanumeric() => {
                out.push('Q');
                rest = &rest[3..];
            }
            Some(_) => {
                out.push_str(&rest[..3]);
                rest = &rest[3..];
            }
            None => {
                out.push(if c.is_alphanumeric() { 'Q' } else { c });
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// Whether `needle` (not empty) occurs in `hay` exactly once, overlaps counted.
fn written_once(hay: &str, needle: &str) -> bool {
    let Some(at) = hay.find(needle) else {
        return false;
    };
    let next = at + needle.chars().next().map_or(1, char::len_utf8);
    !hay[next..].contains(needle)
}

/// `s` with its `%XX` escapes decoded (as the Redis client reads a URL's password), invalid
/// UTF-8 replaced.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `-H 'Name: value'` line as the plan checks it (`workload::http::check_header`) and as
/// every client then sends it: no panic; an accepted header goes into task 0's request
/// (`Workload::http_request`), whose head as the green client writes it parses (httparse) to
/// exactly the request's headers, the `-H` header once among them with its value filled in
/// (no header split off it, nothing cut), each value one hyper can send over HTTP/2; and the
/// line as shown (`secret::mask_credentials`) does not hold a credential header's value (past
/// `Authorization`'s scheme) when the line holds it once.
pub fn header(data: &[u8]) {
    use crate::workload::{http::check_header, parse, WorkloadOptions};
    let line = text(data);
    let Ok((name, value)) = check_header(line) else {
        return;
    };
    let opts = WorkloadOptions {
        headers: vec![(name.clone(), value.clone())],
        ..WorkloadOptions::default()
    };
    let w = parse("http:http://127.0.0.1:9/fuzz?{rand}", &opts)
        .unwrap_or_else(|e| panic!("{line:?}: the workload is refused: {e}"));
    let req = w
        .http()
        .and_then(|h| h.http_request(0))
        .unwrap_or_else(|| panic!("{line:?}: an http workload makes no request"));
    let head = request_head(&req);
    let mut parsed = [httparse::EMPTY_HEADER; 16];
    let mut r = httparse::Request::new(&mut parsed);
    match r.parse(&head) {
        Ok(httparse::Status::Complete(n)) => assert_eq!(n, head.len(), "{line:?}: {head:?}"),
        other => panic!("{line:?}: the head {head:?} parses as {other:?}"),
    }
    let got: Vec<(String, Vec<u8>)> = r
        .headers
        .iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect();
    let sent: Vec<(String, Vec<u8>)> = req
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(got, sent, "{line:?}: {head:?}");
    let ours: Vec<&(String, String)> = req
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(&name))
        .collect();
    assert_eq!(ours.len(), 1, "{line:?}: {:?}", req.headers);
    let filled = ours[0].1.as_str();
    if !value.contains(crate::workload::http::RAND) && !value.contains(crate::workload::http::INDEX)
    {
        assert_eq!(filled, value, "{line:?}");
    }
    for (n, v) in &req.clone().into_http2().headers {
        assert!(
            hyper::header::HeaderValue::from_str(v).is_ok(),
            "{line:?}: {n}: {v:?} cannot be sent"
        );
    }
    if crate::base::secret::is_credential_header(&name) {
        let auth = name.eq_ignore_ascii_case("authorization")
            || name.eq_ignore_ascii_case("proxy-authorization");
        let secret = match value.split_once([' ', '\t']) {
            Some((_, creds)) if auth && !creds.trim().is_empty() => creds.trim(),
            _ => value.as_str(),
        };
        if !secret.is_empty() && !secret.contains('*') && written_once(line, secret) {
            let masked = crate::base::secret::mask_credentials(line);
            assert!(
                !masked.contains(secret),
                "{line:?} shows as {masked:?}, its credential {secret:?} in it"
            );
        }
    }
}
