//! `curl:W`: libcurl's multi interface with at most W transfers at once, the engine of
//! tornado's curl client. One thread drives every transfer; finished easy handles are reused
//! for the next URL, so their connections are kept alive (unless `--no-keepalive`).
//!
//! libcurl is built here with its rustls backend (rustls-ffi), so it needs no system TLS
//! library. It verifies against the system's CA bundle (the file rustls-native-certs also
//! reads), plus `--cacert` through one file written for the run; or, when `--cacert` holds a
//! server certificate marked as a CA, which that backend cannot accept, concur's own verifier
//! checks each new connection before its request ([`PeerCheck`]).
//!
//! Connects that fail while the server is known to be there (it has answered in this run)
//! are retried after a short, growing pause until the request timeout: a client that opens
//! connections faster than the server accepts them must pace itself, and such a request is
//! not a failure of the server. Measured here (W = 2,000 against `concur serve`, whose
//! backlog `net.core.somaxconn` caps at 4,096): about half the connects failed after
//! 180–400 ms with no socket error (libcurl's "peer closed"), none with ECONNREFUSED. So a
//! connect refused (ECONNREFUSED) before the server ever answered is final: a closed port
//! still fails at once.
//!
//! With `--http2` the W transfers are streams over at most C connections (`--connections`,
//! default 1): h2c by prior knowledge over `http://`, h2 by ALPN over `https://` (a server that
//! offers only HTTP/1.1 gets 1.1, still over at most C connections), multiplexing on, and each
//! transfer waits for a connection it can share (CURLOPT_PIPEWAIT) instead of opening its own.
//! libcurl caps the streams on one connection at CURLMOPT_MAX_CONCURRENT_STREAMS (100 unless
//! set): here it is ceil(W / C), so the W transfers spread over the C connections, and the
//! server's own SETTINGS_MAX_CONCURRENT_STREAMS still caps it, once it has arrived: a first
//! flight over it gets streams refused, and libcurl retries each on a fresh connection (at
//! most 5 times; docs/models.md). Without `--http2` every transfer asks for HTTP/1.1:
//! libcurl, built with nghttp2, would otherwise offer h2 by ALPN over TLS.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_long, c_void, CStr};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use curl::easy::{Easy2, Handler, HttpVersion, List, WriteError};
use curl::multi::{Easy2Handle, Multi};

use super::curl_shards::Shards;
use super::{Entry, Model, ModelOutcome, RunCtx};
use crate::measure::conn::{self, ConnSample};
use crate::measure::{mono_ns, TaskError, TaskRecord};
use crate::os::tls;
use crate::workload::{HttpRequest, Workload};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

pub(super) const ENTRY: Entry = Entry {
    name: "curl",
    takes_workers: true,
    help:
        "libcurl multi with at most W transfers at once (tornado's curl client's engine; http only)",
    build: |w| {
        Box::new(CurlMulti {
            workers: w.unwrap_or(1),
        })
    },
};

/// libcurl multi.
pub struct CurlMulti {
    workers: usize,
}

/// Counts body bytes as they arrive; holds the handle's [`PeerCheck`] while one is set.
#[derive(Default)]
struct Counter {
    bytes: u64,
    peer: Option<Rc<PeerCheck>>,
    /// The method, headers and body the handle is set up for (plain HTTP only), so that the
    /// next request of the same shape changes only its URL.
    shape: Option<Shape>,
}

/// What a request sets on a handle besides its URL.
type Shape = (String, Vec<(String, String)>, Option<bytes::Bytes>);

impl Handler for Counter {
    fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        self.bytes += data.len() as u64;
        Ok(data.len())
    }
}

fn curl_kind(e: &curl::Error) -> &'static str {
    if e.is_couldnt_connect() || e.is_couldnt_resolve_host() {
        "connect"
    } else if e.is_operation_timedout() {
        "timeout"
    } else if e.is_ssl_connect_error()
        || e.is_peer_failed_verification()
        || e.is_ssl_cacert()
        || e.is_ssl_cacert_badfile()
        || e.is_ssl_certproblem()
    {
        crate::os::tls::KIND
    } else {
        "read"
    }
}

struct Slot {
    handle: Easy2Handle<Counter>,
    /// The multi handle it was added to ([`Shards`]).
    shard: usize,
    index: usize,
    /// When the task first started (a retried connect keeps it: its latency is the whole wait).
    start_ns: u64,
    /// Connect attempts so far.
    attempts: u32,
    https: bool,
    /// When this attempt was handed to libcurl (before `curl_multi_add_handle`), on concur's
    /// clock: its own times (pretransfer, total) count from a moment at or after it.
    added_ns: u64,
}

/// A task whose connect failed at once, waiting to try again.
struct Retry {
    index: usize,
    start_ns: u64,
    attempts: u32,
    due_ns: u64,
}

/// How a run's transfers verify the server.
enum Trust {
    /// libcurl verifies, against its CA file: the run's [`CaFile`], or the system's bundle
    /// (found once per run: finding it probes a dozen paths).
    Libcurl(Option<CaFile>, Option<PathBuf>),
    /// libcurl verifies nothing and [`PeerCheck`] verifies each new connection.
    Concur(Arc<tls::Verifier>),
}

