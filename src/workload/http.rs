//! `http:URL`: one GET per task, counting the body bytes actually read.
//!
//! `http:http://HOST:PORT/PATH` goes to that server; `http:/PATH` goes to the server of the
//! run (`--url`, or the in-process `concur serve` a study starts). The URL is fetched exactly
//! as given, except that every `{rand}` in its path or query becomes 10 random lowercase
//! letters (different for every request, to defeat caches). Nothing is appended: a URL without
//! `{rand}` is the same for every request, as in wrk, hey, oha and curl.
//!
//! A URL that cannot work is refused when the spec is parsed (so when the plan is built),
//! not task by task: it must parse as a URL (the `url` crate, the WHATWG rules browsers
//! follow), use `http://`, name a host and a usable port, and have a path and query that
//! hyper accepts as a request target.
//!
//! Three clients, one per kind of model: blocking models use ureq (one agent, keep-alive
//! connections shared by the workers), async models raw hyper HTTP/1 connections from a small
//! pool (no layers beyond that), and the green model a minimal HTTP/1.1 client on `may`'s
//! coroutine sockets whose response heads `httparse` reads. The `curl` model drives libcurl
//! itself from [`Workload::url`].

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::{Entry, Nature, TaskError, TaskFuture, Workload, WorkloadOptions};
use crate::{gil, units};

pub(super) const ENTRY: Entry = Entry {
    name: "http",
    usage: "http:URL",
    help: "GET URL as given (http://HOST:PORT/PATH, or /PATH on the run's server); every {rand} becomes 10 random letters",
    parse,
};

/// The placeholder that becomes 10 random letters in every request.
pub const RAND: &str = "{rand}";

/// What an `http:` URL may be, for error messages.
const ALLOWED: &str = "allowed: http://HOST[:PORT]/PATH, or /PATH on the run's server";

/// Where a relative `http:/PATH` spec is checked when the run's server is not known yet (the
/// plan is built before concur starts its own server); never connected to.
const PLACEHOLDER_BASE: &str = "http://127.0.0.1:0";

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
    Ok(Arc::new(Http {
        spec_url: args.to_string(),
        host: target.host,
        connect: target.connect,
        path: target.path,
        delay,
        relative,
        has_base: opts.base_url.is_some(),
        timeout: Duration::from_millis(opts.request_timeout_ms.max(1)),
        nonce: crate::measure::mono_ns() ^ u64::from(std::process::id()) << 32,
        addr: OnceLock::new(),
        agent: OnceLock::new(),
        async_pool: Mutex::new(Vec::new()),
        green_pool: Mutex::new(Vec::new()),
    }))
}

/// A checked URL, split the way the clients use it.
#[derive(Debug, PartialEq)]
struct Target {
    /// The `Host` header: host as the URL parser normalised it, and the port if one was given.
    host: String,
    /// `HOST:PORT` to resolve and connect to (IPv6 literals in brackets).
    connect: String,
    /// The request target as given (origin form: `/PATH?QUERY`), `{rand}` still in it.
    path: String,
}

