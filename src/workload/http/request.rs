//! The one request builder: what task `i` sends, decided once for every client. ureq, hyper,
//! the green client and libcurl only carry out the [`HttpRequest`] made here, so a server sees
//! one request head whichever model made it (they had drifted apart: each stack added its own
//! `User-Agent` and `Accept`, or none). oha builds every request in one generator for the
//! same reason.
//!
//! The head is: `Host`, `User-Agent: concur/VERSION`, `Accept: */*`, the `-H` headers in the
//! order given, `Connection: close` without keep-alive, `Content-Length` with a body. A `-H`
//! header of a name already there replaces it in its place (never two `User-Agent`s); names
//! are written in `Title-Case`, the one case besides lowercase that hyper can write. Every
//! `{rand}` in the target, the header values and the body becomes the same 10 letters for one
//! task, and every `{i}` the task's index.
//!
//! Over HTTP/2 the same head goes out as [`HttpRequest::into_http2`] converts it: `Host`
//! becomes the `:authority` (of [`HttpRequest::url`]) and the connection-specific headers are
//! left out (RFC 9113 §8.2.2).

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt::Write;

use bytes::Bytes;
use hyper::header::HeaderName;

use crate::workload::WorkloadOptions;

/// The placeholder that becomes 10 random letters in every request.
pub const RAND: &str = "{rand}";

/// The placeholder that becomes the task's index.
pub const INDEX: &str = "{i}";

/// The `User-Agent` every request sends unless `-H` gives one.
pub const USER_AGENT: &str = concat!("concur/", env!("CARGO_PKG_VERSION"));

/// One task's HTTP request as every client sends it, placeholders filled in. A client adds,
/// drops and renames nothing; a model that makes requests itself (`curl`) gets it from
/// [`crate::workload::HttpTasks::http_request`].
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    /// The method, e.g. `GET`.
    pub method: String,
    /// The whole URL, for the clients that take one (ureq, libcurl): the scheme, the server's
    /// authority and [`HttpRequest::target`].
    pub url: String,
    /// What the request line asks for (origin form: `/PATH?QUERY`), for the clients that write
    /// the request line themselves (hyper, the green client).
    pub target: String,
    /// Every header, in the order to write them, names in `Title-Case`.
    pub headers: Vec<(String, String)>,
    /// The body, if any (then `headers` holds its `Content-Length`).
    pub body: Option<Bytes>,
}

/// The headers HTTP/2 forbids in a request, as they belong to one HTTP/1.1 connection
/// (RFC 9113 §8.2.2; `TE` is allowed only as `TE: trailers`).
pub const CONNECTION_SPECIFIC: &[&str] = &[
    "Connection",
    "Proxy-Connection",
    "Keep-Alive",
    "Transfer-Encoding",
    "Upgrade",
];

impl HttpRequest {
    /// Whether the method is `HEAD`, whose response has no body whatever its headers say.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// The request as HTTP/2 sends it: `Host`'s value becomes the authority of
    /// [`HttpRequest::url`] (which an HTTP/2 client sends as `:authority`, with `:scheme` and
    /// `:path` from the rest of it), and the connection-specific headers (`Connection`,
    /// `Keep-Alive`, …: `CONNECTION_SPECIFIC`) and a `TE` other than `trailers` are left out.
    /// Every other header stays, in its order.
    pub fn into_http2(mut self) -> HttpRequest {
        let host = self
            .headers
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case("Host"))
            .map(|i| self.headers.remove(i).1);
        if let (Some(host), Some((scheme, _))) = (host, self.url.split_once("://")) {
            self.url = format!("{scheme}://{host}{}", self.target);
        }
        self.headers.retain(|(n, v)| {
            let connection_specific = CONNECTION_SPECIFIC
                .iter()
                .any(|c| n.eq_ignore_ascii_case(c));
            let te_not_trailers =
                n.eq_ignore_ascii_case("TE") && !v.eq_ignore_ascii_case("trailers");
            !connection_specific && !te_not_trailers
        });
        self
    }
}