impl Trust {
    /// The run's trust: [`Trust::Concur`] only when `--cacert` holds a certificate that could
    /// be a server's own marked as a CA (`tls::Verifier::has_ca_marked_server_certificate`),
    /// the one case libcurl's rustls backend gets wrong; otherwise libcurl's own verification,
    /// whose cost is part of the handshake it times.
    fn for_run(ca_pem: Option<&str>, insecure: bool) -> Result<Trust, String> {
        let Some(pem) = ca_pem.filter(|_| !insecure) else {
            return Ok(Trust::Libcurl(None, tls::system_ca_file()));
        };
        let verifier = tls::Verifier::new(Some(pem))?;
        if verifier.has_ca_marked_server_certificate() {
            Ok(Trust::Concur(Arc::new(verifier)))
        } else {
            CaFile::write(pem).map(|f| Trust::Libcurl(Some(f), None))
        }
    }
}

/// The CA file of a run with `--cacert`: the system's bundle and the extra certificates, in
/// one file libcurl reads (its rustls backend takes one file or one blob, and a blob is copied
/// into every easy handle). Removed when the run ends.
struct CaFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl CaFile {
    fn write(extra: &str) -> Result<CaFile, String> {
        let system = crate::os::tls::system_ca_file()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let dir = crate::os::files::private_temp_dir("ca")
            .map_err(|e| format!("cannot make a folder for the CA file: {e}"))?;
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, format!("{system}\n{extra}\n"))
            .map_err(|e| format!("cannot write the CA file {}: {e}", path.display()))?;
        Ok(CaFile { path, _dir: dir })
    }
}

/// How every transfer of a run connects, from the run's options.
struct Connection<'a> {
    timeout: Duration,
    keepalive: bool,
    /// `--http2`: h2c by prior knowledge, h2 by ALPN over TLS, waiting to share a connection.
    http2: bool,
    insecure: bool,
    /// Who verifies the server's certificate (libcurl with the run's CA file, or concur).
    trust: &'a Trust,
}

/// concur's verification of a connection that libcurl opened without verifying it, done after
/// the handshake and before the request is sent (CURLOPT_PREREQFUNCTION, libcurl ≥ 7.80).
/// Used when `--cacert` holds a server certificate marked as a CA: libcurl's rustls backend
/// refuses it even when the server presents exactly it ("unknown certificate error"), has no
/// pinning (its `Curl_ssl_rustls` lacks SSLSUPP_PINNEDPUBKEY, so CURLOPT_PINNEDPUBLICKEY is
/// refused) and no verifier hook but "verify nothing". The chain comes from CURLOPT_CERTINFO,
/// which that backend fills when the handshake completes; rustls still checks the handshake's
/// signature, so the server holds the key of the certificate checked here.
struct PeerCheck {
    verifier: Arc<tls::Verifier>,
    /// The easy handle whose transfers this checks (for its certificate information).
    handle: *mut curl_sys::CURL,
    name: ServerName<'static>,
    /// Why the check refused the server, for the task's error.
    refused: Cell<Option<String>>,
}

/// Not in curl-sys: CURLOPT_PREREQFUNCTION and CURLOPT_PREREQDATA (curl.h, 8.x).
const CURLOPT_PREREQFUNCTION: curl_sys::CURLoption = curl_sys::CURLOPTTYPE_FUNCTIONPOINT + 312;
const CURLOPT_PREREQDATA: curl_sys::CURLoption = curl_sys::CURLOPTTYPE_OBJECTPOINT + 313;
/// The callback's return values (curl.h).
const CURL_PREREQFUNC_OK: c_int = 0;
const CURL_PREREQFUNC_ABORT: c_int = 1;

type PrereqFn = extern "C" fn(*mut c_void, *mut c_char, *mut c_char, c_int, c_int) -> c_int;

impl PeerCheck {
    /// Turns libcurl's verification off on `easy` and this check on, for `url`.
    fn install(
        easy: &mut Easy2<Counter>,
        verifier: &Arc<tls::Verifier>,
        url: &str,
    ) -> Result<(), curl::Error> {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        // A host TLS cannot name: leave libcurl's own verification on (it refuses).
        let Ok(name) = tls::server_name(&host) else {
            return Ok(());
        };
        // Rc: the handle and its callback live on this one thread.
        let check = Rc::new(PeerCheck {
            verifier: verifier.clone(),
            handle: easy.raw(),
            name,
            refused: Cell::new(None),
        });
        easy.ssl_verify_peer(false)?;
        easy.ssl_verify_host(false)?;
        easy.certinfo(true)?;
        let callback: PrereqFn = prereq;
        // Safety: both options take what is passed (a function of curl's prototype, a pointer
        // it hands back); the pointer stays valid while the options are set, as the handle's
        // Counter holds the Rc until the next configure(), whose reset() unsets them.
        let set = unsafe {
            [
                curl_sys::curl_easy_setopt(easy.raw(), CURLOPT_PREREQFUNCTION, callback),
                curl_sys::curl_easy_setopt(
                    easy.raw(),
                    CURLOPT_PREREQDATA,
                    Rc::as_ptr(&check) as *mut c_void,
                ),
            ]
        };
        if let Some(&code) = set.iter().find(|&&c| c != curl_sys::CURLE_OK) {
            return Err(curl::Error::new(code));
        }
        easy.get_mut().peer = Some(check);
        Ok(())
    }

