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
pub mod keys;
pub(crate) mod merge;
pub mod retry;
pub mod seal;
pub(crate) mod server;
pub mod sign;
pub(crate) mod work;

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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

/// How the messages through a hub are signed, and whose signatures this party takes.
#[derive(Clone, Default)]
pub enum Trust {
    /// Not at all: anyone who can write to the hub can give work and answer.
    #[default]
    Bare,
    /// With the hub key ([`sign::HUB_KEY_ENV`]): every holder is every party.
    Shared(Box<sign::HubKey>),
    /// With a key per party.
    Keys(Arc<Parties>),
}

/// A party's own key and the keys it takes.
pub struct Parties {
    own: keys::SigningKey,
    /// An agent: the study keys whose work it runs. A study: the operator's list of agent
    /// keys, by name (then only those), if one was given.
    listed: Option<keys::KeyList>,
    /// Where `listed` came from, for refusals.
    listed_from: String,
    /// A study: each agent's key, by name, as listed or first seen, for the whole study.
    pins: Mutex<BTreeMap<String, keys::PublicKey>>,
    /// An agent: the key its shares are sealed to, made when it starts and never written
    /// ([`seal`]); its public half is in the signed heartbeat.
    open_key: Option<seal::OpenKey>,
}

/// The key files a party names (`--signing-key`, `--study-keys` or `--agent-keys`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyFiles {
    /// Its own signing key's file (`--signing-key`, or the file `CONCUR_SIGNING_KEY` names).
    pub signing_key: Option<PathBuf>,
    /// An agent's `--study-keys FILE`, or a study's `--agent-keys FILE`.
    pub listed: Option<PathBuf>,
}

/// Which party loads its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A study, or `concur agents --stop` (a study key's holder).
    Study,
    /// `concur agent`.
    Agent,
}

impl Trust {
    /// The trust of a party of `role` from its key files and the environment: the hub key
    /// ([`sign::HUB_KEY_ENV`]), else a key per party when a signing key is named, else bare.
    /// A malformed file or list is one line naming it and what is expected, exit 2.
    pub fn load(role: Role, files: &KeyFiles) -> Result<Trust> {
        let shared = sign::HubKey::from_env()?;
        let study_env = match role {
            Role::Agent => keys::KeyList::from_env(keys::STUDY_KEYS_ENV)?,
            Role::Study => None,
        };
        let (list_flag, listing) = match role {
            Role::Agent => ("--study-keys", "study keys"),
            Role::Study => ("--agent-keys", "agent keys"),
        };
        let Some(path) = &files.signing_key else {
            if files.listed.is_some() || study_env.is_some() {
                let what = if files.listed.is_some() {
                    list_flag
                } else {
                    keys::STUDY_KEYS_ENV
                };
                return Err(Error::flag(
                    "--signing-key",
                    format!(
                        "{what}: {listing} are checked against this party's own signatures, which need --signing-key FILE (or {}; concur hub keygen --out FILE makes one)",
                        keys::SIGNING_KEY_ENV
                    ),
                ));
            }
            return Ok(shared.map_or(Trust::Bare, |k| Trust::Shared(Box::new(k))));
        };
        if shared.is_some() {
            return Err(Error::flag(
                "--signing-key",
                format!(
                    "--signing-key and {} are both given, two ways to sign (allowed: one; a key per party replaces the shared key)",
                    sign::HUB_KEY_ENV
                ),
            ));
        }
        let own = keys::SigningKey::load("--signing-key", path)?;
        let from_file = files
            .listed
            .as_deref()
            .map(|p| keys::KeyList::load(list_flag, p, role == Role::Study))
            .transpose()?;
        let listed_from = match (&files.listed, &study_env) {
            (Some(p), Some(_)) => {
                format!("{list_flag} '{}' and {}", p.display(), keys::STUDY_KEYS_ENV)
            }
            (Some(p), None) => format!("{list_flag} '{}'", p.display()),
            (None, _) => keys::STUDY_KEYS_ENV.to_string(),
        };
        let listed = match (from_file, study_env) {
            (Some(a), Some(b)) => Some(a.and(b)),
            (a, b) => a.or(b),
        };
        if role == Role::Agent && listed.is_none() {
            return Err(Error::flag(
                "--study-keys",
                format!(
                    "--study-keys: an agent with its own key runs work only from the study keys its operator lists: give --study-keys FILE or {} (public keys, as concur hub keygen prints them)",
                    keys::STUDY_KEYS_ENV
                ),
            ));
        }
        let open_key = match role {
            Role::Agent => Some(seal::OpenKey::generate().map_err(Error::Internal)?),
            Role::Study => None,
        };
        Ok(Trust::Keys(Arc::new(Parties {
            own,
            listed,
            listed_from,
            pins: Mutex::new(BTreeMap::new()),
            open_key,
        })))
    }
}

