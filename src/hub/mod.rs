//! Studies across machines: agents on other hosts joined through one Redis, the hub
//! (`--hub redis://HOST:PORT/DB`, or `CONCUR_HUB`). There is no server or protocol of
//! concur's own: an agent announces itself with a key that expires (its heartbeat), takes its
//! work from a list of its own with Redis's reliable move (`BLMOVE` to a list of what it is
//! doing), and answers on the run's list; the hub's `TIME` is the clock every host's is
//! measured against.
//!
//! - `agent`: `concur agent`, which runs each share of a run it is sent in a fresh process,
//!   exactly as a local run (the same child, the same measurement).
//! - [`executor`]: the study's side, an [`crate::study::Executor`] that splits each run over
//!   K agents, starts them at one instant of the hub's clock, and waits for them, never
//!   forever: an agent that stops beating is lost within [`LOST_AFTER`].
//! - `merge`: the hosts' runs into one run line, latency merged bucket by bucket.
//! - `clock`: a host's clock offset against the hub, NTP's way.

pub(crate) mod admit;
pub(crate) mod agent;
pub(crate) mod clock;
pub mod executor;
pub(crate) mod merge;
pub(crate) mod server;
pub mod sign;
pub(crate) mod work;

use std::fmt;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use redis::{Connection, IntoConnectionInfo};
use serde::{Deserialize, Serialize};

use crate::analysis::results::MetaHost;
use crate::base::error::{Error, Result};
use crate::jobs::RedisUrl;

/// The environment variable every command that takes `--hub` also reads it from.
pub use crate::plan::options::HUB_ENV;

/// The forms `--hub` takes.
pub use crate::jobs::REDIS_URLS as HUB_URLS;

/// Every key of the hub starts with this.
pub(crate) const PREFIX: &str = "concur:hub:";

/// How often an agent renews its heartbeat.
pub const BEAT: Duration = Duration::from_millis(500);

/// How long a heartbeat lives: an agent silent for this long is gone (its key expires), and a
/// run declares its share lost.
pub const LOST_AFTER: Duration = Duration::from_millis(2000);

/// The hub's URL. It may hold a password: it shows masked, and travels to no command line.
#[derive(Clone, PartialEq, Eq)]
pub struct HubUrl(RedisUrl);

impl HubUrl {
    /// Parses `--hub`'s value (no connection is made).
    pub fn parse(s: &str) -> Result<HubUrl> {
        RedisUrl::parse_for("--hub", s).map(HubUrl)
    }

    /// The full URL, password included: for the Redis client only; never print it.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// Hides the URL's password in `text`.
    pub fn scrub(&self, text: &str) -> String {
        self.0.scrub(text)
    }

    /// Where the hub listens.
    fn socket_addr(&self) -> Option<SocketAddr> {
        let info = self.expose().into_connection_info().ok()?;
        let (host, port) = match info.addr() {
            redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
            redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
            _ => return None,
        };
        (host.as_str(), port).to_socket_addrs().ok()?.next()
    }
}

impl From<RedisUrl> for HubUrl {
    fn from(u: RedisUrl) -> Self {
        HubUrl(u)
    }
}

impl fmt::Display for HubUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for HubUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HubUrl({self})")
    }
}

/// A hub that answered.
#[derive(Clone)]
pub struct Hub {
    url: HubUrl,
    client: redis::Client,
    /// The hub key ([`sign::HUB_KEY_ENV`]) every message is signed with, if one is set.
    key: Option<sign::HubKey>,
}

impl Hub {
    /// Connects and pings; a hub that does not answer in 3 s or refuses the password is one
    /// line naming the URL (its password masked), exit 2.
    pub fn open(url: &HubUrl) -> Result<Hub> {
        let hub = Hub::new(url)?;
        let mut c = hub.connect()?;
        redis::cmd("PING")
            .query::<String>(&mut c)
            .map_err(|e| hub.unreachable(e))?;
        Ok(hub)
    }

    /// A hub not yet asked anything: only the URL and the hub key ([`sign::HUB_KEY_ENV`])
    /// are checked (an agent waits for its hub).
    pub fn new(url: &HubUrl) -> Result<Hub> {
        let client = redis::Client::open(url.expose()).map_err(|e| {
            Error::flag(
                "--hub",
                format!("--hub '{url}': {}", url.scrub(&e.to_string())),
            )
        })?;
        Ok(Hub {
            url: url.clone(),
            client,
            key: sign::HubKey::from_env()?,
        })
    }

