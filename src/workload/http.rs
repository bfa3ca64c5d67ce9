//! `http:URL`: one request per task (GET unless `--method`), counting the body bytes actually
//! read.
//!
//! `http:http://HOST:PORT/PATH` (or `https://`) goes to that server; `http:/PATH` goes to the
//! server of the run (`--url`, or the in-process `concur serve` a study starts). The URL is
//! fetched exactly as given, except that every `{rand}` in its path or query becomes 10 random
//! lowercase letters (different for every request, to defeat caches) and every `{i}` the
//! task's index; both work in the headers and the body too. Nothing is appended: a URL without
//! them is the same for every request, as in wrk, hey, oha and curl. Redirects are not
//! followed: a 3xx is a response like any other.
//!
//! A URL that cannot work is refused when the spec is parsed (so when the plan is built),
//! not task by task: it must parse as a URL (the `url` crate, the WHATWG rules browsers
//! follow), use `http://` or `https://`, name a host and a usable port, and have a path and
//! query that hyper accepts as a request target.
//!
//! Three clients, one per kind of model: blocking models use ureq (one agent, keep-alive
//! connections shared by the workers), async models raw hyper HTTP/1 connections from a small
//! pool (no layers beyond that), and the green model a minimal HTTP/1.1 client on `may`'s
//! coroutine sockets whose response heads `httparse` reads. All three speak TLS through
//! rustls (tokio-rustls for hyper; rustls's own blocking stream over `may`'s sockets, since
//! rustls does no I/O of its own). The `curl` model drives libcurl itself from
//! [`Workload::http_request`] and reports its connections back through
//! [`Workload::record_connection`].

use std::borrow::Cow;
use std::cell::Cell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

use super::{Entry, HttpRequest, Nature, TaskError, TaskFuture, Workload, WorkloadOptions};
use crate::measure::conn::{ConnRecorder, ConnSample, ConnSummary};
use crate::measure::mono_ns;
use crate::{gil, tls, units};

pub(super) const ENTRY: Entry = Entry {
    name: "http",
    usage: "http:URL",
    help: "request URL as given (http(s)://HOST:PORT/PATH, or /PATH on the run's server); every {rand} becomes 10 random letters, every {i} the task's index",
    parse,
};

/// The placeholder that becomes 10 random letters in every request.
pub const RAND: &str = "{rand}";

/// The placeholder that becomes the task's index.
pub const INDEX: &str = "{i}";

/// What an `http:` URL may be, for error messages.
const ALLOWED: &str =
    "allowed: http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH, or /PATH on the run's server";

/// Where a relative `http:/PATH` spec is checked when the run's server is not known yet (the
/// plan is built before concur starts its own server); never connected to.
const PLACEHOLDER_BASE: &str = "http://127.0.0.1:0";

/// Read buffer of a green connection: a response head and a small body in one read, without
/// holding 16 KiB per idle connection at ten thousand connections.
const GREEN_BUF: usize = 4 << 10;

/// Replaces the placeholders in a sample so that a value is checked as it will be sent.
fn sample(text: &str) -> String {
    text.replace(RAND, &letters(0)).replace(INDEX, "0")
}

/// Checks a method as the plan does (`--method`): an HTTP token.
pub fn check_method(m: &str) -> Result<hyper::Method, String> {
    hyper::Method::from_bytes(m.as_bytes()).map_err(|_| {
        format!("--method '{m}' is not an HTTP method (allowed: a token such as GET, POST, PUT, DELETE, PATCH, HEAD)")
    })
}

