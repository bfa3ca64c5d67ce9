//! Where a queue lives: the user's `--jobs-backend` text, parsed once into a
//! [`BackendUrl`] that everything downstream matches on. Its `Display` and `Debug` hide a
//! Redis password; only [`BackendUrl::expose`] gives the full text, for the Redis client and
//! for the child processes that must open the same queue.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use redis::IntoConnectionInfo;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base::error::{Error, Result};
use crate::base::secret::{mask_credentials, passwords, MASK};

/// The environment variable that names the queue when `--jobs-backend` is not given: a
/// process's environment is readable by its own user only, where its argv is shown to every
/// user by `ps`, so a Redis password belongs there. concur also hands the backend to the
/// processes it starts (`--peer` programs, hooks) through it.
pub const BACKEND_ENV: &str = "CONCUR_JOBS_BACKEND";

/// The backend URLs accepted, for errors.
pub const BACKEND_URLS: &str =
    "memory, sqlite, sqlite:PATH (either with ?synchronous=full or ?synchronous=normal), redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]";

/// When an SQLite queue's commits reach the disk (SQLite's `synchronous` pragma, in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SqliteSync {
    /// `NORMAL` (the default): the write-ahead log is synced at checkpoints, not at each
    /// commit. A crash of the process loses nothing; a power cut or a crash of the system may
    /// lose the last transactions: jobs enqueued then are gone, and jobs claimed or
    /// acknowledged then run again.
    #[default]
    Normal,
    /// `FULL` (`?synchronous=full`): every commit (an enqueue, a batch claimed, a batch
    /// acknowledged) is synced before it returns, so a power cut loses nothing acknowledged.
    Full,
}

impl SqliteSync {
    /// The pragma's value.
    pub fn pragma(self) -> &'static str {
        match self {
            SqliteSync::Normal => "NORMAL",
            SqliteSync::Full => "FULL",
        }
    }
}

/// A queue backend, parsed from `memory`, `sqlite`, `sqlite:PATH` or `redis://...`.
#[derive(Clone, PartialEq, Eq)]
pub enum BackendUrl {
    /// The in-process queue (`memory`): its jobs die with the process.
    Memory,
    /// SQLite. `None` (`sqlite`) is the default file: `concur-results/jobs.sqlite` for the
    /// `concur jobs` commands, a fresh file per run for the jobs models.
    Sqlite(Option<PathBuf>, SqliteSync),
    /// A Redis server.
    Redis(RedisUrl),
}

/// A Redis URL that the Redis client accepts. It may hold a password: it shows masked.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

/// The forms a flag that takes only a Redis server (`--hub`) accepts.
pub const REDIS_URLS: &str =
    "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or rediss://… for Redis over TLS";

impl RedisUrl {
    /// `flag`'s value, which must be a Redis URL (no connection is made); one line naming the
    /// flag and the value (its password masked) when it is not.
    pub fn parse_for(flag: &str, s: &str) -> Result<Self> {
        let bad = |why: String| {
            Error::flag(
                flag,
                format!(
                    "{flag} '{}': {why} (allowed: {REDIS_URLS})",
                    shown_refused(s)
                ),
            )
        };
        if !(s.starts_with("redis://") || s.starts_with("rediss://")) {
            return Err(bad("not a Redis URL".into()));
        }
        match s.parse::<BackendUrl>() {
            Ok(BackendUrl::Redis(u)) => Ok(u),
            Ok(_) => Err(bad("not a Redis URL".into())),
            Err(e) => Err(bad(e.to_string())),
        }
    }