/// A hub that answered.
#[derive(Clone)]
pub struct Hub {
    url: HubUrl,
    client: redis::Client,
    /// How messages are signed and whose signatures are taken.
    trust: Trust,
}

impl Hub {
    /// Connects and pings; a hub that does not answer in 3 s or refuses the password is one
    /// line naming the URL (its password masked), exit 2.
    pub fn open(url: &HubUrl) -> Result<Hub> {
        Hub::open_with(url, Trust::load(Role::Study, &KeyFiles::default())?)
    }

    /// [`Hub::open`], signing and checking as `trust` says.
    pub fn open_with(url: &HubUrl, trust: Trust) -> Result<Hub> {
        let hub = Hub::new_with(url, trust)?;
        let mut c = hub.connect()?;
        redis::cmd("PING")
            .query::<String>(&mut c)
            .map_err(|e| hub.unreachable(e))?;
        Ok(hub)
    }

    /// A hub not yet asked anything: only the URL and the hub key ([`sign::HUB_KEY_ENV`])
    /// are checked (an agent waits for its hub).
    pub fn new(url: &HubUrl) -> Result<Hub> {
        Hub::new_with(url, Trust::load(Role::Agent, &KeyFiles::default())?)
    }

    /// [`Hub::new`], signing and checking as `trust` says.
    pub fn new_with(url: &HubUrl, trust: Trust) -> Result<Hub> {
        let client = redis::Client::open(url.expose()).map_err(|e| {
            Error::flag(
                "--hub",
                format!("--hub '{url}': {}", url.scrub(&e.to_string())),
            )
        })?;
        Ok(Hub {
            url: url.clone(),
            client,
            trust,
        })
    }

    /// How messages are signed here.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// Whether messages are signed (with the hub key or a key per party).
    pub fn keyed(&self) -> bool {
        !matches!(self.trust, Trust::Bare)
    }

    /// This party's own public key, with keys per party.
    pub fn own_key(&self) -> Option<keys::PublicKey> {
        match &self.trust {
            Trust::Keys(p) => Some(p.own.public()),
            _ => None,
        }
    }

    /// `body` sealed for `to` in `scope` (for an agent: at its `epoch`) on the hub's clock
    /// now, with this party's key (bare without one).
    pub fn seal(
        &self,
        c: &mut Connection,
        to: &str,
        scope: &str,
        epoch: &str,
        body: String,
    ) -> redis::RedisResult<String> {
        let sealer = match &self.trust {
            Trust::Bare => return Ok(body),
            Trust::Shared(k) => sign::Sealer::Shared(k),
            Trust::Keys(p) => sign::Sealer::Own(&p.own),
        };
        let a = sign::Address {
            to,
            scope,
            epoch,
            at_ns: clock::hub_now_ns(c)?,
        };
        Ok(sign::seal_with(sealer, &a, body))
    }

    /// The body of `text` as `e` expects it (the hub's clock read now), signed by a key
    /// `accept` takes (with keys per party); the text itself when bare.
    fn unseal_as(
        &self,
        c: &mut Connection,
        e: sign::Expect,
        text: &str,
        seen: &mut sign::Seen,
        accept: &dyn Fn(&keys::PublicKey) -> std::result::Result<(), String>,
    ) -> std::result::Result<sign::Opened, String> {
        let opener = match &self.trust {
            Trust::Bare => sign::Opener::Bare,
            Trust::Shared(k) => sign::Opener::Shared(k),
            Trust::Keys(_) => sign::Opener::Keys(accept),
        };
        let now_ns = match &self.trust {
            Trust::Bare => 0,
            _ => clock::hub_now_ns(c).map_err(|e| format!("reading the hub's clock: {e}"))?,
        };
        sign::open_with(opener, &sign::Expect { now_ns, ..e }, text, seen)
    }