/// Checks a `-H 'Name: value'` line as the plan does: a colon, a valid name, a value that can
/// be sent once `{rand}` and `{i}` are filled in.
pub fn check_header(line: &str) -> Result<(String, String), String> {
    let Some((name, value)) = line.split_once(':') else {
        return Err(format!(
            "-H '{line}' has no colon (allowed: 'Name: value', e.g. -H 'Authorization: Bearer KEY')"
        ));
    };
    let (name, value) = (name.trim(), value.trim());
    if HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(format!(
            "-H '{line}': '{name}' is not a header name (allowed: letters, digits and !#$%&'*+-.^_`|~)"
        ));
    }
    if HeaderValue::from_str(&sample(value)).is_err() {
        return Err(format!(
            "-H '{line}': the value cannot be sent (allowed: visible text, spaces and tabs)"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

fn parse(args: &str, opts: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    if args.is_empty() {
        return Err("missing URL".into());
    }
    let relative = args.starts_with('/');
    let full = if relative {
        let base = opts.base_url.as_deref().unwrap_or(PLACEHOLDER_BASE);
        format!("{}{args}", base.trim_end_matches('/'))
    } else {
        args.to_string()
    };
    // Without the server's URL, name the spec's own text: the placeholder means nothing to a user.
    let shown = if relative && opts.base_url.is_none() {
        args
    } else {
        full.as_str()
    };
    let target = Target::parse(&full, shown, relative && opts.base_url.is_none())?;
    let delay = delay_of(&target.path);
    let method = check_method(opts.method.as_deref().unwrap_or("GET"))?;
    let mut headers = Vec::with_capacity(opts.headers.len());
    for (name, value) in &opts.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("-H: '{name}' is not a header name"))?;
        headers.push((name, value.clone()));
    }
    let has_host_header = headers.iter().any(|(n, _)| n == hyper::header::HOST);
    let client_tls = if target.tls {
        Some(Arc::new(tls::client_config(
            opts.insecure,
            opts.ca_pem.as_deref(),
        )?))
    } else {
        None
    };
    let body = opts.body.clone().map(Bytes::from);
    let body_templated = body
        .as_ref()
        .is_some_and(|b| find(b, RAND.as_bytes()) || find(b, INDEX.as_bytes()));
    Ok(Arc::new(Http {
        spec_url: args.to_string(),
        scheme: if target.tls { "https" } else { "http" },
        host: target.host,
        connect: target.connect,
        server_name: target.server_name,
        path: target.path,
        delay,
        relative,
        has_base: opts.base_url.is_some(),
        timeout: Duration::from_millis(opts.request_timeout_ms.max(1)),
        nonce: crate::measure::mono_ns() ^ u64::from(std::process::id()) << 32,
        method,
        headers,
        has_host_header,
        body,
        body_templated,
        keepalive: opts.keepalive,
        insecure: opts.insecure,
        ca_pem: opts.ca_pem.clone(),
        client_tls,
        conns: ConnRecorder::default(),
        addr: OnceLock::new(),
        agent: OnceLock::new(),
        async_pool: Mutex::new(Vec::new()),
        green_pool: Mutex::new(Vec::new()),
    }))
}

/// Whether `needle` occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `hay` with every `needle` replaced by `with`.
fn replace_bytes(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// A checked URL, split the way the clients use it.
#[derive(Debug, PartialEq)]
struct Target {
    /// `https://`.
    tls: bool,
    /// The `Host` header: host as the URL parser normalised it, and the port if one was given.
    host: String,
    /// `HOST:PORT` to resolve and connect to (IPv6 literals in brackets).
    connect: String,
    /// The name TLS sends (SNI, for a domain) and verifies the certificate against.
    server_name: ServerName<'static>,
    /// The request target as given (origin form: `/PATH?QUERY`), `{rand}` still in it.
    path: String,
}

impl Target {
    /// Checks `text`, naming it as `shown` in errors; `placeholder` allows port 0 (see
    /// [`PLACEHOLDER_BASE`]).
    fn parse(text: &str, shown: &str, placeholder: bool) -> Result<Target, String> {
        let refuse = |why: String| Err(format!("URL '{shown}' {why} ({ALLOWED})"));
        // Letters are valid wherever `{rand}` may stand, so the URL is checked as it is sent.
        let sampled = sample(text);
        let url = match url::Url::parse(&sampled) {
            Ok(u) => u,
            Err(e) => return refuse(format!("does not parse: {e}")),
        };
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => return refuse(format!("has the scheme '{other}:', which is not supported")),
        };
        // The URL parser forgives `http:host` and `http:///host` (WHATWG); the authority is
        // taken from the text, so it must be spelled out after `http://`.
        let prefix = if tls { "https://" } else { "http://" };
        let rest = match text.get(..prefix.len()) {
            Some(p) if p.eq_ignore_ascii_case(prefix) => &text[prefix.len()..],
            _ => return refuse(format!("must start with {prefix}")),
        };
        let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if authority.is_empty() {
            return refuse("has no host".into());
        }
        if authority.contains(RAND) || authority.contains(INDEX) {
            return refuse(format!(
                "has {RAND} or {INDEX} in the host; they may stand in the path or query only"
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return refuse("has user:password@ in it, which is not supported".into());
        }
        // What the parser read as the authority must be all of the text before the path:
        // `http://h\x/` is host `h` and path `/x/` to it, but not to a server reading `h\x`.
        let alone = url::Url::parse(&format!("{prefix}{authority}/")).ok();
        if alone.as_ref().map(|a| (a.path(), a.query())) != Some(("/", None)) {
            return refuse(format!("has an unusable host and port '{authority}'"));
        }
        let (host, port) = match (url.host(), url.port_or_known_default()) {
            (Some(h), Some(p)) => (h, p),
            _ => return refuse("has no host".into()),
        };
        if port == 0 && !placeholder {
            return refuse("has port 0, which cannot be connected to".into());
        }
        let (connect, server_name) = match host {
            url::Host::Ipv6(ip) => (format!("[{ip}]:{port}"), ServerName::from(ip)),
            url::Host::Ipv4(ip) => (format!("{ip}:{port}"), ServerName::from(ip)),
            url::Host::Domain(d) => match ServerName::try_from(d.to_string()) {
                Ok(n) => (format!("{d}:{port}"), n),
                Err(_) => return refuse(format!("has the host '{d}', which TLS cannot name")),
            },
        };
        let host = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        // A fragment is never sent; a bare query is asked of `/`.
        let tail = tail.split('#').next().unwrap_or("");
        let path = match tail.chars().next() {
            None => "/".to_string(),
            Some('?') => format!("/{tail}"),
            Some(_) => tail.to_string(),
        };
        // hyper's parser (the async client's) decides which request targets can be sent as
        // they are: a space or a control character in the path would otherwise fail every
        // request at run time.
        if sample(&path).parse::<hyper::Uri>().is_err() {
            return refuse(format!(
                "has the path '{path}', which cannot be sent as it is (percent-encode spaces, quotes and control characters)"
            ));
        }
        Ok(Target {
            tls,
            host,
            connect,
            server_name,
            path,
        })
    }
}

/// The server-side delay a URL asks for: `/add?...delay=MS` or `/delay/DURATION`. The query is
/// decoded as the server decodes it.
fn delay_of(path: &str) -> Option<Duration> {
    let (p, query) = path.split_once('?').unwrap_or((path, ""));
    if let Some(d) = p.strip_prefix("/delay/") {
        return units::parse_duration(d).ok();
    }
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "delay")
        .and_then(|(_, v)| v.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
}

/// A green connection: plain, or rustls's blocking stream over a coroutine socket (whose
/// reads and writes yield to the other coroutines).
enum GreenStream {
    Plain(may::net::TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, may::net::TcpStream>>),
}

impl Read for GreenStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            GreenStream::Plain(s) => s.read(buf),
            GreenStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for GreenStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            GreenStream::Plain(s) => s.write(buf),
            GreenStream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            GreenStream::Plain(s) => s.flush(),
            GreenStream::Tls(s) => s.flush(),
        }
    }
}