    /// Checks `url` with the Redis client's own parser (no connection is made). A blank or a
    /// control character is refused first: the client's parser drops tabs and encodes
    /// spaces, so `redis://:pa ss@host` has a password, which the masking (it reads a URL as
    /// one word) would show; found by the backend_url fuzz target.
    fn parse(url: &str) -> Result<Self> {
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::usage(format!(
                "bad backend '{}': a URL holds no blanks or control characters (write them as %20, %09… in a password) (allowed: {BACKEND_URLS})",
                shown_refused(url)
            )));
        }
        let url = RedisUrl(url.to_string());
        match url.0.as_str().into_connection_info() {
            Ok(_) => Ok(url),
            Err(e) => Err(Error::usage(format!(
                "bad backend '{url}': {} (allowed: {BACKEND_URLS})",
                url.scrub(&e.to_string())
            ))),
        }
    }

    /// The full URL, password included: for the Redis client only; never print it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The warning for a password that crosses the network in clear text: a `redis://` URL
    /// (not `rediss://`) with a password, to a host other than loopback (127.0.0.0/8, `::1`,
    /// `localhost`), which the Redis `AUTH` command then sends as it is. `flag` names where
    /// the URL came from. No name is resolved: a host name other than `localhost` is taken
    /// for a remote one.
    pub fn cleartext_password_warning(&self, flag: &str) -> Option<String> {
        let info = self.0.as_str().into_connection_info().ok()?;
        let redis::ConnectionAddr::Tcp(host, _) = info.addr() else {
            return None;
        };
        let password = info
            .redis_settings()
            .password()
            .is_some_and(|p| !p.is_empty());
        (password && !is_loopback(host)).then(|| {
            format!(
                "{flag} '{self}': the password crosses the network in clear text; use rediss:// (TLS)"
            )
        })
    }

    /// Hides this URL's password in `text` (a message of ours or the Redis client's), as
    /// written and as decoded, wherever it appears: the client's errors are not ours to
    /// format, so we do not rely on them showing the password only inside the URL.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = mask_credentials(text);
        let decoded = self
            .0
            .as_str()
            .into_connection_info()
            .ok()
            .and_then(|i| i.redis_settings().password().map(str::to_string));
        let written = passwords(&self.0).into_iter().map(str::to_string);
        for secret in written.chain(decoded) {
            if !secret.is_empty() {
                out = out.replace(&secret, MASK);
            }
        }
        out
    }
}

/// Whether `host` (as the Redis client reads it from a URL) is this machine's loopback.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ipv4_mapped_loopback(ip))
}

/// `::ffff:127.x.y.z`, which is loopback as well.
fn ipv4_mapped_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        std::net::IpAddr::V4(_) => false,
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&mask_credentials(&self.0))
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({self})")
    }
}

impl BackendUrl {
    /// The full text, a Redis password included, for a child process's environment or
    /// request (never its command line): it parses back to the same value. Never print it
    /// (use `Display`).
    pub fn expose(&self) -> String {
        match self {
            BackendUrl::Redis(u) => u.expose().to_string(),
            other => other.to_string(),
        }
    }

    /// [`RedisUrl::cleartext_password_warning`] for a Redis backend; `None` for the others.
    pub fn cleartext_password_warning(&self, flag: &str) -> Option<String> {
        match self {
            BackendUrl::Redis(u) => u.cleartext_password_warning(flag),
            _ => None,
        }
    }

    /// Whether it is a Redis server (the `jobs-redis:W` model's backend).
    pub fn is_redis(&self) -> bool {
        matches!(self, BackendUrl::Redis(_))
    }
}

impl FromStr for BackendUrl {
    type Err = Error;

    /// Parses `memory`, `sqlite`, `sqlite:PATH` (or `sqlite://PATH`) and
    /// `redis://`/`rediss://` URLs; anything else is a one-line usage error naming the value
    /// (its password masked) and the allowed forms.
    fn from_str(s: &str) -> Result<Self> {
        if s == "memory" {
            return Ok(BackendUrl::Memory);
        }
        if s == "sqlite" || s.starts_with("sqlite:") || s.starts_with("sqlite?") {
            let (rest, sync) = match s.rsplit_once('?') {
                Some((rest, "synchronous=full")) => (rest, SqliteSync::Full),
                Some((rest, "synchronous=normal")) => (rest, SqliteSync::Normal),
                Some((_, setting)) => {
                    return Err(Error::usage(format!(
                        "bad backend '{}': unknown setting '{}' (allowed: {BACKEND_URLS})",
                        shown_refused(s),
                        shown_refused(setting)
                    )))
                }
                None => (s, SqliteSync::Normal),
            };
            if rest == "sqlite" {
                return Ok(BackendUrl::Sqlite(None, sync));
            }
            if let Some(path) = rest.strip_prefix("sqlite:") {
                let path = path.strip_prefix("//").unwrap_or(path);
                if path.is_empty() {
                    return Err(Error::usage(format!(
                        "bad backend '{}': sqlite:PATH needs a path (allowed: {BACKEND_URLS})",
                        shown_refused(s)
                    )));
                }
                return Ok(BackendUrl::Sqlite(Some(PathBuf::from(path)), sync));
            }
        }
        if s.starts_with("redis://") || s.starts_with("rediss://") {
            return RedisUrl::parse(s).map(BackendUrl::Redis);
        }
        Err(Error::usage(format!(
            "bad backend '{}' (allowed: {BACKEND_URLS})",
            shown_refused(s)
        )))
    }
}