    /// An agent's side: the body of the work item `text` sent to agent `to` in its `epoch`,
    /// signed by a study key its operator listed (with keys per party).
    pub fn unseal_work(
        &self,
        c: &mut Connection,
        to: &str,
        epoch: &str,
        text: &str,
        seen: &mut sign::Seen,
    ) -> std::result::Result<String, String> {
        let accept = |k: &keys::PublicKey| match &self.trust {
            Trust::Keys(p) if p.listed.as_ref().is_some_and(|l| l.contains(k)) => Ok(()),
            Trust::Keys(p) => Err(format!(
                "a message signed by {}, which is not a listed study key ({})",
                k.short(),
                p.listed_from
            )),
            _ => Ok(()),
        };
        let e = sign::Expect {
            to,
            scope: None,
            epoch: Some(epoch),
            now_ns: 0,
        };
        self.unseal_as(c, e, text, seen, &accept).map(|o| o.body)
    }

    /// An agent's side: `work`, read from the item `text` sent to agent `to` at `epoch`, as it
    /// runs it. With keys per party a share must come sealed to this agent's key ([`seal`])
    /// and opens here; one in clear is refused (the study that signed it did not seal it, and
    /// its request may carry credentials). Without keys per party, work is as it came.
    pub fn open_share(
        &self,
        to: &str,
        epoch: &str,
        text: &str,
        work: work::Work,
    ) -> std::result::Result<work::Work, String> {
        let key = match &self.trust {
            Trust::Keys(p) => p.open_key.as_ref(),
            _ => None,
        };
        match (work, key) {
            (work::Work::Part(_), Some(_)) => Err(
                "a share not sealed to this agent's key (with keys per party every share is sealed to its agent: its request may carry credentials)"
                    .into(),
            ),
            (work::Work::Sealed { part, blob }, Some(key)) => {
                let run = sign::scope_of(text).ok_or("a sealed share that names no run")?;
                admit::open_sealed(key, to, epoch, &run, part, &blob)
            }
            (work::Work::Sealed { .. }, None) => Err(
                "a sealed share, and this agent has no key to open it (sealed shares go to agents with --signing-key)"
                    .into(),
            ),
            (work, _) => Ok(work),
        }
    }

    /// A study's side: the body of `text`, an answer in `scope` from the agent `agent`,
    /// signed by that agent's pinned key (with keys per party).
    pub fn unseal_from(
        &self,
        c: &mut Connection,
        agent: &str,
        scope: &str,
        text: &str,
        seen: &mut sign::Seen,
    ) -> std::result::Result<String, String> {
        let pinned = self.pinned(agent);
        let accept = |k: &keys::PublicKey| match pinned {
            Some(p) if p == *k => Ok(()),
            _ => Err(format!(
                "an answer signed by {}, not by the key of agent '{agent}'",
                k.short()
            )),
        };
        let e = sign::Expect {
            to: "study",
            scope: Some(scope),
            epoch: None,
            now_ns: 0,
        };
        self.unseal_as(c, e, text, seen, &accept).map(|o| o.body)
    }

    /// A study's side: the body of `text`, an answer on `run`'s list, and the agent whose
    /// pinned key signed it (with keys per party; `None` otherwise): which share it may
    /// answer is the caller's to check.
    pub fn unseal_answer(
        &self,
        c: &mut Connection,
        run: &str,
        text: &str,
        seen: &mut sign::Seen,
    ) -> std::result::Result<(String, Option<String>), String> {
        let accept = |k: &keys::PublicKey| match self.pinned_name(k) {
            Some(_) => Ok(()),
            None => Err(format!(
                "an answer signed by {}, the key of none of this study's agents",
                k.short()
            )),
        };
        let e = sign::Expect {
            to: "study",
            scope: Some(run),
            epoch: None,
            now_ns: 0,
        };
        let opened = self.unseal_as(c, e, text, seen, &accept)?;
        let signer = opened.signer.and_then(|k| self.pinned_name(&k));
        Ok((opened.body, signer))
    }

    /// The key pinned for agent `name`.
    pub fn pinned(&self, name: &str) -> Option<keys::PublicKey> {
        match &self.trust {
            Trust::Keys(p) => p
                .pins
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(name)
                .copied(),
            _ => None,
        }
    }

    /// The agent whose pinned key `key` is.
    fn pinned_name(&self, key: &keys::PublicKey) -> Option<String> {
        match &self.trust {
            Trust::Keys(p) => p
                .pins
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find(|(_, k)| *k == key)
                .map(|(n, _)| n.clone()),
            _ => None,
        }
    }

    /// An agent's side: its heartbeat's text, signed with its own key (with keys per party:
    /// its public key is in it, and the signature covers the rest).
    pub fn beat_text(&self, info: &AgentInfo) -> String {
        let mut info = info.clone();
        info.sig = None;
        if let Trust::Keys(p) = &self.trust {
            info.key = Some(p.own.public().to_string());
            if let Some(k) = &p.open_key {
                info.seal_key = Some(k.public().to_string());
            }
            let unsigned = serde_json::to_string(&info).unwrap_or_default();
            info.sig = Some(p.own.sign(&sign::beat_input(&unsigned)));
        }
        serde_json::to_string(&info).unwrap_or_default()
    }