/// Makes every task's [`HttpRequest`] from the workload's spec and options.
#[derive(Debug)]
pub(super) struct RequestBuilder {
    method: String,
    /// `SCHEME://AUTHORITY`, the start of every URL.
    origin: String,
    /// The request target, placeholders still in it.
    path: String,
    /// Every header but `Content-Length` (the body's, which a placeholder may change), in
    /// order, placeholders still in the values.
    headers: Vec<(String, String)>,
    /// Whether `-H` gave a `Content-Length`, which then stands instead of the body's.
    length_given: bool,
    body: Option<Bytes>,
    /// Whether the body holds `{rand}` or `{i}`.
    body_templated: bool,
    /// Seeds the letters of `{rand}` (with the task's index): different in every run.
    nonce: u64,
}

impl RequestBuilder {
    /// The builder for `method` requests of `path` on `origin` (`SCHEME://AUTHORITY`), whose
    /// `Host` is `host`; headers, body and keep-alive from `opts`.
    pub(super) fn new(
        method: &hyper::Method,
        origin: String,
        host: String,
        path: String,
        opts: &WorkloadOptions,
    ) -> Result<RequestBuilder, String> {
        let mut headers = vec![
            ("Host".to_string(), host),
            ("User-Agent".to_string(), USER_AGENT.to_string()),
            ("Accept".to_string(), "*/*".to_string()),
        ];
        for (name, value) in &opts.headers {
            if HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("-H: '{name}' is not a header name"));
            }
            let name = title_case(name);
            match headers
                .iter_mut()
                .find(|(n, _)| n.eq_ignore_ascii_case(&name))
            {
                Some(kept) => kept.1 = value.clone(),
                None => headers.push((name, value.clone())),
            }
        }
        let given = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        let length_given = given("Content-Length");
        if !opts.keepalive && !given("Connection") {
            headers.push(("Connection".to_string(), "close".to_string()));
        }
        let body = opts.body.clone().map(Bytes::from);
        let body_templated = body
            .as_ref()
            .is_some_and(|b| find(b, RAND.as_bytes()) || find(b, INDEX.as_bytes()));
        Ok(RequestBuilder {
            method: method.to_string(),
            origin,
            path,
            headers,
            length_given,
            body,
            body_templated,
            nonce: crate::measure::mono_ns() ^ u64::from(std::process::id()) << 32,
        })
    }

    /// Task `index`'s request.
    pub(super) fn build(&self, index: usize) -> HttpRequest {
        let fill = Fill::new(self.nonce, index);
        let target = fill.text(&self.path).into_owned();
        let body = self.body.as_ref().map(|b| {
            if self.body_templated {
                fill.bytes(b)
            } else {
                b.clone()
            }
        });
        let mut headers = Vec::with_capacity(self.headers.len() + 1);
        headers.extend(
            self.headers
                .iter()
                .map(|(n, v)| (n.clone(), fill.text(v).into_owned())),
        );
        if let Some(b) = body.as_ref().filter(|_| !self.length_given) {
            headers.push(("Content-Length".to_string(), b.len().to_string()));
        }
        HttpRequest {
            method: self.method.clone(),
            url: format!("{}{target}", self.origin),
            target,
            headers,
            body,
        }
    }

    /// Whether every task's request is the same but for its target: no header value and no
    /// body holds a placeholder. A client may then make task 0's head once and give each task
    /// its own [`RequestBuilder::target`] in it.
    pub(super) fn only_target_varies(&self) -> bool {
        !self.body_templated
            && !self
                .headers
                .iter()
                .any(|(_, v)| v.contains(RAND) || v.contains(INDEX))
    }

    /// Task `index`'s request target alone ([`HttpRequest::target`] of its request).
    pub(super) fn target(&self, index: usize) -> String {
        Fill::new(self.nonce, index).text(&self.path).into_owned()
    }

    /// Task `index`'s URL alone.
    pub(super) fn url(&self, index: usize) -> String {
        let fill = Fill::new(self.nonce, index);
        format!("{}{}", self.origin, fill.text(&self.path))
    }
}