/// How a refused value is shown: masked ([`mask_credentials`]); or, when it holds a blank or a
/// control character, where the masking (which reads a URL as one word) could stop short of
/// a password, its scheme alone.
fn shown_refused(s: &str) -> String {
    if !s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return mask_credentials(s);
    }
    match s.split_once("://") {
        Some((scheme, _)) if scheme.chars().all(|c| c.is_ascii_alphanumeric()) => {
            format!("{scheme}://{MASK}")
        }
        _ => MASK.to_string(),
    }
}

/// The form a user writes, the Redis password masked.
impl fmt::Display for BackendUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendUrl::Memory => f.write_str("memory"),
            BackendUrl::Sqlite(path, sync) => {
                match path {
                    None => f.write_str("sqlite")?,
                    // `sqlite:////tmp/q` is the path `//tmp/q`: written `sqlite:` alone it
                    // would read back as `sqlite://` and the path `tmp/q`, another file (found
                    // by the backend_url fuzz target).
                    Some(p) if p.as_os_str().as_encoded_bytes().starts_with(b"//") => {
                        write!(f, "sqlite://{}", p.display())?
                    }
                    Some(p) => write!(f, "sqlite:{}", p.display())?,
                }
                match sync {
                    SqliteSync::Normal => Ok(()),
                    SqliteSync::Full => f.write_str("?synchronous=full"),
                }
            }
            BackendUrl::Redis(u) => u.fmt(f),
        }
    }
}

impl fmt::Debug for BackendUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BackendUrl({self})")
    }
}

/// As the full text (see [`BackendUrl::expose`]): a child process opens the same queue.
impl Serialize for BackendUrl {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.expose())
    }
}