    /// A study's side: whether the heartbeat `info` is its agent's. With keys per party it
    /// must be signed by the key that names it, and that key must be the one pinned for the
    /// agent, else the one the operator lists for it; with no list, a key seen for the first
    /// time is pinned for the whole study, and said (the `Ok` line). Its epoch, whatever the
    /// trust, must be one an agent makes.
    pub fn vouch(&self, info: &AgentInfo) -> std::result::Result<Option<String>, String> {
        if let Some(e) = &info.epoch {
            sign::check_epoch(e)?;
        }
        let Trust::Keys(p) = &self.trust else {
            return Ok(None);
        };
        let key = beat_signer(info)?;
        seal_key_of(info)?;
        let mut pins = p.pins.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pinned) = pins.get(&info.name) {
            return if *pinned == key {
                Ok(None)
            } else {
                Err(format!(
                    "its heartbeat is signed by {}, not by the key pinned for it ({})",
                    key.short(),
                    pinned.short()
                ))
            };
        }
        match &p.listed {
            Some(list) => match list.key_of(&info.name) {
                Some(k) if k == key => {
                    pins.insert(info.name.clone(), key);
                    Ok(None)
                }
                Some(k) => Err(format!(
                    "its heartbeat is signed by {}, not by the key {} lists for it ({})",
                    key.short(),
                    p.listed_from,
                    k.short()
                )),
                None => Err(format!("it is not listed in {}", p.listed_from)),
            },
            None => {
                if pins.values().any(|k| *k == key) {
                    return Err(format!(
                        "its key {} is another agent's of this study",
                        key.short()
                    ));
                }
                pins.insert(info.name.clone(), key);
                Ok(Some(format!(
                    "trusted agent '{}''s key on first sight: {key} (list agents' keys with --agent-keys FILE to trust only those)",
                    info.name
                )))
            }
        }
    }

    /// A new connection as Redis gives it (3 s to connect, 10 s per reply), its error kept for
    /// [`retrying_mends`].
    pub fn try_connect(&self) -> redis::RedisResult<Connection> {
        crate::jobs::redis::connect(&self.client)
    }

    /// [`Hub::try_connect`], with at most `within` to connect.
    pub fn try_connect_within(&self, within: Duration) -> redis::RedisResult<Connection> {
        let c = self.client.get_connection_with_timeout(within)?;
        c.set_read_timeout(Some(Duration::from_secs(10)))?;
        c.set_write_timeout(Some(Duration::from_secs(10)))?;
        Ok(c)
    }

    /// The URL (masked when shown).
    pub fn url(&self) -> &HubUrl {
        &self.url
    }

    pub(crate) fn unreachable(&self, e: redis::RedisError) -> Error {
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
                        // Marked, not rewritten: `doing` is under the heartbeat's signature.
                        info.released = !serving;
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
    /// The epoch it published at join (its start time and 128 random bits): the work it
    /// runs must name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    /// Its public key, with keys per party.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The X25519 key its shares are sealed to ([`seal`]), with keys per party: made when it
    /// started, under the heartbeat's signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal_key: Option<String>,
    /// Its signature of the rest of the heartbeat, with keys per party.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    /// Read from the hub: it serves a study that has released its server, so it is idle for
    /// every purpose, whether or not its next beat has said so yet (not part of the
    /// heartbeat).
    #[serde(skip)]
    pub released: bool,
}

impl AgentInfo {
    /// What it is doing, as its heartbeat says it unless its server was released (`idle`).
    pub fn doing_now(&self) -> &str {
        if self.released {
            "idle"
        } else {
            &self.doing
        }
    }
}

/// The key that signed the heartbeat `info`: the one it names, if its signature verifies
/// (key and signature bounded before they are decoded).
pub fn beat_signer(info: &AgentInfo) -> std::result::Result<keys::PublicKey, String> {
    let (Some(key), Some(sig)) = (&info.key, &info.sig) else {
        return Err("its heartbeat is not signed (an agent started without --signing-key)".into());
    };
    let key = keys::PublicKey::parse(key)?;
    let sig = keys::read_signature(sig)?;
    let mut unsigned = info.clone();
    unsigned.sig = None;
    let text = serde_json::to_string(&unsigned).map_err(|e| e.to_string())?;
    if key.verifies(&sign::beat_input(&text), &sig) {
        Ok(key)
    } else {
        Err(format!(
            "its heartbeat's signature does not match the key it names ({})",
            key.short()
        ))
    }
}