    /// Checks the connection the transfer is about to use.
    fn verify(&self) -> Result<(), String> {
        let mut connects: c_long = 0;
        let mut info: *mut curl_sys::curl_certinfo = std::ptr::null_mut();
        // Safety: `handle` is the easy handle whose callback runs now (getinfo is allowed in
        // callbacks); each call writes one value of the type its CURLINFO names.
        let codes = unsafe {
            [
                curl_sys::curl_easy_getinfo(
                    self.handle,
                    curl_sys::CURLINFO_NUM_CONNECTS,
                    &mut connects,
                ),
                curl_sys::curl_easy_getinfo(self.handle, curl_sys::CURLINFO_CERTINFO, &mut info),
            ]
        };
        if codes.iter().any(|&c| c != curl_sys::CURLE_OK) {
            return Err("libcurl gave no certificate information to verify".into());
        }
        let chain = certinfo_chain(info)?;
        let Some((end_entity, intermediates)) = chain.split_first() else {
            // No handshake in this transfer: a kept connection, checked when it was opened (a
            // refused one is closed with its aborted transfer).
            return if connects == 0 {
                Ok(())
            } else {
                Err("libcurl gave no certificate for a new connection".into())
            };
        };
        self.verifier
            .check(end_entity, intermediates, &self.name, UnixTime::now())
    }
}

/// The certificates of CURLINFO_CERTINFO (its `Cert:` PEM entries), server's first.
fn certinfo_chain(
    info: *const curl_sys::curl_certinfo,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut chain = Vec::new();
    if info.is_null() {
        return Ok(chain);
    }
    // Safety: libcurl's certinfo: `num_of_certs` lists of NUL-terminated strings, valid until
    // the transfer's next getinfo reset (after this callback).
    unsafe {
        for i in 0..usize::try_from((*info).num_of_certs).unwrap_or(0) {
            let mut item = *(*info).certinfo.add(i);
            while !item.is_null() {
                let text = CStr::from_ptr((*item).data).to_bytes();
                if let Some(pem) = text.strip_prefix(b"Cert:") {
                    chain.push(CertificateDer::from_pem_slice(pem).map_err(|e| {
                        format!("libcurl gave a server certificate that is not PEM: {e}")
                    })?);
                }
                item = (*item).next;
            }
        }
    }
    Ok(chain)
}

/// CURLOPT_PREREQFUNCTION: lets the request go only if [`PeerCheck::verify`] accepts.
extern "C" fn prereq(
    data: *mut c_void,
    _remote_ip: *mut c_char,
    _local_ip: *mut c_char,
    _remote_port: c_int,
    _local_port: c_int,
) -> c_int {
    // Safety: `data` is the PeerCheck that install() set with this callback, still alive.
    let check = unsafe { &*(data as *const PeerCheck) };
    // A panic must not unwind into libcurl.
    let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check.verify()))
        .unwrap_or_else(|_| Err("the certificate check failed unexpectedly".into()));
    match verdict {
        Ok(()) => CURL_PREREQFUNC_OK,
        Err(words) => {
            check.refused.set(Some(words));
            CURL_PREREQFUNC_ABORT
        }
    }
}

/// The error of a failed transfer: [`PeerCheck`]'s words when it refused the server, the words
/// for a certificate libcurl refused, or libcurl's own message.
fn transfer_error(easy: &Easy2<Counter>, e: &curl::Error, url: Option<&str>) -> TaskError {
    let refused = easy.get_ref().peer.as_ref().and_then(|p| p.refused.take());
    if let Some(words) = refused {
        return TaskError::new(tls::KIND, words);
    }
    let errno = easy.os_errno().ok();
    let status = easy.response_code().unwrap_or(0);
    let connect = super::curl_connect::connect_failed(e, errno, status);
    let kind = if connect { "connect" } else { curl_kind(e) };
    let message = match errno {
        // A socket concur connected for libcurl: its connect's error came with the first send.
        Some(n) if connect && !e.is_couldnt_connect() => format!(
            "Could not connect to server: {}",
            std::io::Error::from_raw_os_error(n)
        ),
        _ => e.to_string(),
    };
    let host = url
        .and_then(|u| url::Url::parse(u).ok())
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    match tls::libcurl_refusal_words(&message, &host).filter(|_| kind == tls::KIND) {
        Some(words) => TaskError::new(kind, words),
        None => TaskError::new(kind, message),
    }
}

/// The first retry's pause; each further one doubles it up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(5);
/// The longest pause between connect attempts.
const RETRY_MAX: Duration = Duration::from_millis(200);

