//! `http:URL`: one GET per task, counting the body bytes actually read.
//!
//! `http:http://HOST:PORT/PATH` goes to that server; `http:/PATH` goes to the server of the
//! run (`--url`, or the in-process `concur serve` a study starts). A `{rand}` in the URL
//! becomes 10 random lowercase letters; without one they are appended, as the classic crawler
//! did, so no two requests are alike.
//!
//! Three clients, one per kind of model: blocking models use ureq (one agent, keep-alive
//! connections shared by the workers), async models raw hyper HTTP/1 connections from a small
//! pool (no layers beyond that), and the green model a minimal HTTP/1.1 client on `may`'s
//! coroutine sockets. The `curl` model drives libcurl itself from [`Workload::url`].

use std::io::{BufReader, Read, Write};
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
    help: "GET URL (http://HOST:PORT/PATH, or /PATH on the run's server); {rand} becomes 10 random letters",
    parse,
};

fn parse(args: &str, opts: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    if args.is_empty() {
        return Err("missing URL".into());
    }
    let relative = args.starts_with('/');
    if !relative && !args.starts_with("http://") {
        return Err(format!(
            "URL '{args}' must start with http:// (TLS is not supported) or / (the run's server)"
        ));
    }
    let full = if relative {
        match &opts.base_url {
            Some(base) => format!("{}{args}", base.trim_end_matches('/')),
            None => format!("http://127.0.0.1:0{args}"),
        }
    } else {
        args.to_string()
    };
    let rest = &full["http://".len()..];
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("URL '{args}' has no usable host"));
    }
    let delay = delay_of(path);
    Ok(Arc::new(Http {
        spec_url: args.to_string(),
        authority: authority.to_string(),
        path: path.to_string(),
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

/// The server-side delay a URL asks for: `/add?...delay=MS` or `/delay/DURATION`.
fn delay_of(path: &str) -> Option<Duration> {
    let (p, query) = path.split_once('?').unwrap_or((path, ""));
    if let Some(d) = p.strip_prefix("/delay/") {
        return units::parse_duration(d).ok();
    }
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("delay="))
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
}

/// GET requests to one server.
pub struct Http {
    spec_url: String,
    authority: String,
    path: String,
    delay: Option<Duration>,
    relative: bool,
    has_base: bool,
    timeout: Duration,
    nonce: u64,
    addr: OnceLock<Result<SocketAddr, String>>,
    agent: OnceLock<ureq::Agent>,
    async_pool: Mutex<Vec<SendRequest<Empty<Bytes>>>>,
    /// Idle coroutine connections, buffered: the response parser reads headers a byte at a
    /// time, which must come from the buffer, not one system call each.
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
        let r = letters(self.nonce.wrapping_add(index as u64));
        if self.path.contains("{rand}") {
            self.path.replace("{rand}", &r)
        } else {
            format!("{}{r}", self.path)
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
                self.authority
                    .to_socket_addrs()
                    .map_err(|e| format!("cannot resolve '{}': {e}", self.authority))?
                    .next()
                    .ok_or_else(|| format!("'{}' resolves to no address", self.authority))
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
        let url = format!("http://{}{}", self.authority, self.path_for(index));
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
        let resolved = match tokio::net::lookup_host(self.authority.as_str()).await {
            Ok(mut addrs) => addrs
                .next()
                .ok_or_else(|| format!("'{}' resolves to no address", self.authority)),
            Err(e) => Err(format!("cannot resolve '{}': {e}", self.authority)),
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
            .header(hyper::header::HOST, self.authority.as_str())
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
            self.authority
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

/// Reads one HTTP/1.1 response: (status, body bytes read, whether the connection stays
/// open). Handles `Content-Length` and chunked bodies.
pub fn read_response(s: &mut impl Read) -> std::io::Result<(u16, u64, bool)> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut head = Vec::with_capacity(512);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(bad("connection closed before the response headers"));
        }
        head.push(byte[0]);
        if head.len() > 64 << 10 {
            return Err(bad("response headers over 64 KiB"));
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let (mut length, mut chunked, mut keep) = (None, false, true);
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
        match k.as_str() {
            "content-length" => length = v.parse::<u64>().ok(),
            "transfer-encoding" => chunked = v.contains("chunked"),
            "connection" => keep = !v.contains("close"),
            _ => {}
        }
    }
    let mut n = 0u64;
    let mut buf = [0u8; 16 << 10];
    if chunked {
        loop {
            let mut size_line = Vec::new();
            while !size_line.ends_with(b"\r\n") {
                if s.read(&mut byte)? == 0 {
                    return Err(bad("connection closed in a chunk header"));
                }
                size_line.push(byte[0]);
            }
            let hex = String::from_utf8_lossy(&size_line);
            let size = u64::from_str_radix(hex.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("bad chunk size"))?;
            let mut left = size + 2;
            while left > 0 {
                let want = left.min(buf.len() as u64) as usize;
                let got = s.read(&mut buf[..want])?;
                if got == 0 {
                    return Err(bad("connection closed in a chunk"));
                }
                left -= got as u64;
            }
            n += size;
            if size == 0 {
                break;
            }
        }
    } else if let Some(mut left) = length {
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let got = s.read(&mut buf[..want])?;
            if got == 0 {
                return Err(bad("connection closed in the body"));
            }
            left -= got as u64;
            n += got as u64;
        }
    } else {
        loop {
            let got = s.read(&mut buf)?;
            if got == 0 {
                break;
            }
            n += got as u64;
        }
        keep = false;
    }
    Ok((status, n, keep))
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
        Some(format!("http://{}{}", self.authority, self.path_for(index)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_random_letters_and_delays_are_read() {
        let o = WorkloadOptions {
            base_url: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        let w = parse("/add?name=a{rand}&delay=100", &o).unwrap();
        assert_eq!(w.nature(), Nature::Delay(Duration::from_millis(100)));
        let (u0, u1) = (w.url(0).unwrap(), w.url(1).unwrap());
        assert!(u0.starts_with("http://127.0.0.1:9/add?name=a") && u0.ends_with("&delay=100"));
        assert_ne!(u0, u1);
        assert_eq!(w.spec(), "http:/add?name=a{rand}&delay=100");
        let appended = parse("http://h:1/add?name=", &o).unwrap();
        assert_eq!(
            appended.url(3).unwrap().len(),
            "http://h:1/add?name=".len() + 10
        );
        assert_eq!(
            parse("http://h:1/delay/250ms", &o).unwrap().nature(),
            Nature::Delay(Duration::from_millis(250))
        );
        assert_eq!(
            parse("http://h:1/bytes/5", &o).unwrap().nature(),
            Nature::Network
        );
        assert!(parse("https://h/x", &o).is_err());
        assert!(parse("", &o).is_err());
    }

    #[test]
    fn responses_are_read_by_length_and_chunks() {
        let mut r: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(read_response(&mut r).unwrap(), (200, 5, true));
        let mut c: &[u8] = b"HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(read_response(&mut c).unwrap(), (503, 5, false));
    }
}