/// Fills the placeholders for one task: the letters of `{rand}` are made once, when first
/// needed, so that the target, the headers and the body of a task share them.
struct Fill {
    seed: u64,
    index: usize,
    letters: OnceCell<String>,
}

impl Fill {
    fn new(nonce: u64, index: usize) -> Fill {
        Fill {
            seed: nonce.wrapping_add(index as u64),
            index,
            letters: OnceCell::new(),
        }
    }

    fn letters(&self) -> &str {
        self.letters.get_or_init(|| letters(self.seed))
    }

    /// `s` with `{rand}` and `{i}` filled in, in one pass and one allocation.
    fn text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if !s.contains(RAND) && !s.contains(INDEX) {
            return Cow::Borrowed(s);
        }
        let mut out = String::with_capacity(s.len() + 16);
        let mut rest = s;
        while let Some(at) = rest.find('{') {
            out.push_str(&rest[..at]);
            let from = &rest[at..];
            rest = if let Some(after) = from.strip_prefix(RAND) {
                out.push_str(self.letters());
                after
            } else if let Some(after) = from.strip_prefix(INDEX) {
                let _ = write!(out, "{}", self.index);
                after
            } else {
                out.push('{');
                &from[1..]
            };
        }
        out.push_str(rest);
        Cow::Owned(out)
    }

    /// `b` with `{rand}` and `{i}` filled in.
    fn bytes(&self, b: &[u8]) -> Bytes {
        let b = replace_bytes(b, RAND.as_bytes(), self.letters().as_bytes());
        Bytes::from(replace_bytes(
            &b,
            INDEX.as_bytes(),
            self.index.to_string().as_bytes(),
        ))
    }
}

/// 10 lowercase letters from a seed (splitmix64), for cache-busting URLs.
pub fn letters(seed: u64) -> String {
    let mut x = seed;
    let mut out = [0u8; 10];
    for b in &mut out {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        *b = b'a' + (z % 26) as u8;
    }
    // Made as bytes, not collected char by char (400 instructions a request, more than the
    // HTTP/2 client's whole encoding of one): lowercase letters are always UTF-8.
    String::from_utf8(out.to_vec()).unwrap_or_default()
}