/// HTTP requests to one server.
pub struct Http {
    spec_url: String,
    /// `http` or `https`.
    scheme: &'static str,
    /// The `Host` header and the authority of the URLs handed to ureq and libcurl.
    host: String,
    /// `HOST:PORT` to resolve.
    connect: String,
    /// The name TLS sends and verifies.
    server_name: ServerName<'static>,
    /// The request target, `{rand}` still in it.
    path: String,
    delay: Option<Duration>,
    relative: bool,
    has_base: bool,
    timeout: Duration,
    nonce: u64,
    method: hyper::Method,
    /// `-H` headers, placeholders still in the values.
    headers: Vec<(HeaderName, String)>,
    /// Whether `-H` sets `Host` (then ours is not sent).
    has_host_header: bool,
    body: Option<Bytes>,
    /// Whether the body holds `{rand}` or `{i}`.
    body_templated: bool,
    keepalive: bool,
    insecure: bool,
    ca_pem: Option<String>,
    /// The rustls config of `https://` targets, made once (the system's roots are read then).
    client_tls: Option<Arc<rustls::ClientConfig>>,
    conns: ConnRecorder,
    addr: OnceLock<Result<SocketAddr, String>>,
    agent: OnceLock<ureq::Agent>,
    async_pool: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    /// Idle coroutine connections, buffered: a response head and its body usually arrive in
    /// one read, and the buffer keeps what `httparse` did not consume for the body.
    green_pool: Mutex<Vec<BufReader<GreenStream>>>,
}

/// 10 lowercase letters from a seed (splitmix64), for cache-busting URLs.
pub fn letters(seed: u64) -> String {
    let mut x = seed;
    (0..10)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (b'a' + (z % 26) as u8) as char
        })
        .collect()
}

fn err(kind: &str, msg: impl Into<String>) -> TaskError {
    TaskError::new(kind, msg)
}

fn status_error(code: u16) -> TaskError {
    let kind = match code {
        400..=499 => "http_4xx",
        500..=599 => "http_5xx",
        _ => "http_status",
    };
    err(kind, format!("HTTP {code}"))
}

fn micros(from_ns: u64, to_ns: u64) -> u64 {
    to_ns.saturating_sub(from_ns) / 1000
}

thread_local! {
    /// The blocking client's connection of the request this thread is making: when ureq's
    /// resolver was asked for a new connection (ns), and the TLS handshake's µs. ureq shows
    /// neither, so its resolver and TLS connector leave them here. Blocking threads only:
    /// never read inside a coroutine.
    static UREQ_CONN: Cell<(Option<u64>, Option<u64>, Option<u64>)> = const { Cell::new((None, None, None)) };
}

/// ureq's resolver, counting new connections (ureq resolves once per connection it opens).
struct CountingResolver;

impl ureq::Resolver for CountingResolver {
    fn resolve(&self, netloc: &str) -> std::io::Result<Vec<SocketAddr>> {
        UREQ_CONN.with(|c| c.set((Some(mono_ns()), None, None)));
        netloc.to_socket_addrs().map(|a| a.collect())
    }
}

/// ureq's TLS: rustls with our config, the handshake done at once (ureq's own does it on the
/// first write) so that its time and its failure are the handshake's.
struct TimedTls {
    config: Arc<rustls::ClientConfig>,
}

/// A TLS stream for ureq.
#[derive(Debug)]
struct UreqTls(rustls::StreamOwned<rustls::ClientConnection, Box<dyn ureq::ReadWrite>>);

impl Read for UreqTls {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for UreqTls {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl ureq::ReadWrite for UreqTls {
    fn socket(&self) -> Option<&std::net::TcpStream> {
        self.0.sock.socket()
    }
}

/// The marker of a TLS failure in ureq's transport errors.
const TLS_FAILED: &str = "TLS handshake failed";

impl ureq::TlsConnector for TimedTls {
    fn connect(
        &self,
        dns_name: &str,
        mut io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let t0 = mono_ns();
        let fail =
            |e: String| ureq::Error::from(std::io::Error::other(format!("{TLS_FAILED}: {e}")));
        let name = ServerName::try_from(dns_name.trim_matches(['[', ']']).to_string())
            .map_err(|e| fail(e.to_string()))?;
        let mut conn = rustls::ClientConnection::new(self.config.clone(), name)
            .map_err(|e| fail(e.to_string()))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut io).map_err(|e| fail(e.to_string()))?;
        }
        let now = mono_ns();
        UREQ_CONN.with(|c| {
            let (start, _, _) = c.get();
            c.set((start, start.map(|s| micros(s, t0)), Some(micros(t0, now))));
        });
        Ok(Box::new(UreqTls(rustls::StreamOwned::new(conn, io))))
    }
}