    /// Whether messages are signed with a hub key.
    pub fn keyed(&self) -> bool {
        self.key.is_some()
    }

    /// `body` sealed for `to` in `scope` with the hub key, on the hub's clock now (bare
    /// without a key).
    pub fn seal(
        &self,
        c: &mut Connection,
        to: &str,
        scope: &str,
        body: String,
    ) -> redis::RedisResult<String> {
        let at = match &self.key {
            Some(_) => clock::hub_now_ns(c)?,
            None => 0,
        };
        Ok(sign::seal(self.key.as_ref(), to, scope, at, body))
    }

    /// The body of `text` received by `to` (in `scope`, when given), checked against the
    /// hub key and the hub's clock now; the text itself without a key.
    pub fn unseal(
        &self,
        c: &mut Connection,
        to: &str,
        scope: Option<&str>,
        text: &str,
        seen: &mut sign::Seen,
    ) -> std::result::Result<String, String> {
        let now = match &self.key {
            Some(_) => clock::hub_now_ns(c).map_err(|e| format!("reading the hub's clock: {e}"))?,
            None => 0,
        };
        sign::open(self.key.as_ref(), to, scope, text, now, seen)
    }

    /// A new connection as Redis gives it (3 s to connect, 10 s per reply), its error kept for
    /// [`retrying_mends`].
    pub fn try_connect(&self) -> redis::RedisResult<Connection> {
        crate::jobs::redis::connect(&self.client)
    }

    /// The URL (masked when shown).
    pub fn url(&self) -> &HubUrl {
        &self.url
    }

    fn unreachable(&self, e: redis::RedisError) -> Error {
        Error::flag(
            "--hub",
            format!(
                "--hub '{}': the hub does not answer: {}",
                self.url,
                self.url.scrub(&e.to_string())
            ),
        )
    }

    /// A new connection (3 s to connect, 10 s per reply).
    pub fn connect(&self) -> Result<Connection> {
        self.try_connect().map_err(|e| self.unreachable(e))
    }

    /// A Redis error of a command on the hub, its password masked.
    pub fn failed(&self, what: &str, e: redis::RedisError) -> Error {
        Error::Internal(format!(
            "hub '{}': {what}: {}",
            self.url,
            self.url.scrub(&e.to_string())
        ))
    }

    /// This host's own address as the hub sees it: where other hosts reach it (the address
    /// of the interface the route to the hub leaves by).
    pub fn local_addr(&self) -> Option<IpAddr> {
        let addr = self.url.socket_addr()?;
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(3)).ok()?;
        s.local_addr().ok().map(|a| a.ip())
    }

    /// The agents alive now (their heartbeat has not expired), by name.
    pub fn agents(&self, c: &mut Connection) -> Result<Vec<AgentInfo>> {
        let names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(agents_key())
            .query(c)
            .map_err(|e| self.failed("listing agents", e))?;
        let mut alive = Vec::new();
        for name in names {
            let text: Option<String> = redis::cmd("GET")
                .arg(agent_key(&name))
                .query(c)
                .map_err(|e| self.failed("reading an agent", e))?;
            match text.and_then(|t| serde_json::from_str::<AgentInfo>(&t).ok()) {
                Some(mut info) => {
                    // Serving a study that has released its server (the study deletes the
                    // key, then tells the agent): idle for every purpose, whether or not
                    // the agent's next beat has said so yet.
                    let served = info
                        .doing
                        .strip_prefix("serving study ")
                        .and_then(|rest| rest.split_whitespace().next())
                        .map(server::serve_key);
                    if let Some(key) = served {
                        let serving: bool = redis::cmd("EXISTS")
                            .arg(key)
                            .query(c)
                            .map_err(|e| self.failed("reading an agent", e))?;
                        if !serving {
                            info.doing = "idle".into();
                        }
                    }
                    alive.push(info)
                }
                None => {
                    // Its heartbeat expired: it left or died.
                    let _ = redis::cmd("SREM")
                        .arg(agents_key())
                        .arg(&name)
                        .query::<i64>(c);
                }
            }
        }
        alive.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(alive)
    }
}