impl CurlMulti {
    /// Sets `easy` up for `req` from a clean state (options of the previous request gone, its
    /// connection kept). libcurl sends the builder's headers as they are: a header given
    /// replaces libcurl's own of that name (`Host`, `Accept`, `Content-Length`), and the two
    /// it would add besides (`Content-Type` for a body, `Expect: 100-continue` for one over
    /// 1 KiB) are switched off unless the request has them.
    fn configure(
        easy: &mut Easy2<Counter>,
        req: &HttpRequest,
        conn: &Connection<'_>,
    ) -> Result<(), curl::Error> {
        // The same request but its URL, over plain HTTP (no certificate check tied to the
        // URL): the handle keeps every option, so only the URL changes. Resetting the handle
        // and setting each option again cost about a tenth of `curl:100`'s CPU at delay 0.
        let plain = !req.url.starts_with("https:");
        let counter = easy.get_mut();
        counter.bytes = 0;
        if plain
            && counter
                .shape
                .as_ref()
                .is_some_and(|(method, headers, body)| {
                    *method == req.method && *headers == req.headers && *body == req.body
                })
        {
            return easy.url(&req.url);
        }
        counter.shape = None;
        easy.reset();
        easy.get_mut().peer = None;
        // A libcurl built to wait with select() (concur as another crate's dependency)
        // connects here what it cannot watch itself.
        super::curl_connect::install(easy)?;
        easy.url(&req.url)?;
        // No proxy from the environment (`http_proxy`, `ALL_PROXY`): libcurl would honour it
        // unasked, while every other client goes straight to the URL the user gave.
        easy.proxy("")?;
        easy.timeout(conn.timeout)?;
        if req.is_head() {
            easy.nobody(true)?;
        } else if req.method != "GET" || req.body.is_some() {
            // Also for a POST: `CURLOPT_POST` without a body would send one, chunked.
            easy.custom_request(&req.method)?;
        }
        if let Some(body) = &req.body {
            easy.post_fields_copy(body)?;
        }
        let mut list = List::new();
        for (name, value) in &req.headers {
            list.append(&format!("{name}: {value}"))?;
        }
        for own in ["Content-Type", "Expect"] {
            if !req.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(own)) {
                list.append(&format!("{own}:"))?;
            }
        }
        easy.http_headers(list)?;
        if !conn.keepalive {
            easy.forbid_reuse(true)?;
            easy.fresh_connect(true)?;
        }
        if !conn.http2 {
            easy.http_version(HttpVersion::V11)?;
        } else if req.url.starts_with("https:") {
            easy.http_version(HttpVersion::V2TLS)?;
            easy.pipewait(true)?;
        } else {
            easy.http_version(HttpVersion::V2PriorKnowledge)?;
            easy.pipewait(true)?;
        }
        // Plain HTTP sets no TLS option at all: each is copied into the handle per transfer.
        let https = req.url.starts_with("https:");
        match conn.trust {
            _ if !https => {}
            _ if conn.insecure => {
                easy.ssl_verify_peer(false)?;
                easy.ssl_verify_host(false)?;
            }
            Trust::Concur(verifier) => {
                PeerCheck::install(easy, verifier, &req.url)?;
            }
            Trust::Libcurl(ca, system) => {
                if let Some(ca) = ca.as_ref().map(|f| &f.path).or(system.as_ref()) {
                    easy.cainfo(ca)?;
                }
            }
        }
        if plain {
            easy.get_mut().shape =
                Some((req.method.clone(), req.headers.clone(), req.body.clone()));
        }
        Ok(())
    }

    /// Sets `easy` up for task `index` with `configure` and adds it to `multi`.
    fn start(
        multi: &Multi,
        shard: usize,
        mut easy: Easy2<Counter>,
        (index, start_ns, attempts): (usize, u64, u32),
        https: bool,
        configure: impl FnOnce(&mut Easy2<Counter>) -> Result<(), curl::Error>,
    ) -> Result<Slot, (TaskError, Easy2<Counter>)> {
        if let Err(e) = configure(&mut easy) {
            return Err((TaskError::new("request", e.to_string()), easy));
        }
        let added_ns = mono_ns();
        let handle = match multi.add2(easy) {
            Ok(h) => h,
            Err(e) => {
                return Err((
                    TaskError::new("request", e.to_string()),
                    Easy2::new(Counter::default()),
                ))
            }
        };
        Ok(Slot {
            handle,
            shard,
            index,
            start_ns,
            attempts,
            https,
            added_ns,
        })
    }
}

/// What a finished transfer's connection was, from libcurl's own timers.
fn conn_sample(easy: &Easy2<Counter>, https: bool) -> ConnSample {
    let opened = easy.num_connects().unwrap_or(0) > 0;
    if !opened {
        return ConnSample::default();
    }
    let us = |d: Duration| d.as_micros() as u64;
    let lookup = easy.namelookup_time().unwrap_or_default();
    let connect = easy.connect_time().unwrap_or_default();
    let app = easy.appconnect_time().unwrap_or_default();
    ConnSample {
        opened,
        connect_us: Some(us(connect.saturating_sub(lookup))),
        tls_us: (https && app > connect).then(|| us(app - connect)),
    }
}