impl Http {
    /// `s` with `{rand}` and `{i}` filled in for task `index`.
    fn fill<'a>(&self, s: &'a str, index: usize) -> Cow<'a, str> {
        if !s.contains('{') {
            return Cow::Borrowed(s);
        }
        let mut out = s.to_string();
        if out.contains(RAND) {
            out = out.replace(RAND, &letters(self.nonce.wrapping_add(index as u64)));
        }
        if out.contains(INDEX) {
            out = out.replace(INDEX, &index.to_string());
        }
        Cow::Owned(out)
    }

    fn path_for(&self, index: usize) -> String {
        self.fill(&self.path, index).into_owned()
    }

    /// The body of task `index`, placeholders filled in.
    fn body_for(&self, index: usize) -> Option<Bytes> {
        let body = self.body.as_ref()?;
        if !self.body_templated {
            return Some(body.clone());
        }
        let rand = letters(self.nonce.wrapping_add(index as u64));
        let b = replace_bytes(body, RAND.as_bytes(), rand.as_bytes());
        Some(Bytes::from(replace_bytes(
            &b,
            INDEX.as_bytes(),
            index.to_string().as_bytes(),
        )))
    }

    fn check_server(&self) -> Result<(), TaskError> {
        if self.relative && !self.has_base {
            return Err(err(
                "connect",
                "http:/PATH needs a server: give --url, or use a study that starts one",
            ));
        }
        Ok(())
    }

    fn addr(&self) -> Result<SocketAddr, TaskError> {
        self.check_server()?;
        self.addr
            .get_or_init(|| {
                self.connect
                    .to_socket_addrs()
                    .map_err(|e| format!("cannot resolve '{}': {e}", self.connect))?
                    .next()
                    .ok_or_else(|| format!("'{}' resolves to no address", self.connect))
            })
            .clone()
            .map_err(|e| err("connect", e))
    }

    fn agent(&self) -> &ureq::Agent {
        self.agent.get_or_init(|| {
            let idle = if self.keepalive { 100_000 } else { 0 };
            let mut b = ureq::AgentBuilder::new()
                .timeout(self.timeout)
                .redirects(0)
                .max_idle_connections(idle)
                .max_idle_connections_per_host(idle)
                .resolver(CountingResolver);
            if let Some(config) = &self.client_tls {
                b = b.tls_connector(Arc::new(TimedTls {
                    config: config.clone(),
                }));
            }
            b.build()
        })
    }

    fn fetch_blocking(&self, index: usize) -> Result<u64, TaskError> {
        self.check_server()?;
        let url = format!("{}://{}{}", self.scheme, self.host, self.path_for(index));
        let mut req = self.agent().request(self.method.as_str(), &url);
        for (name, value) in &self.headers {
            req = req.set(name.as_str(), &self.fill(value, index));
        }
        if !self.keepalive {
            req = req.set("Connection", "close");
        }
        UREQ_CONN.with(|c| c.set((None, None, None)));
        let sent = match self.body_for(index) {
            Some(b) => req.send_bytes(&b),
            None => req.call(),
        };
        let (opened, connect_us, tls_us) = UREQ_CONN.with(|c| c.take());
        self.conns.record(ConnSample {
            opened: opened.is_some(),
            connect_us,
            tls_us,
        });
        let resp = match sent {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                // Drain so the connection can be reused.
                let _ = std::io::copy(&mut r.into_reader(), &mut std::io::sink());
                return Err(status_error(code));
            }
            Err(ureq::Error::Transport(t)) => {
                let text = t.to_string();
                let kind = if text.contains(TLS_FAILED) {
                    tls::KIND
                } else if text.contains("timed out") || text.contains("Timeout") {
                    "timeout"
                } else if t.kind() == ureq::ErrorKind::ConnectionFailed {
                    "connect"
                } else {
                    "read"
                };
                return Err(err(kind, text));
            }
        };
        let n = std::io::copy(&mut resp.into_reader(), &mut std::io::sink()).map_err(|e| {
            err(
                if e.kind() == std::io::ErrorKind::TimedOut {
                    "timeout"
                } else {
                    "read"
                },
                e.to_string(),
            )
        })?;
        Ok(n)
    }

    /// [`Http::addr`] without blocking the event loop: a name is resolved by tokio's resolver
    /// (getaddrinfo on the blocking pool) the first time, then cached like the blocking path's.
    async fn addr_async(&self) -> Result<SocketAddr, TaskError> {
        self.check_server()?;
        if let Some(cached) = self.addr.get() {
            return cached.clone().map_err(|e| err("connect", e));
        }
        let resolved = match tokio::net::lookup_host(self.connect.as_str()).await {
            Ok(mut addrs) => addrs
                .next()
                .ok_or_else(|| format!("'{}' resolves to no address", self.connect)),
            Err(e) => Err(format!("cannot resolve '{}': {e}", self.connect)),
        };
        self.addr
            .get_or_init(|| resolved)
            .clone()
            .map_err(|e| err("connect", e))
    }

    /// hyper's HTTP/1 handshake over any stream; the connection is driven by its own task.
    async fn handshake<I>(io: I) -> Result<SendRequest<Full<Bytes>>, TaskError>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        // A small exact read buffer: the responses counted here are small, and at ten
        // thousand connections hyper's default (8 KiB, growing) was most of the memory of an
        // in-flight request. Larger bodies are read in more, smaller reads.
        let (sender, conn) = hyper::client::conn::http1::Builder::new()
            .read_buf_exact_size(Some(ASYNC_READ_BUF))
            .handshake(io)
            .await
            .map_err(|e| err("connect", e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    async fn connect_async(&self) -> Result<SendRequest<Full<Bytes>>, TaskError> {
        let addr = self.addr_async().await?;
        let t0 = mono_ns();
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| err("connect", format!("{addr}: {e}")))?;
        let t1 = mono_ns();
        let _ = stream.set_nodelay(true);
        let mut sample = ConnSample {
            opened: true,
            connect_us: Some(micros(t0, t1)),
            tls_us: None,
        };
        let sender = match &self.client_tls {
            None => Self::handshake(TokioIo::new(stream)).await,
            Some(config) => {
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(self.server_name.clone(), stream)
                    .await
                    .map_err(|e| err(tls::KIND, format!("{}: {e}", self.connect)));
                match tls {
                    Ok(s) => {
                        sample.tls_us = Some(micros(t1, mono_ns()));
                        Self::handshake(TokioIo::new(s)).await
                    }
                    Err(e) => Err(e),
                }
            }
        };
        self.conns.record(sample);
        sender
    }

    fn request_for(&self, index: usize) -> Result<hyper::Request<Full<Bytes>>, TaskError> {
        let mut b = hyper::Request::builder()
            .method(self.method.clone())
            .uri(self.path_for(index));
        if !self.has_host_header {
            b = b.header(hyper::header::HOST, self.host.as_str());
        }
        for (name, value) in &self.headers {
            b = b.header(name, self.fill(value, index).as_ref());
        }
        if !self.keepalive {
            b = b.header(hyper::header::CONNECTION, "close");
        }
        b.body(Full::new(self.body_for(index).unwrap_or_default()))
            .map_err(|e| err("request", e.to_string()))
    }

    async fn fetch_async(&self, index: usize) -> Result<u64, TaskError> {
        let pooled = if self.keepalive {
            self.async_pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop()
        } else {
            None
        };
        let mut sender = match pooled {
            Some(s) if !s.is_closed() => {
                self.conns.record(ConnSample::default());
                s
            }
            // Boxed: the connect's state (TLS handshake included) is 3.6 KB of the 3.7 KB
            // future, and a request spends most of its life waiting for the response with
            // that space reserved but unused; boxed, it is held only while connecting.
            _ => Box::pin(self.connect_async()).await?,
        };
        sender
            .ready()
            .await
            .map_err(|e| err("connect", e.to_string()))?;
        let req = self.request_for(index)?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| err("read", e.to_string()))?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| err("read", e.to_string()))?;
            if let Some(data) = frame.data_ref() {
                n += data.len() as u64;
            }
        }
        if self.keepalive && !sender.is_closed() {
            self.async_pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(sender);
        }
        if status >= 400 {
            return Err(status_error(status));
        }
        Ok(n)
    }

    /// Opens a green connection (TLS included), recording what it cost.
    fn connect_green(&self) -> Result<BufReader<GreenStream>, TaskError> {
        let addr = self.addr()?;
        let t0 = mono_ns();
        let s = may::net::TcpStream::connect(addr)
            .map_err(|e| err("connect", format!("{addr}: {e}")))?;
        let t1 = mono_ns();
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(self.timeout));
        let _ = s.set_write_timeout(Some(self.timeout));
        let mut sample = ConnSample {
            opened: true,
            connect_us: Some(micros(t0, t1)),
            tls_us: None,
        };
        let stream = match &self.client_tls {
            None => GreenStream::Plain(s),
            Some(config) => {
                let tls_err = |e: String| err(tls::KIND, format!("{}: {e}", self.connect));
                let mut conn =
                    rustls::ClientConnection::new(config.clone(), self.server_name.clone())
                        .map_err(|e| tls_err(e.to_string()))?;
                let mut s = s;
                let shaken = (|| {
                    while conn.is_handshaking() {
                        conn.complete_io(&mut s)?;
                    }
                    Ok::<(), std::io::Error>(())
                })();
                if let Err(e) = shaken {
                    self.conns.record(sample);
                    return Err(tls_err(e.to_string()));
                }
                sample.tls_us = Some(micros(t1, mono_ns()));
                GreenStream::Tls(Box::new(rustls::StreamOwned::new(conn, s)))
            }
        };
        self.conns.record(sample);
        Ok(BufReader::with_capacity(GREEN_BUF, stream))
    }

    fn fetch_green(&self, index: usize) -> Result<u64, TaskError> {
        self.check_server()?;
        let pooled = if self.keepalive {
            self.green_pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop()
        } else {
            None
        };
        let mut stream = match pooled {
            Some(s) => {
                self.conns.record(ConnSample::default());
                s
            }
            None => self.connect_green()?,
        };
        let body = self.body_for(index);
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path_for(index));
        if !self.has_host_header {
            head.push_str(&format!("Host: {}\r\n", self.host));
        }
        if !self
            .headers
            .iter()
            .any(|(n, _)| n == hyper::header::USER_AGENT)
        {
            head.push_str("User-Agent: concur\r\n");
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {}\r\n", self.fill(value, index)));
        }
        if !self.keepalive {
            head.push_str("Connection: close\r\n");
        }
        if let Some(b) = &body {
            head.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        head.push_str("\r\n");
        let io = |e: std::io::Error| {
            let kind = match e.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timeout",
                _ => "read",
            };
            err(kind, e.to_string())
        };
        let mut out = head.into_bytes();
        if let Some(b) = &body {
            out.extend_from_slice(b);
        }
        let w = stream.get_mut();
        w.write_all(&out).and_then(|_| w.flush()).map_err(io)?;
        let (status, n, keep) =
            read_response_to(&mut stream, self.method == hyper::Method::HEAD).map_err(io)?;
        if keep && self.keepalive {
            self.green_pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(stream);
        }
        if status >= 400 {
            return Err(status_error(status));
        }
        Ok(n)
    }
}