impl Target {
    /// Checks `text`, naming it as `shown` in errors; `placeholder` allows port 0 (see
    /// [`PLACEHOLDER_BASE`]).
    fn parse(text: &str, shown: &str, placeholder: bool) -> Result<Target, String> {
        let refuse = |why: String| Err(format!("URL '{shown}' {why} ({ALLOWED})"));
        // Letters are valid wherever `{rand}` may stand, so the URL is checked as it is sent.
        let sample = text.replace(RAND, &letters(0));
        let url = match url::Url::parse(&sample) {
            Ok(u) => u,
            Err(e) => return refuse(format!("does not parse: {e}")),
        };
        match url.scheme() {
            "http" => {}
            "https" => {
                return Err(format!(
                    "URL '{shown}': https:// is not supported yet ({ALLOWED})"
                ))
            }
            other => return refuse(format!("has the scheme '{other}:', which is not supported")),
        }
        // The URL parser forgives `http:host` and `http:///host` (WHATWG); the authority is
        // taken from the text, so it must be spelled out after `http://`.
        let rest = match text.get(..7) {
            Some(p) if p.eq_ignore_ascii_case("http://") => &text[7..],
            _ => return refuse("must start with http://".into()),
        };
        let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if authority.is_empty() {
            return refuse("has no host".into());
        }
        if authority.contains(RAND) {
            return refuse(format!(
                "has {RAND} in the host; it may stand in the path or query only"
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return refuse("has user:password@ in it, which is not supported".into());
        }
        // What the parser read as the authority must be all of the text before the path:
        // `http://h\x/` is host `h` and path `/x/` to it, but not to a server reading `h\x`.
        let alone = url::Url::parse(&format!("http://{authority}/")).ok();
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
        let connect = match host {
            url::Host::Ipv6(ip) => format!("[{ip}]:{port}"),
            url::Host::Ipv4(ip) => format!("{ip}:{port}"),
            url::Host::Domain(d) => format!("{d}:{port}"),
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
        let sent = path.replace(RAND, &letters(0));
        if sent.parse::<hyper::Uri>().is_err() {
            return refuse(format!(
                "has the path '{path}', which cannot be sent as it is (percent-encode spaces, quotes and control characters)"
            ));
        }
        Ok(Target {
            host,
            connect,
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

/// GET requests to one server.
pub struct Http {
    spec_url: String,
    /// The `Host` header and the authority of the URLs handed to ureq and libcurl.
    host: String,
    /// `HOST:PORT` to resolve.
    connect: String,
    /// The request target, `{rand}` still in it.
    path: String,
    delay: Option<Duration>,
    relative: bool,
    has_base: bool,
    timeout: Duration,
    nonce: u64,
    addr: OnceLock<Result<SocketAddr, String>>,
    agent: OnceLock<ureq::Agent>,
    async_pool: Mutex<Vec<SendRequest<Empty<Bytes>>>>,
    /// Idle coroutine connections, buffered: a response head and its body usually arrive in
    /// one read, and the buffer keeps what `httparse` did not consume for the body.
    green_pool: Mutex<Vec<BufReader<may::net::TcpStream>>>,
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

impl Http {
    fn path_for(&self, index: usize) -> String {
        if self.path.contains(RAND) {
            self.path
                .replace(RAND, &letters(self.nonce.wrapping_add(index as u64)))
        } else {
            self.path.clone()
        }
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
            ureq::AgentBuilder::new()
                .timeout(self.timeout)
                .max_idle_connections(100_000)
                .max_idle_connections_per_host(100_000)
                .build()
        })
    }

    fn fetch_blocking(&self, index: usize) -> Result<u64, TaskError> {
        self.check_server()?;
        let url = format!("http://{}{}", self.host, self.path_for(index));
        let resp = match self.agent().get(&url).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                // Drain so the connection can be reused.
                let _ = std::io::copy(&mut r.into_reader(), &mut std::io::sink());
                return Err(status_error(code));
            }
            Err(ureq::Error::Transport(t)) => {
                let text = t.to_string();
                let kind = if text.contains("timed out") || text.contains("Timeout") {
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

    async fn connect_async(&self) -> Result<SendRequest<Empty<Bytes>>, TaskError> {
        let addr = self.addr_async().await?;
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| err("connect", format!("{addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| err("connect", e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    async fn fetch_async(&self, index: usize) -> Result<u64, TaskError> {
        let pooled = self
            .async_pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        let mut sender = match pooled {
            Some(s) if !s.is_closed() => s,
            _ => self.connect_async().await?,
        };
        sender
            .ready()
            .await
            .map_err(|e| err("connect", e.to_string()))?;
        let req = hyper::Request::get(self.path_for(index))
            .header(hyper::header::HOST, self.host.as_str())
            .body(Empty::<Bytes>::new())
            .map_err(|e| err("request", e.to_string()))?;
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
        if !sender.is_closed() {
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

    fn fetch_green(&self, index: usize) -> Result<u64, TaskError> {
        let addr = self.addr()?;
        let pooled = self
            .green_pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        let mut stream = match pooled {
            Some(s) => s,
            None => {
                let s = may::net::TcpStream::connect(addr)
                    .map_err(|e| err("connect", format!("{addr}: {e}")))?;
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(self.timeout));
                let _ = s.set_write_timeout(Some(self.timeout));
                BufReader::with_capacity(16 << 10, s)
            }
        };
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: concur\r\n\r\n",
            self.path_for(index),
            self.host
        );
        let io = |e: std::io::Error| {
            let kind = match e.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timeout",
                _ => "read",
            };
            err(kind, e.to_string())
        };
        stream.get_mut().write_all(request.as_bytes()).map_err(io)?;
        let (status, n, keep) = read_response(&mut stream).map_err(io)?;
        if keep {
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
    let head = read_head(s)?;
    let n = match head.body {
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
        Some(format!("http://{}{}", self.host, self.path_for(index)))
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
            (
                "https://h/x",
                "'https://h/x': https:// is not supported yet",
            ),
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