/// A header name as hyper writes it with `title_case_headers`: the first letter and every
/// letter after a `-` upper case, the others lower case.
fn title_case(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(method: &str, path: &str, opts: &WorkloadOptions) -> RequestBuilder {
        let method = hyper::Method::from_bytes(method.as_bytes()).unwrap();
        let (origin, host) = ("http://h:1".to_string(), "h:1".to_string());
        RequestBuilder::new(&method, origin, host, path.into(), opts).unwrap()
    }

    fn names(r: &HttpRequest) -> Vec<&str> {
        r.headers.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn every_request_has_one_head_filled_per_task() {
        let o = WorkloadOptions {
            headers: vec![("x-task".into(), "n{i}-{rand}".into())],
            body: Some(b"id={i}&r={rand}".to_vec()),
            ..Default::default()
        };
        let r = builder("POST", "/x?i={i}&r={rand}", &o).build(7);
        assert_eq!(r.method, "POST");
        let rand = &r.target["/x?i=7&r=".len()..];
        assert_eq!(rand.len(), 10);
        assert_eq!(r.url, format!("http://h:1/x?i=7&r={rand}"));
        let body = format!("id=7&r={rand}");
        assert_eq!(r.body.as_deref(), Some(body.as_bytes()));
        let want = [
            ("Host", "h:1".to_string()),
            (
                "User-Agent",
                format!("concur/{}", env!("CARGO_PKG_VERSION")),
            ),
            ("Accept", "*/*".to_string()),
            ("X-Task", format!("n7-{rand}")),
            ("Content-Length", body.len().to_string()),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        assert_eq!(r.headers, want);
        assert!(!r.is_head());
        // Without a body there is no length; without placeholders every task is the same.
        let get = builder("GET", "/same", &WorkloadOptions::default());
        assert_eq!(names(&get.build(0)), ["Host", "User-Agent", "Accept"]);
        assert_eq!(get.build(1), get.build(2));
        assert_eq!(get.url(3), "http://h:1/same");
    }

    #[test]
    fn a_header_given_replaces_ours_in_its_place() {
        let o = WorkloadOptions {
            headers: vec![
                ("user-agent".into(), "mine".into()),
                ("X-API-key".into(), "a".into()),
                ("ACCEPT".into(), "text/plain".into()),
                ("x-api-KEY".into(), "b".into()),
                ("content-length".into(), "0".into()),
            ],
            body: Some(b"xyz".to_vec()),
            keepalive: false,
            ..Default::default()
        };
        let r = builder("PUT", "/", &o).build(0);
        let want = [
            ("Host", "h:1"),
            ("User-Agent", "mine"),
            ("Accept", "text/plain"),
            ("X-Api-Key", "b"),
            ("Content-Length", "0"),
            ("Connection", "close"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(r.headers, want);
        let o = WorkloadOptions {
            headers: vec![("Connection".into(), "keep-alive".into())],
            keepalive: false,
            ..Default::default()
        };
        let r = builder("HEAD", "/", &o).build(0);
        assert_eq!(r.headers[3], ("Connection".into(), "keep-alive".into()));
        assert_eq!(r.headers.len(), 4);
        assert!(r.is_head());
    }

    #[test]
    fn http2_sends_host_as_the_authority_and_no_connection_headers() {
        let o = WorkloadOptions {
            headers: vec![
                ("Host".into(), "other:8".into()),
                ("Upgrade".into(), "h2c".into()),
                ("X-Keep".into(), "1".into()),
                ("Keep-Alive".into(), "timeout=5".into()),
                ("TE".into(), "gzip".into()),
            ],
            body: Some(b"b".to_vec()),
            keepalive: false,
            ..Default::default()
        };
        let r = builder("POST", "/p?q={i}", &o).build(3).into_http2();
        assert_eq!(r.url, "http://other:8/p?q=3");
        assert_eq!(r.target, "/p?q=3");
        assert_eq!(
            names(&r),
            ["User-Agent", "Accept", "X-Keep", "Content-Length"]
        );
        let o = WorkloadOptions {
            headers: vec![("te".into(), "Trailers".into())],
            ..Default::default()
        };
        let r = builder("GET", "/", &o).build(0).into_http2();
        assert_eq!(r.url, "http://h:1/");
        assert_eq!(names(&r), ["User-Agent", "Accept", "Te"]);
    }

    #[test]
    fn placeholders_are_filled_in_one_pass_as_written() {
        let fill = Fill::new(1, 42);
        let l = fill.letters().to_string();
        for (given, want) in [
            ("/plain", "/plain".to_string()),
            ("/{x}{", "/{x}{".to_string()),
            ("{i}", "42".to_string()),
            (
                "/a?r={rand}&i={i}&again={rand}",
                format!("/a?r={l}&i=42&again={l}"),
            ),
            ("{{rand}}", format!("{{{l}}}")),
            ("{ran{i}d}", "{ran42d}".to_string()),
            ("{rand", "{rand".to_string()),
        ] {
            assert_eq!(fill.text(given), want, "{given}");
        }
        let o = WorkloadOptions::default();
        let b = builder("GET", "/t/{i}", &o);
        assert!(b.only_target_varies());
        assert_eq!(b.target(5), b.build(5).target);
        let o = WorkloadOptions {
            headers: vec![("x-n".into(), "{i}".into())],
            ..Default::default()
        };
        assert!(!builder("GET", "/", &o).only_target_varies());
        let o = WorkloadOptions {
            body: Some(b"{rand}".to_vec()),
            ..Default::default()
        };
        assert!(!builder("POST", "/", &o).only_target_varies());
    }

    #[test]
    fn names_are_written_in_title_case() {
        for (given, written) in [
            ("x-test", "X-Test"),
            ("X-API-KEY", "X-Api-Key"),
            ("etag", "Etag"),
            ("a--b", "A--B"),
            ("x_y", "X_y"),
        ] {
            assert_eq!(title_case(given), written);
        }
    }
}