/// The async client's read buffer per connection (see [`Http::handshake`]).
const ASYNC_READ_BUF: usize = 4 << 10;

/// The longest response head accepted.
const MAX_HEAD: usize = 64 << 10;

/// The most header lines in a response head.
const MAX_HEADERS: usize = 100;

/// How a response's body is delimited.
#[derive(Debug, PartialEq)]
enum Body {
    /// No body whatever the headers say (1xx, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    UntilClose,
}

/// What the client needs from a response head.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    body: Body,
    keep_alive: bool,
}

fn invalid(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

/// Parses a complete head at the start of `bytes`: its length and content, or `None` when more
/// bytes are needed.
fn parse_head(bytes: &[u8]) -> std::io::Result<Option<(usize, Head)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(format!("bad response head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    // HTTP/1.0 closes unless asked to keep the connection, HTTP/1.1 keeps it unless told.
    let mut keep_alive = resp.version == Some(1);
    let (mut length, mut chunked) = (None, false);
    for h in resp.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<u64>()
                    .map_err(|_| invalid(format!("bad Content-Length '{value}'")))?,
            );
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            let value = value.to_ascii_lowercase();
            if value.contains("close") {
                keep_alive = false;
            } else if value.contains("keep-alive") {
                keep_alive = true;
            }
        }
    }
    // RFC 9112 section 6.3: these statuses have no body; chunked wins over a length.
    let body = if (100..200).contains(&status) || status == 204 || status == 304 {
        Body::Empty
    } else if chunked {
        Body::Chunked
    } else if let Some(n) = length {
        Body::Length(n)
    } else {
        keep_alive = false;
        Body::UntilClose
    };
    Ok(Some((
        len,
        Head {
            status,
            body,
            keep_alive,
        },
    )))
}