/// A traced transfer's phases from libcurl's own timers, which it keeps for every transfer:
/// connect (after the name lookup) and TLS on a new connection, the wait from the moment the
/// transfer was ready to send (pretransfer) to the first byte, and the read to the end.
/// libcurl counts them from its own start of the transfer; they are placed so that the read
/// ends where concur saw the transfer end.
fn record_phases(easy: &Easy2<Counter>, task: &crate::measure::phases::TaskPhases, end_ns: u64) {
    use crate::measure::phases::PhaseKind;
    let ns = |d: Result<Duration, curl::Error>| d.map_or(0, |d| d.as_nanos() as u64);
    let total = ns(easy.total_time());
    let base = end_ns.saturating_sub(total);
    let at = |t: u64| base + t.min(total);
    if easy.num_connects().unwrap_or(0) > 0 {
        let (lookup, connect) = (ns(easy.namelookup_time()), ns(easy.connect_time()));
        let app = ns(easy.appconnect_time());
        task.record(PhaseKind::Connect, at(lookup), at(connect.max(lookup)));
        if app > connect {
            task.record(PhaseKind::Tls, at(connect), at(app));
        }
    }
    let (ready, first) = (ns(easy.pretransfer_time()), ns(easy.starttransfer_time()));
    if first > 0 {
        task.record(PhaseKind::Wait, at(ready), at(first.max(ready)));
        task.record(PhaseKind::Read, at(first), at(total));
    }
}

/// Not in curl-sys: CURLINFO_HTTP_VERSION (7.50) and CURLINFO_CONN_ID (8.2) (curl.h).
const CURLINFO_HTTP_VERSION: curl_sys::CURLINFO = curl_sys::CURLINFO_LONG + 46;
const CURLINFO_OFF_T: curl_sys::CURLINFO = 0x600000;
const CURLINFO_CONN_ID: curl_sys::CURLINFO = CURLINFO_OFF_T + 64;

/// The HTTP version a finished transfer used (none when it sent no request).
fn http_version(easy: &Easy2<Counter>) -> Option<conn::HttpVersion> {
    let mut v: c_long = 0;
    // Safety: CURLINFO_HTTP_VERSION writes one long.
    let code = unsafe { curl_sys::curl_easy_getinfo(easy.raw(), CURLINFO_HTTP_VERSION, &mut v) };
    match (code, c_int::try_from(v).unwrap_or(0)) {
        (curl_sys::CURLE_OK, curl_sys::CURL_HTTP_VERSION_1_1) => Some(conn::HttpVersion::Http1),
        (curl_sys::CURLE_OK, curl_sys::CURL_HTTP_VERSION_2_0) => Some(conn::HttpVersion::Http2),
        _ => None,
    }
}

/// libcurl's id of the connection a finished transfer used (none when it had none).
fn conn_id(easy: &Easy2<Counter>) -> Option<i64> {
    let mut id: curl_sys::curl_off_t = -1;
    // Safety: CURLINFO_CONN_ID writes one curl_off_t.
    let code = unsafe { curl_sys::curl_easy_getinfo(easy.raw(), CURLINFO_CONN_ID, &mut id) };
    (code == curl_sys::CURLE_OK && id >= 0).then_some(id)
}

/// When each HTTP/2 stream was open on which connection, for the most open at once on one
/// connection. libcurl counts the streams of a connection but does not tell; each finished
/// transfer tells its connection (CURLINFO_CONN_ID) and when its stream was open on libcurl's
/// clock: from just before its request went out (CURLINFO_PRETRANSFER_TIME, which includes
/// any wait for the connection) to its end (CURLINFO_TOTAL_TIME), both counted from the
/// transfer's start inside libcurl. They are placed on concur's clock from the moment the
/// transfer was handed to libcurl, which is at or before that start: every span lands at or
/// before where it was, by that gap alone, and a transfer added after another was seen
/// finished opens after that one's span ends, so a handle reused for the next request never
/// shows as overlapping the one before it. (Anchored on when the end was seen instead, a
/// batch of finished transfers read late made streams overlap that never did.) 24 bytes per
/// stream, kept only with `--http2`.
#[derive(Default)]
struct Streams {
    spans: Vec<(i64, u64, u64)>,
}

impl Streams {
    /// Adds a finished transfer's stream, handed to libcurl at `added_ns`.
    fn add(&mut self, easy: &Easy2<Counter>, added_ns: u64) {
        let Some(id) = conn_id(easy) else { return };
        let (Ok(pre), Ok(total)) = (easy.pretransfer_time(), easy.total_time()) else {
            return;
        };
        let at = |d: Duration| added_ns + d.as_nanos() as u64;
        self.spans.push((id, at(pre), at(total.max(pre))));
    }

    /// The most streams open at once on one connection (none without a stream).
    fn peak(self) -> Option<u64> {
        // A close sorts before an open at the same instant: a stream that ends as another
        // begins does not overlap it.
        let mut events: Vec<(i64, u64, i8)> = self
            .spans
            .into_iter()
            .flat_map(|(id, open, close)| [(id, open, 1), (id, close, -1)])
            .collect();
        events.sort_unstable();
        let mut peak = None;
        let mut open = 0i64;
        let mut conn = None;
        for (id, _, delta) in events {
            if conn != Some(id) {
                conn = Some(id);
                open = 0;
            }
            open += i64::from(delta);
            peak = Some(peak.unwrap_or(0).max(open.max(0) as u64));
        }
        peak
    }
}

