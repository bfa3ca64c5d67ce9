//! What an `http:` spec and the request flags may be, checked once when the plan is built:
//! the URL (the `url` crate's WHATWG rules, then what every client can send), `--method`,
//! `-H`, and the server-side delay a URL asks for (the workload's nature).
//!
//! A URL that cannot work is refused here, not task by task: it must parse as a URL, use
//! `http://` or `https://`, name a host and a usable port, and have a path and query that
//! hyper accepts as a request target.

use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use rustls::pki_types::ServerName;

use super::request::{letters, INDEX, RAND};
use crate::base::units;

/// What an `http:` URL may be, for error messages.
const ALLOWED: &str =
    "allowed: http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH, or /PATH on the run's server";

/// Where a relative `http:/PATH` spec is checked when the run's server is not known yet (the
/// plan is built before concur starts its own server); never connected to.
const PLACEHOLDER_BASE: &str = "http://127.0.0.1:0";

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

/// Reads the URL of an `http:` spec: a `/PATH` is joined to the run's server `base_url`, or
/// checked against a placeholder while that server is not known yet.
pub(super) fn read_url(args: &str, base_url: Option<&str>) -> Result<Target, String> {
    if args.is_empty() {
        return Err("missing URL".into());
    }
    let relative = args.starts_with('/');
    let full = if relative {
        let base = base_url.unwrap_or(PLACEHOLDER_BASE);
        format!("{}{args}", base.trim_end_matches('/'))
    } else {
        args.to_string()
    };
    // Without the server's URL, name the spec's own text: the placeholder means nothing to a user.
    let shown = if relative && base_url.is_none() {
        args
    } else {
        full.as_str()
    };
    Target::parse(&full, shown, relative && base_url.is_none())
}

/// Where an `http:` spec's requests connect (`HOST:PORT`, IPv6 literals in brackets), its
/// `/PATH` joined to `base_url`: what [`crate::workload::outside`] checks before the spec is
/// parsed.
pub(crate) fn connect_address(args: &str, base_url: Option<&str>) -> Result<String, String> {
    read_url(args, base_url).map(|t| t.connect)
}

/// A checked URL, split the way the clients use it.
#[derive(Debug, PartialEq)]
pub(super) struct Target {
    /// `https://`.
    pub(super) tls: bool,
    /// The `Host` header: host as the URL parser normalised it, and the port if one was given.
    pub(super) host: String,
    /// `HOST:PORT` to resolve and connect to (IPv6 literals in brackets).
    pub(super) connect: String,
    /// The name TLS sends (SNI, for a domain) and verifies the certificate against.
    pub(super) server_name: ServerName<'static>,
    /// The request target as given (origin form: `/PATH?QUERY`), `{rand}` still in it.
    pub(super) path: String,
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
pub(super) fn delay_of(path: &str) -> Option<Duration> {
    let (p, query) = path.split_once('?').unwrap_or((path, ""));
    if let Some(d) = p.strip_prefix("/delay/") {
        return units::parse_duration(d).ok();
    }
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "delay")
        .and_then(|(_, v)| v.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        // A finite delay can still be past what a Duration holds (`delay=1e300`): none then.
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1e3).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_past_what_a_duration_holds_is_no_delay_and_no_panic() {
        assert_eq!(delay_of("/add?delay=1e300"), None);
        assert_eq!(delay_of("/add?delay=250"), Some(Duration::from_millis(250)));
    }

    const BASE: Option<&str> = Some("http://127.0.0.1:9");

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
        let https = t("https://Example.com/");
        assert!(https.tls);
        assert_eq!(https.connect, "example.com:443");
        // The run's server, before it is known, may be checked against a placeholder.
        assert!(read_url("/add?x={rand}", None).is_ok());
        // A bare query is asked of `/`; a fragment is never sent.
        assert_eq!(t("http://h:1?delay=5#frag").path, "/?delay=5");
    }

    #[test]
    fn urls_that_cannot_work_are_refused_naming_the_value() {
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
            let e = match read_url(url, BASE) {
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
        let e = read_url("/a b", None).err().unwrap();
        assert!(e.contains("'/a b'"), "{e}");
        let e = read_url("/a b", BASE).err().unwrap();
        assert!(e.contains("'http://127.0.0.1:9/a b'"), "{e}");
    }

    #[test]
    fn methods_and_header_lines_are_checked_naming_the_value() {
        assert!(check_header("NoColon").unwrap_err().contains("no colon"));
        assert!(check_header("Bad Name: v")
            .unwrap_err()
            .contains("not a header name"));
        assert_eq!(
            check_header("Authorization:  Bearer k ").unwrap(),
            ("Authorization".to_string(), "Bearer k".to_string())
        );
        assert!(check_header("X: a\u{1}b")
            .unwrap_err()
            .contains("cannot be sent"));
        assert!(check_method("GE T").is_err());
        assert_eq!(check_method("PATCH").unwrap(), hyper::Method::PATCH);
    }

    #[test]
    fn delays_are_read_as_the_server_reads_them() {
        let ms = |n| Some(Duration::from_millis(n));
        assert_eq!(delay_of("/add?name=a&delay=100"), ms(100));
        assert_eq!(delay_of("/delay/250ms"), ms(250));
        assert_eq!(delay_of("/add?delay=%32%35"), ms(25));
        assert_eq!(delay_of("/bytes/5"), None);
        assert_eq!(delay_of("/add?delay=-1"), None);
    }
}