/// Whether waiting and asking again can mend a hub's error: a hub that is down, restarting,
/// loading its data or unreachable comes back; refused credentials and a URL that names no
/// usable server do not.
pub fn retrying_mends(e: &redis::RedisError) -> bool {
    use redis::ErrorKind;
    let refused = matches!(
        e.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::InvalidClientConfig
    ) || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"));
    !refused
}

/// What an agent says of itself in its heartbeat: the host as a study's meta line records it
/// ([`MetaHost`]: name, host, address, cores, memory, version, its clock against the hub's),
/// and around it what changes while it lives. The heartbeat's JSON (and `concur agents
/// --format json`) is the host's fields and these, side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// The host, as the meta line of a study it works for records it (its clock offset and
    /// uncertainty as last measured).
    #[serde(flatten)]
    pub meta: MetaHost,
    /// Its process id.
    pub pid: u32,
    /// Whether it runs commands of others (`--allow-commands`).
    pub allow_commands: bool,
    /// The hub's wall clock minus this host's monotonic clock, ns, as last measured.
    pub mono_offset_ns: i64,
    /// Its last heartbeat, on the hub's clock (ns since the epoch).
    pub beat_hub_ns: u64,
    /// What it is doing: `idle`, or the run and share it works on.
    pub doing: String,
}

/// The host's fields read through the heartbeat (`agent.name`, `agent.cores`...).
impl std::ops::Deref for AgentInfo {
    type Target = MetaHost;
    fn deref(&self) -> &MetaHost {
        &self.meta
    }
}

impl AgentInfo {
    /// Its clock against the hub's, as last measured.
    pub fn clock(&self) -> clock::ClockOffset {
        clock::ClockOffset {
            offset_ns: self.meta.clock_offset_ns,
            uncertainty_ns: self.meta.clock_uncertainty_ns,
            mono_offset_ns: self.mono_offset_ns,
        }
    }

    /// Records a new measure of its clock.
    pub fn set_clock(&mut self, c: clock::ClockOffset) {
        self.meta.clock_offset_ns = c.offset_ns;
        self.meta.clock_uncertainty_ns = c.uncertainty_ns;
        self.mono_offset_ns = c.mono_offset_ns;
    }

    /// The refusal of an agent of another version, naming both.
    pub fn version_refusal(&self) -> Option<String> {
        (self.version != crate::base::version::VERSION).then(|| {
            format!(
                "agent '{}' runs concur {}, this is concur {}: every host of a study runs the same version",
                self.name,
                self.version,
                crate::base::version::VERSION
            )
        })
    }
}

fn agents_key() -> String {
    format!("{PREFIX}agents")
}

fn agent_key(name: &str) -> String {
    format!("{PREFIX}agent:{name}")
}

fn work_key(name: &str) -> String {
    format!("{PREFIX}agent:{name}:work")
}

fn doing_key(name: &str) -> String {
    format!("{PREFIX}agent:{name}:doing")
}

fn done_key(run: &str) -> String {
    format!("{PREFIX}run:{run}:done")
}

fn cancel_key(run: &str) -> String {
    format!("{PREFIX}run:{run}:cancel")
}

/// The study's heartbeat for one run: renewed while it waits for the run's shares, it expires
/// [`LOST_AFTER`] after the study stops (killed, its host gone), and the agents then stop the
/// run's shares.
fn alive_key(run: &str) -> String {
    format!("{PREFIX}run:{run}:alive")
}

/// Names an agent may take: letters, digits, `.`, `_`, `-`, 1 to 64 of them.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::flag(
            "--name",
            format!(
            "--name '{name}': not an agent name (allowed: 1 to 64 letters, digits, '.', '_' or '-')"
        ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_urls_are_redis_urls_and_show_masked() {
        let u = HubUrl::parse("redis://:hunter2@10.1.2.3:6390/2").unwrap();
        assert!(!u.to_string().contains("hunter2"), "{u}");
        assert_eq!(u.expose(), "redis://:hunter2@10.1.2.3:6390/2");
        let e = HubUrl::parse("http://:hunter2@x").unwrap_err().to_string();
        assert!(
            e.contains("--hub") && e.contains("redis://") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(HubUrl::parse("rediss://h:6380").is_ok());
        assert!(check_name("node-1.lab").is_ok());
        assert!(check_name("a b").is_err() && check_name("").is_err());
    }
}