/// The multi handle's caps, as (connections, streams per connection): W connections over
/// HTTP/1.1 (one request each at a time); over HTTP/2, C connections carrying ceil(W / C)
/// streams each.
fn caps(workers: usize, http2: bool, connections: Option<usize>) -> (usize, Option<usize>) {
    if !http2 {
        return (workers, None);
    }
    let c = connections.unwrap_or(1).max(1);
    (c, Some(workers.div_ceil(c).max(1)))
}

impl Model for CurlMulti {
    fn spec(&self) -> String {
        format!("curl:{}", self.workers)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.workers)
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.workers.min(tasks)
    }
    fn check(&self, w: &dyn Workload, _gil: bool) -> Result<(), String> {
        if w.http().is_some() {
            Ok(())
        } else {
            Err("curl runs http workloads only".into())
        }
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        let fail = |e: String| ModelOutcome {
            error: Some(e),
            ..Default::default()
        };
        let options = &ctx.recipe.options;
        let trust = match Trust::for_run(options.ca_pem.as_deref(), options.insecure) {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        let conn = Connection {
            timeout: Duration::from_millis(options.request_timeout_ms.max(1)),
            keepalive: options.keepalive,
            http2: options.http2,
            insecure: options.insecure,
            trust: &trust,
        };
        let mut run = match Transfers::new(self.workers, ctx, &conn) {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
        // One thread releases and runs every transfer.
        let _releasing = ctx.arrivals.as_ref().map(|a| a.releasing());
        match run.drive() {
            Ok(()) => run.outcome(),
            Err(e) => fail(e),
        }
    }
}

/// One run's transfers: the handles free and in flight, the connects to retry, and the tasks
/// released and started so far. [`Transfers::drive`] loops over its phases: release what is
/// due, start a transfer on every free handle, take the finished ones, wait for sockets.
struct Transfers<'a> {
    ctx: &'a RunCtx,
    conn: &'a Connection<'a>,
    http: Option<&'a dyn crate::workload::HttpTasks>,
    /// The workload's requests differ only by their URL (see [`Transfers::start_one`]).
    only_url: bool,
    recorder: Option<&'a conn::ConnRecorder>,
    shards: Shards<Counter>,
    /// Transfers in flight in a slab: libcurl hands back each finished transfer's token (its
    /// index here), so a finished transfer is found in O(1), not by scanning all W.
    active: Vec<Option<Slot>>,
    vacant: Vec<usize>,
    live: usize,
    retries: VecDeque<Retry>,
    /// A response came: from then on a refused connect means an overloaded server, not an
    /// absent one.
    server_seen: bool,
    streams: Streams,
    records: Vec<TaskRecord>,
    /// The next task to start.
    next: usize,
    /// Open model: the tasks released so far (all of them in a closed run); a transfer is
    /// added for each released one as soon as a handle is free (at most W at once).
    due: usize,
    /// Open model: a timer at the next release that ends the wait for sockets, so responses
    /// are read while a release is awaited and the release is not late.
    release_timer: Option<super::arrivals::ReleaseTimer>,
}