/// Reads a response head, consuming exactly its bytes from `s`.
fn read_head(s: &mut impl BufRead) -> std::io::Result<Head> {
    // Bytes of a head that spans reads; empty in the usual case of a head in one read, which
    // is parsed in place.
    let mut partial = Vec::new();
    loop {
        let buf = s.fill_buf()?;
        if buf.is_empty() {
            return Err(invalid("connection closed before the response head ended"));
        }
        let got = buf.len();
        let before = partial.len();
        let parsed = if before == 0 {
            parse_head(buf)?
        } else {
            partial.extend_from_slice(buf);
            parse_head(&partial)?
        };
        if let Some((len, head)) = parsed {
            s.consume(len - before);
            return Ok(head);
        }
        if before == 0 {
            partial.extend_from_slice(buf);
        }
        s.consume(got);
        if partial.len() > MAX_HEAD {
            return Err(invalid(format!(
                "response head over {} KiB",
                MAX_HEAD >> 10
            )));
        }
    }
}

/// Reads one line (chunk size or trailer) of at most 4 KiB, CRLF included.
fn read_line(s: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    s.by_ref().take(4 << 10).read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\n") {
        return Err(invalid("connection closed in a chunk header"));
    }
    Ok(line)
}

/// Whether a line is empty but for its line end (servers may send a bare LF).
fn is_blank(line: &[u8]) -> bool {
    line == b"\r\n" || line == b"\n"
}

/// Reads and discards exactly `n` bytes.
fn skip(s: &mut impl BufRead, n: u64, what: &str) -> std::io::Result<()> {
    let got = std::io::copy(&mut s.by_ref().take(n), &mut std::io::sink())?;
    if got < n {
        return Err(invalid(format!("connection closed in {what}")));
    }
    Ok(())
}

/// Reads one HTTP/1.1 response: (status, body bytes read, whether the connection stays
/// open). Handles `Content-Length`, chunked bodies (with trailers) and bodies that end when
/// the server closes; consumes nothing past the response, so a kept connection is ready for
/// the next one.
pub fn read_response(s: &mut impl BufRead) -> std::io::Result<(u16, u64, bool)> {
    read_response_to(s, false)
}

/// [`read_response`] for a request that was a `HEAD` (`to_head`), whose response never has a
/// body whatever its headers say.
pub fn read_response_to(s: &mut impl BufRead, to_head: bool) -> std::io::Result<(u16, u64, bool)> {
    let head = read_head(s)?;
    let body = if to_head { Body::Empty } else { head.body };
    let n = match body {
        Body::Empty => 0,
        Body::Length(n) => {
            skip(s, n, "the body")?;
            n
        }
        Body::UntilClose => std::io::copy(s, &mut std::io::sink())?,
        Body::Chunked => {
            let mut n = 0u64;
            loop {
                let line = read_line(s)?;
                let size = match httparse::parse_chunk_size(&line) {
                    Ok(httparse::Status::Complete((_, size))) => size,
                    _ => return Err(invalid("bad chunk size")),
                };
                if size == 0 {
                    break;
                }
                skip(s, size, "a chunk")?;
                if !is_blank(&read_line(s)?) {
                    return Err(invalid("a chunk does not end with CRLF"));
                }
                n += size;
            }
            // Trailer fields, if any, up to the empty line.
            while !is_blank(&read_line(s)?) {}
            n
        }
    };
    Ok((head.status, n, head.keep_alive))
}