/// The key a signed heartbeat publishes for sealing its agent's shares (bounded before it is
/// decoded); only as good as the heartbeat's signature, which [`Hub::vouch`] checks.
pub fn seal_key_of(info: &AgentInfo) -> std::result::Result<seal::SealKey, String> {
    let text = info.seal_key.as_deref().ok_or(
        "its heartbeat publishes no key to seal its shares to (an agent of keys per party always does)",
    )?;
    seal::SealKey::parse(text).map_err(|why| format!("its heartbeat's sealing key: {why}"))
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

/// Where an agent says it refused a work item it could not trust ([`work::Refusal`]).
fn refused_key(name: &str) -> String {
    format!("{PREFIX}agent:{name}:refused")
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

    fn parties(listed: Option<keys::KeyList>) -> Hub {
        let (own, _) = keys::SigningKey::generate().unwrap();
        let trust = Trust::Keys(Arc::new(Parties {
            own,
            listed,
            listed_from: "--agent-keys 'k'".into(),
            pins: Mutex::new(BTreeMap::new()),
            open_key: Some(seal::OpenKey::generate().unwrap()),
        }));
        Hub::new_with(&HubUrl::parse("redis://127.0.0.1:1/0").unwrap(), trust).unwrap()
    }

    fn beat(name: &str) -> AgentInfo {
        serde_json::from_value(serde_json::json!({
            "name": name, "host": "h", "addr": null, "cores": 2, "mem_total_kib": null,
            "version": "0", "pid": 1, "allow_commands": false, "clock_offset_ns": 0,
            "clock_uncertainty_ns": 0, "mono_offset_ns": 0, "beat_hub_ns": 0,
            "doing": "idle", "epoch": "19a-00ff"
        }))
        .unwrap()
    }

    /// `info` as agent `hub` publishes it, read back as a study reads it.
    fn signed(hub: &Hub, info: &AgentInfo) -> AgentInfo {
        serde_json::from_str(&hub.beat_text(info)).unwrap()
    }

    #[test]
    fn a_study_pins_each_agents_key_on_first_sight_or_from_its_list() {
        let (x, y) = (parties(None), parties(None));
        let study = parties(None);
        // An unsigned heartbeat is no agent's, under keys per party.
        assert!(study.vouch(&beat("x")).unwrap_err().contains("not signed"));
        // First sight: pinned and said.
        let bx = signed(&x, &beat("x"));
        let said = study.vouch(&bx).unwrap().unwrap();
        assert!(
            said.contains("trusted agent 'x''s key on first sight"),
            "{said}"
        );
        assert_eq!(study.pinned("x"), x.own_key());
        assert_eq!(study.vouch(&bx).unwrap(), None);
        // Y's key on X's heartbeat, and X's heartbeat changed after it was signed.
        let why = study.vouch(&signed(&y, &beat("x"))).unwrap_err();
        assert!(why.contains("not by the key pinned"), "{why}");
        let mut changed = bx.clone();
        changed.doing = "run 1 share 1 of 1".into();
        assert!(study
            .vouch(&changed)
            .unwrap_err()
            .contains("does not match"));
        // Y's key under a second name, once pinned for another agent.
        let _ = study.vouch(&signed(&y, &beat("y"))).unwrap();
        assert!(study
            .vouch(&signed(&y, &beat("z")))
            .unwrap_err()
            .contains("another agent's"));
        // With a list: only the key listed for that name.
        let list = keys::KeyList::parse(&format!("{} x\n", x.own_key().unwrap())).unwrap();
        let strict = parties(Some(list));
        assert_eq!(strict.vouch(&bx).unwrap(), None);
        assert!(strict
            .vouch(&signed(&y, &beat("y")))
            .unwrap_err()
            .contains("not listed"));
        let why = parties(Some(
            keys::KeyList::parse(&format!("{} x", y.own_key().unwrap())).unwrap(),
        ))
        .vouch(&bx)
        .unwrap_err();
        assert!(why.contains("lists for it"), "{why}");
        // An epoch that is not one an agent makes.
        let mut odd = beat("x");
        odd.epoch = Some("\u{1b}]0;x".into());
        assert!(Hub::new(&HubUrl::parse("redis://127.0.0.1:1/0").unwrap())
            .unwrap()
            .vouch(&odd)
            .is_err());
    }
}