impl<'de> Deserialize<'de> for BackendUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> BackendUrl {
        s.parse().unwrap()
    }

    #[test]
    fn every_form_parses_into_its_variant() {
        assert_eq!(parse("memory"), BackendUrl::Memory);
        assert_eq!(
            parse("sqlite"),
            BackendUrl::Sqlite(None, SqliteSync::Normal)
        );
        assert_eq!(
            parse("sqlite:/tmp/q.db"),
            BackendUrl::Sqlite(Some("/tmp/q.db".into()), SqliteSync::Normal)
        );
        assert_eq!(
            parse("sqlite:///tmp/q.db"),
            BackendUrl::Sqlite(Some("/tmp/q.db".into()), SqliteSync::Normal)
        );
        assert_eq!(
            parse("sqlite:q.db"),
            BackendUrl::Sqlite(Some("q.db".into()), SqliteSync::Normal)
        );
        assert_eq!(
            parse("sqlite:q.db?synchronous=full"),
            BackendUrl::Sqlite(Some("q.db".into()), SqliteSync::Full)
        );
        let r = parse("redis://u:pw@127.0.0.1:6379/2");
        assert!(r.is_redis() && !parse("sqlite").is_redis());
        assert_eq!(r.expose(), "redis://u:pw@127.0.0.1:6379/2");
    }

    #[test]
    fn bad_forms_are_one_line_usage_errors_naming_the_value_masked() {
        for (bad, names) in [
            ("mysql://x", "'mysql://x'"),
            ("", "''"),
            ("sqlite:", "'sqlite:'"),
            ("sqlite:q.db?synchronous=extra", "'synchronous=extra'"),
            ("sqlite:?synchronous=full", "'sqlite:?synchronous=full'"),
            ("Memory", "'Memory'"),
            ("redis://", "'redis://'"),
            ("redis://h/notanumber", "'redis://h/notanumber'"),
            ("redis://:pw@h/x", "'redis://:***@h/x'"),
            ("mysql://root:pw@h/db", "'mysql://root:***@h/db'"),
        ] {
            let e = bad.parse::<BackendUrl>().unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, Error::Usage { .. }), "{bad}");
            assert!(msg.contains(names), "{bad}: {msg}");
            assert!(msg.contains(BACKEND_URLS), "{bad}: {msg}");
            assert!(!msg.contains("pw") && !msg.contains('\n'), "{bad}: {msg}");
        }
    }

    #[test]
    fn shown_masked_serialized_whole() {
        let u = parse("redis://:hunter2@host:6379/0");
        assert_eq!(u.to_string(), "redis://:***@host:6379/0");
        assert_eq!(format!("{u:?}"), "BackendUrl(redis://:***@host:6379/0)");
        assert_eq!(
            format!("{:?}", Some(&u)),
            "Some(BackendUrl(redis://:***@host:6379/0))"
        );
        let json = serde_json::to_string(&u).unwrap();
        assert_eq!(json, "\"redis://:hunter2@host:6379/0\"");
        assert_eq!(serde_json::from_str::<BackendUrl>(&json).unwrap(), u);
        for s in [
            "memory",
            "sqlite",
            "sqlite:/a/b.db",
            "sqlite:/a/b.db?synchronous=full",
            "sqlite?synchronous=full",
            "redis://h:1/0",
        ] {
            assert_eq!(parse(s).to_string(), s);
            assert_eq!(parse(&parse(s).expose()), parse(s));
        }
        assert!(serde_json::from_str::<BackendUrl>("\"mysql://x\"").is_err());
    }

    #[test]
    fn scrub_hides_the_password_written_or_decoded() {
        let BackendUrl::Redis(u) = parse("redis://:p%40ss@h/0") else {
            panic!("a redis URL")
        };
        assert_eq!(
            u.scrub("auth p@ss failed for redis://:p%40ss@h/0"),
            "auth *** failed for redis://:***@h/0"
        );
    }

    #[test]
    fn a_password_in_clear_text_off_loopback_is_warned_of() {
        let warning = |s: &str| parse(s).cleartext_password_warning("--jobs-backend");
        assert_eq!(
            warning("redis://:hunter2@10.0.0.5:6379/0").as_deref(),
            Some("--jobs-backend 'redis://:***@10.0.0.5:6379/0': the password crosses the network in clear text; use rediss:// (TLS)")
        );
        for remote in [
            "redis://u:pw@redis.example.com/0",
            "redis://:pw@[2001:db8::1]:6379",
            "redis://:pw@128.0.0.1",
            "redis://:pw@localhost.example.com",
        ] {
            let w = warning(remote).unwrap_or_default();
            assert!(
                w.contains("clear text") && !w.contains("pw@"),
                "{remote}: {w}"
            );
        }
        for quiet in [
            "redis://:pw@127.0.0.1:6379/0",
            "redis://:pw@127.3.2.1/0",
            "redis://:pw@localhost/0",
            "redis://:pw@LOCALHOST./0",
            "redis://:pw@[::1]:6379/0",
            "redis://:pw@[::ffff:127.0.0.1]:6379/0",
            "rediss://:pw@redis.example.com/0",
            "redis://redis.example.com/0",
            "redis://alice@redis.example.com/0",
            "sqlite:/tmp/q.db",
            "memory",
        ] {
            assert_eq!(warning(quiet), None, "{quiet}");
        }
        let hub = RedisUrl::parse_for("--hub", "redis://:pw@h:6379").unwrap();
        assert_eq!(
            hub.cleartext_password_warning("--hub").as_deref(),
            Some("--hub 'redis://:***@h:6379': the password crosses the network in clear text; use rediss:// (TLS)")
        );
    }
}