impl<'a> Transfers<'a> {
    /// The run's multi handles and, for an open run, its release timer.
    fn new(
        workers: usize,
        ctx: &'a RunCtx,
        conn: &'a Connection<'a>,
    ) -> Result<Transfers<'a>, String> {
        let options = &ctx.recipe.options;
        let n = ctx.tasks;
        let (connections, stream_cap) = caps(workers, options.http2, options.connections);
        let handles = workers.min(n).max(1);
        let mut shards = Shards::new(handles, connections.min(handles), stream_cap, || {
            Easy2::new(Counter::default())
        })?;
        let mut release_timer = None;
        if ctx.arrivals.is_some() {
            let timer = super::arrivals::ReleaseTimer::new()
                .map_err(|e| format!("cannot create the release timer: {e}"))?;
            shards
                .wake_on(std::os::fd::AsRawFd::as_raw_fd(&timer))
                .map_err(|e| format!("cannot wait on the release timer: {e}"))?;
            release_timer = Some(timer);
        }
        let http = ctx.workload.http();
        Ok(Transfers {
            ctx,
            conn,
            http,
            only_url: http.is_some_and(|h| h.only_url_varies()),
            recorder: http.and_then(|h| h.connection_recorder()),
            shards,
            active: Vec::with_capacity(workers),
            vacant: Vec::new(),
            live: 0,
            retries: VecDeque::new(),
            server_seen: false,
            streams: Streams::default(),
            records: Vec::with_capacity(n),
            next: 0,
            due: if ctx.arrivals.is_some() { 0 } else { n },
            release_timer,
        })
    }

    /// The loop, until every task has ended.
    fn drive(&mut self) -> Result<(), String> {
        let n = self.ctx.tasks;
        loop {
            self.release_due();
            self.start_free()?;
            if self.live == 0 && self.retries.is_empty() {
                match &self.ctx.arrivals {
                    Some(a) if self.due < n => {
                        super::arrivals::sleep_until(a.release_ns(self.due));
                        continue;
                    }
                    _ => return Ok(()),
                }
            }
            // Transfers just added start on their handle's timer, due at once.
            self.shards
                .serve_timers()
                .map_err(|e| format!("libcurl multi failed: {e}"))?;
            // A transfer finished: start the next ones before waiting again.
            if self.take_finished()? > 0 {
                continue;
            }
            self.wait()?;
        }
    }

    /// Open model: counts the tasks whose release time has come.
    fn release_due(&mut self) {
        if let Some(a) = &self.ctx.arrivals {
            let now = mono_ns();
            while self.due < self.ctx.tasks && a.release_ns(self.due) <= now {
                a.released(self.due);
                self.due += 1;
            }
        }
    }

    /// Starts a transfer on every free handle: due retries first (they are the oldest
    /// tasks), then released tasks in order.
    fn start_free(&mut self) -> Result<(), String> {
        let now = mono_ns();
        while self.shards.has_free() {
            let task = match self.retries.front() {
                Some(r) if r.due_ns <= now => self
                    .retries
                    .pop_front()
                    .map(|r| (r.index, r.start_ns, r.attempts)),
                _ if self.next < self.due => {
                    crate::measure::live::started();
                    self.next += 1;
                    Some((self.next - 1, mono_ns(), 0))
                }
                _ => None,
            };
            let Some(task) = task else { break };
            let Some((shard, easy)) = self.shards.take_free() else {
                break;
            };
            match self.start_one(shard, easy, task)? {
                Ok(mut slot) => {
                    let id = self.vacant.pop().unwrap_or(self.active.len());
                    slot.handle
                        .set_token(id)
                        .map_err(|e| format!("libcurl multi failed: {e}"))?;
                    if id == self.active.len() {
                        self.active.push(Some(slot));
                    } else {
                        self.active[id] = Some(slot);
                    }
                    self.live += 1;
                }
                Err((e, easy)) => {
                    self.records.push(TaskRecord::not_started(task.0, e));
                    self.shards.put_free(shard, easy);
                }
            }
        }
        Ok(())
    }

    /// Sets a free handle up for `task` and adds it to its multi handle; the outer error ends
    /// the run (no URL), the inner one the task.
    #[allow(clippy::type_complexity)]
    fn start_one(
        &self,
        shard: usize,
        easy: Easy2<Counter>,
        task: (usize, u64, u32),
    ) -> Result<Result<Slot, (TaskError, Easy2<Counter>)>, String> {
        let no_url = || "the workload has no URL (curl runs http workloads only, with a server)";
        let Some(h) = self.http else {
            return Err(no_url().into());
        };
        let multi = self.shards.multi(shard);
        // A handle set up for this workload's plain-HTTP request before takes the next
        // task's by its URL alone: nothing else of the request differs between tasks, so
        // building and comparing the whole request again would be work for nothing.
        if self.only_url && easy.get_ref().shape.is_some() {
            let url = h.url(task.0).ok_or_else(no_url)?;
            return Ok(CurlMulti::start(multi, shard, easy, task, false, |easy| {
                easy.get_mut().bytes = 0;
                easy.url(&url)
            }));
        }
        let req = h.http_request(task.0).ok_or_else(no_url)?;
        let https = req.url.starts_with("https:");
        let conn = self.conn;
        Ok(CurlMulti::start(multi, shard, easy, task, https, |easy| {
            CurlMulti::configure(easy, &req, conn)
        }))
    }

    /// Takes every transfer libcurl says has finished; how many there were.
    fn take_finished(&mut self) -> Result<usize, String> {
        let mut done: Vec<(usize, Result<(), curl::Error>)> = Vec::new();
        let active = &self.active;
        self.shards.messages(|_, m| {
            let Ok(id) = m.token() else { return };
            if let Some(Some(slot)) = active.get(id) {
                if let Some(result) = m.result_for2(&slot.handle) {
                    done.push((id, result));
                }
            }
        });
        let finished = done.len();
        for (id, result) in done {
            self.finish(id, result)?;
        }
        Ok(finished)
    }

    /// One finished transfer: its handle back on the free list, and either a retry (a
    /// connect refused at once) or the task's record.
    fn finish(&mut self, id: usize, result: Result<(), curl::Error>) -> Result<(), String> {
        let Some(slot) = self.active.get_mut(id).and_then(Option::take) else {
            return Ok(());
        };
        self.vacant.push(id);
        self.live -= 1;
        let end_ns = mono_ns();
        let shard = slot.shard;
        let easy = self
            .shards
            .remove(shard, slot.handle)
            .map_err(|e| format!("libcurl multi failed: {e}"))?;
        if let Some(pause) = self.retry_pause(&result, &easy, slot.start_ns, slot.attempts, end_ns)
        {
            self.retries.push_back(Retry {
                index: slot.index,
                start_ns: slot.start_ns,
                attempts: slot.attempts + 1,
                due_ns: end_ns + pause.as_nanos() as u64,
            });
            self.shards.put_free(shard, easy);
            return Ok(());
        }
        self.server_seen |= result.is_ok();
        if let Some(r) = self.recorder {
            let sample = conn_sample(&easy, slot.https);
            r.record(sample);
            let version = http_version(&easy);
            if let Some(v) = version.filter(|_| sample.opened) {
                r.http_version(v);
            }
            if version == Some(conn::HttpVersion::Http2) {
                self.streams.add(&easy, slot.added_ns);
            }
        }
        let error = self.task_error(&easy, result, slot.index);
        if let Some(task) = crate::measure::phases::task(slot.index) {
            record_phases(&easy, &task, end_ns);
        }
        let ok = error.is_none();
        self.records.push(TaskRecord {
            index: crate::measure::task_index(slot.index),
            start_ns: slot.start_ns,
            end_ns,
            bytes: if ok { easy.get_ref().bytes } else { 0 },
            error: error.map(Box::new),
            sched_ns: None,
            worker: 0,
        });
        crate::measure::live::ended(ok);
        self.shards.put_free(shard, easy);
        Ok(())
    }

    /// A connect refused at once, within the request's time, is paced and tried again (with
    /// a pause doubling from [`RETRY_FIRST`] to [`RETRY_MAX`]); `None` for any other ending.
    /// Before any response, a refused connect means no server: it is not retried.
    fn retry_pause(
        &self,
        result: &Result<(), curl::Error>,
        easy: &Easy2<Counter>,
        start_ns: u64,
        attempts: u32,
        end_ns: u64,
    ) -> Option<Duration> {
        let e = result.as_ref().err()?;
        let waited = Duration::from_nanos(end_ns.saturating_sub(start_ns));
        let errno = easy.os_errno().ok();
        let refused = errno == Some(libc::ECONNREFUSED);
        let status = easy.response_code().unwrap_or(0);
        (super::curl_connect::connect_failed(e, errno, status)
            && (self.server_seen || !refused)
            && waited < self.conn.timeout)
            .then(|| {
                RETRY_FIRST
                    .saturating_mul(1 << attempts.min(6))
                    .min(RETRY_MAX)
            })
    }

    /// What failed in a finished transfer: libcurl's error, or a 4xx or 5xx status.
    fn task_error(
        &self,
        easy: &Easy2<Counter>,
        result: Result<(), curl::Error>,
        index: usize,
    ) -> Option<TaskError> {
        let code = easy.response_code().unwrap_or(0);
        match result {
            Err(e) => Some(transfer_error(
                easy,
                &e,
                self.http
                    .and_then(|h| h.http_request(index))
                    .as_ref()
                    .map(|r| r.url.as_str()),
            )),
            Ok(()) if code >= 500 => Some(TaskError::new("http_5xx", format!("HTTP {code}"))),
            Ok(()) if code >= 400 => Some(TaskError::new("http_4xx", format!("HTTP {code}"))),
            Ok(()) => None,
        }
    }

    /// Waits for socket activity or a libcurl timer, at most until the next connect retry or
    /// release is due (the cap bounds how late they are served) and at most 10 ms.
    fn wait(&mut self) -> Result<(), String> {
        let mut cap = Duration::from_millis(10);
        if let Some(r) = self.retries.front() {
            cap = cap.min(Duration::from_nanos(r.due_ns.saturating_sub(mono_ns())));
        }
        if let (Some(a), Some(timer)) = (&self.ctx.arrivals, self.release_timer.as_mut()) {
            if self.due < self.ctx.tasks {
                // The wait counts in libcurl's whole milliseconds; the release timer, one
                // of its descriptors, ends it at the release itself.
                let at = a.release_ns(self.due);
                timer
                    .arm(at)
                    .map_err(|e| format!("cannot arm the release timer: {e}"))?;
                cap = cap.min(Duration::from_nanos(at.saturating_sub(mono_ns())));
            } else {
                timer.clear();
            }
        }
        if self.live == 0 {
            std::thread::sleep(cap);
            Ok(())
        } else {
            self.shards
                .wait(cap)
                .map_err(|e| format!("libcurl multi failed: {e}"))
        }
    }

    /// The run's records, and the most streams one connection carried at once.
    fn outcome(self) -> ModelOutcome {
        if let (Some(r), Some(peak)) = (self.recorder, self.streams.peak()) {
            r.streams_open(peak);
        }
        ModelOutcome {
            records: self.records,
            threads_created: 0,
            processes_created: 0,
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peak(spans: &[(i64, u64, u64)]) -> Option<u64> {
        Streams {
            spans: spans.to_vec(),
        }
        .peak()
    }

    #[test]
    fn the_peak_counts_streams_open_at_once_on_one_connection() {
        assert_eq!(peak(&[]), None);
        // Three overlap on connection 0; the fourth starts as the first ends.
        let one = [(0, 0, 10), (0, 1, 20), (0, 2, 20), (0, 10, 30)];
        assert_eq!(peak(&one), Some(3));
        // Streams on two connections at once are not one connection's.
        assert_eq!(peak(&[(0, 0, 10), (1, 0, 10), (1, 5, 15)]), Some(2));
    }

    #[test]
    fn http2_caps_c_connections_with_their_share_of_w_streams() {
        assert_eq!(caps(100, false, None), (100, None));
        assert_eq!(caps(100, true, None), (1, Some(100)));
        assert_eq!(caps(100, true, Some(3)), (3, Some(34)));
        assert_eq!(caps(2, true, Some(4)), (4, Some(1)));
    }
}