impl Workload for Http {
    fn spec(&self) -> String {
        format!("http:{}", self.spec_url)
    }
    fn nature(&self) -> Nature {
        match self.delay {
            Some(d) => Nature::Delay(d),
            None => Nature::Network,
        }
    }
    fn run(&self, index: usize) -> Result<u64, TaskError> {
        gil::released(|| self.fetch_blocking(index))
    }
    fn run_async(self: Arc<Self>, index: usize) -> TaskFuture {
        Box::pin(async move {
            let timeout = self.timeout;
            match tokio::time::timeout(timeout, self.fetch_async(index)).await {
                Ok(r) => r,
                Err(_) => Err(err(
                    "timeout",
                    format!(
                        "no full response within {}",
                        units::fmt_secs(timeout.as_secs_f64())
                    ),
                )),
            }
        })
    }
    fn run_green(&self, index: usize) -> Result<u64, TaskError> {
        self.fetch_green(index)
    }
    fn supports_green(&self) -> bool {
        true
    }
    fn is_http(&self) -> bool {
        true
    }
    fn needs_server(&self) -> bool {
        self.relative && !self.has_base
    }
    fn url(&self, index: usize) -> Option<String> {
        if self.relative && !self.has_base {
            return None;
        }
        Some(format!(
            "{}://{}{}",
            self.scheme,
            self.host,
            self.path_for(index)
        ))
    }
    fn http_request(&self, index: usize) -> Option<HttpRequest> {
        let url = self.url(index)?;
        Some(HttpRequest {
            url,
            method: self.method.to_string(),
            headers: self
                .headers
                .iter()
                .map(|(n, v)| format!("{n}: {}", self.fill(v, index)))
                .collect(),
            body: self.body_for(index).map(|b| b.to_vec()),
            insecure: self.insecure,
            ca_pem: self.ca_pem.clone(),
            keepalive: self.keepalive,
        })
    }
    fn record_connection(&self, sample: ConnSample) {
        self.conns.record(sample);
    }
    fn connections(&self) -> Option<ConnSummary> {
        self.conns.summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_base() -> WorkloadOptions {
        WorkloadOptions {
            base_url: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        }
    }

    #[test]
    fn urls_are_fetched_as_given_but_for_rand() {
        let o = with_base();
        let w = parse("/add?name=a{rand}&delay=100", &o).unwrap();
        assert_eq!(w.nature(), Nature::Delay(Duration::from_millis(100)));
        let (u0, u1) = (w.url(0).unwrap(), w.url(1).unwrap());
        assert!(u0.starts_with("http://127.0.0.1:9/add?name=a") && u0.ends_with("&delay=100"));
        assert_eq!(
            u0.len(),
            "http://127.0.0.1:9/add?name=a&delay=100".len() + 10
        );
        assert_ne!(u0, u1);
        assert_eq!(w.spec(), "http:/add?name=a{rand}&delay=100");
        // Without {rand} nothing is appended: `delay=100` stays 100.
        let plain = parse("http://h:1/add?name=c&delay=100", &o).unwrap();
        assert_eq!(plain.url(3).unwrap(), "http://h:1/add?name=c&delay=100");
        assert_eq!(plain.url(4).unwrap(), plain.url(3).unwrap());
        let twice = parse("http://h:1/{rand}/x?a={rand}", &o).unwrap();
        let u = twice.url(0).unwrap();
        assert!(!u.contains("{rand}"), "{u}");
        assert_eq!(u.len(), "http://h:1//x?a=".len() + 20);
        // A bare query is asked of `/`; a fragment is never sent.
        let q = parse("http://h:1?delay=5#frag", &o).unwrap();
        assert_eq!(q.url(0).unwrap(), "http://h:1/?delay=5");
        assert_eq!(q.nature(), Nature::Delay(Duration::from_millis(5)));
        assert_eq!(
            parse("http://h:1/delay/250ms", &o).unwrap().nature(),
            Nature::Delay(Duration::from_millis(250))
        );
        assert_eq!(
            parse("http://h:1/add?delay=%32%35", &o).unwrap().nature(),
            Nature::Delay(Duration::from_millis(25))
        );
        assert_eq!(
            parse("http://h:1/bytes/5", &o).unwrap().nature(),
            Nature::Network
        );
    }

    #[test]
    fn https_urls_headers_and_bodies_are_filled_per_task() {
        let o = WorkloadOptions {
            method: Some("POST".into()),
            headers: vec![("X-Task".into(), "n{i}".into())],
            body: Some(b"id={i}&r={rand}".to_vec()),
            insecure: true,
            ..Default::default()
        };
        let w = parse("https://h/x?i={i}", &o).unwrap();
        let r = w.http_request(7).unwrap();
        assert_eq!(r.url, "https://h/x?i=7");
        assert_eq!(r.method, "POST");
        assert_eq!(r.headers, vec!["x-task: n7".to_string()]);
        let body = String::from_utf8(r.body.unwrap()).unwrap();
        assert!(
            body.starts_with("id=7&r=") && body.len() == "id=7&r=".len() + 10,
            "{body}"
        );
        let t = Target::parse("https://Example.com/", "x", false).unwrap();
        assert!(t.tls);
        assert_eq!(t.connect, "example.com:443");
        assert!(check_header("NoColon").unwrap_err().contains("no colon"));
        assert!(check_header("Bad Name: v")
            .unwrap_err()
            .contains("not a header name"));
        assert_eq!(
            check_header("Authorization:  Bearer k ").unwrap(),
            ("Authorization".to_string(), "Bearer k".to_string())
        );
        assert!(check_method("GE T").is_err());
    }

    #[test]
    fn hosts_and_ports_are_split_for_connecting() {
        let t = |u: &str| Target::parse(u, u, false).unwrap();
        let v6 = t("http://[::1]:8080/x?y={rand}");
        assert_eq!(
            (v6.host.as_str(), v6.connect.as_str(), v6.path.as_str()),
            ("[::1]:8080", "[::1]:8080", "/x?y={rand}")
        );
        let default_port = t("http://Example.COM");
        assert_eq!(
            (default_port.host.as_str(), default_port.connect.as_str()),
            ("example.com", "example.com:80")
        );
        assert_eq!(t("HTTP://127.0.0.1:80/").connect, "127.0.0.1:80");
        // The run's server, before it is known, may be checked against a placeholder.
        assert!(parse("/add?x={rand}", &WorkloadOptions::default()).is_ok());
    }

    #[test]
    fn urls_that_cannot_work_are_refused_naming_the_value() {
        let o = with_base();
        for (url, needle) in [
            ("", "missing URL"),
            ("http://[::1", "does not parse"),
            ("https:h/x", "must start with https://"),
            ("https://{i}.h/", "in the host"),
            ("ftp://h/x", "'ftp:'"),
            ("h:1/x", "not supported"),
            ("http://", "does not parse"),
            ("http:///x", "no host"),
            ("http:h/x", "must start with http://"),
            ("http://h:99999/", "does not parse"),
            ("http://h:port/", "does not parse"),
            ("http://h:0/", "port 0"),
            ("http://u:p@h/", "user:password@"),
            ("http://{rand}.h/", "in the host"),
            ("http://h\\x/y", "unusable host"),
            ("http://h/a b", "cannot be sent"),
            ("/a\tb", "cannot be sent"),
        ] {
            let e = match parse(url, &o) {
                Ok(_) => panic!("{url} was accepted"),
                Err(e) => e,
            };
            assert!(e.contains(needle), "{url}: {e}");
            assert!(!e.contains('\n'), "{url}: {e}");
            if !url.is_empty() && !url.starts_with('/') {
                assert!(e.contains(&format!("'{url}'")), "{url}: {e}");
            }
            assert!(url.is_empty() || e.contains("allowed: http://"), "{e}");
        }
        // A relative URL names the run's server it was joined to, or itself alone.
        let e = parse("/a b", &WorkloadOptions::default()).err().unwrap();
        assert!(e.contains("'/a b'"), "{e}");
        let e = parse("/a b", &o).err().unwrap();
        assert!(e.contains("'http://127.0.0.1:9/a b'"), "{e}");
    }

    #[test]
    fn responses_are_read_by_length_and_chunks() {
        let mut r: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(read_response(&mut r).unwrap(), (200, 5, true));
        let mut c: &[u8] = b"HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(read_response(&mut c).unwrap(), (503, 5, false));
    }

    /// A reader that hands out one piece per read, as a socket does when a response arrives
    /// in several segments.
    struct Pieces(std::collections::VecDeque<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let Some(mut piece) = self.0.pop_front() else {
                return Ok(0);
            };
            let n = piece.len().min(out.len());
            out[..n].copy_from_slice(&piece[..n]);
            if n < piece.len() {
                self.0.push_front(piece.split_off(n));
            }
            Ok(n)
        }
    }

    fn pieces(parts: &[&[u8]], capacity: usize) -> BufReader<Pieces> {
        BufReader::with_capacity(capacity, Pieces(parts.iter().map(|p| p.to_vec()).collect()))
    }

    #[test]
    fn heads_split_across_reads_and_larger_than_one_read_are_parsed() {
        // Split inside the status line, inside a header, and between CR and LF of the end.
        let mut r = pieces(
            &[
                b"HTTP/1.",
                b"1 200 OK\r\nContent-Le",
                b"ngth: 10\r\n\r",
                b"\nok: added\n",
            ],
            16 << 10,
        );
        assert_eq!(read_response(&mut r).unwrap(), (200, 10, true));
        // A head of about 3 KiB through an 8-byte buffer: hundreds of reads.
        let mut long = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..60 {
            long.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "v".repeat(40)).as_bytes());
        }
        long.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n");
        let mut r = pieces(&[&long], 8);
        assert_eq!(read_response(&mut r).unwrap(), (200, 4, true));
        assert_eq!(
            r.fill_buf().unwrap(),
            b"",
            "the whole response was consumed"
        );
    }

    #[test]
    fn kept_connections_are_left_at_the_next_response() {
        let two: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 Not Found\r\ntransfer-encoding: Chunked\r\n\r\n2;ext=1\r\nxy\r\n0\r\nTrailer: t\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n";
        let mut r = pieces(&[two], 5);
        assert_eq!(read_response(&mut r).unwrap(), (200, 3, true));
        assert_eq!(read_response(&mut r).unwrap(), (404, 2, true));
        assert_eq!(read_response(&mut r).unwrap(), (204, 0, true));
        // HTTP/1.0 closes unless asked; a body without a length runs to the close.
        let mut r: &[u8] = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(read_response(&mut r).unwrap(), (200, 1, false));
        let mut r: &[u8] =
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(read_response(&mut r).unwrap(), (200, 1, true));
        let mut r: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nuntil close";
        assert_eq!(read_response(&mut r).unwrap(), (200, 11, false));
    }

    #[test]
    fn broken_responses_are_errors() {
        for bytes in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
            b"SMTP ready\r\n\r\n",
            b"",
        ] {
            let mut r = bytes;
            let e = read_response(&mut r).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{bytes:?}");
        }
        let mut huge = b"HTTP/1.1 200 OK\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'x', MAX_HEAD + 10));
        let mut r = pieces(&[&huge], 4096);
        assert!(read_response(&mut r)
            .unwrap_err()
            .to_string()
            .contains("over 64 KiB"));
    }
}
