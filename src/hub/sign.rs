//! The envelopes every message between a study and its agents travels in, and how they are
//! signed. Each names its recipient, its scope (the run or study it belongs to), the epoch of
//! the agent it goes to (what that agent published at join: work signed for an earlier
//! process of the same name is refused, with no memory on the hub a writer could delete) and
//! the hub-clock instant it was sent at; the signature covers all of them and the body, so a
//! message moved to another agent's list, another run, another start of the agent, or sent
//! again later is refused: a receiver keeps the signatures it has seen for as long as an
//! envelope's instant is accepted ([`MAX_SKEW`]).
//!
//! Two ways to sign: with a key per party (Ed25519, [`super::keys`]), where each study and
//! agent signs with its own key and names it, and a receiver takes only the keys it lists or
//! pinned; or with the hub key (`CONCUR_HUB_KEY`), one secret shared by every party: an
//! HMAC-SHA256 (aws-lc-rs, already compiled in for TLS) which any holder can make, so that
//! every holder is every party (a lab of one person's). Without either, messages travel as
//! bare JSON; a keyed receiver refuses them.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use aws_lc_rs::hmac;
use serde::{Deserialize, Serialize};

use super::keys::{self, PublicKey, SigningKey};
use crate::base::error::{Error, Result};

/// The environment variable that holds the hub key (never a flag: `ps` shows every argv).
pub const HUB_KEY_ENV: &str = crate::base::secret::CHILD_ENV_SECRETS[0];

/// The shortest key accepted.
pub const MIN_KEY_BYTES: usize = 16;

/// How far an envelope's instant may be from the receiver's reading of the hub's clock.
pub const MAX_SKEW: Duration = Duration::from_secs(60);

/// What every tag's input starts with: a version and a domain of its own (v2: the epoch).
const DOMAIN: &str = "concur-hub-v2";

/// What every Ed25519 signature's input starts with.
const SIGNED_DOMAIN: &str = "concur-hub-ed25519-v1";

/// What a heartbeat's signature input starts with.
const BEAT_DOMAIN: &str = "concur-hub-beat-ed25519-v1";

/// The longest epoch accepted.
pub const EPOCH_MAX_CHARS: usize = 64;

/// The most tags a receiver remembers (a study sends one message a share and run).
const SEEN_MAX: usize = 100_000;

/// The shared secret.
#[derive(Clone)]
pub struct HubKey(hmac::Key);

impl std::fmt::Debug for HubKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HubKey(***)")
    }
}

impl HubKey {
    /// A key from its text; shorter than [`MIN_KEY_BYTES`] is refused.
    pub fn new(text: &str) -> Result<HubKey> {
        if text.len() < MIN_KEY_BYTES {
            return Err(Error::bad(crate::base::error::Input::Env(HUB_KEY_ENV.into()), format!(
                "{HUB_KEY_ENV}: a key of {} bytes (allowed: at least {MIN_KEY_BYTES}; e.g. `openssl rand -hex 32`)",
                text.len()
            )));
        }
        Ok(HubKey(hmac::Key::new(hmac::HMAC_SHA256, text.as_bytes())))
    }

    /// The key in [`HUB_KEY_ENV`], if it is set and not empty.
    pub fn from_env() -> Result<Option<HubKey>> {
        match std::env::var(HUB_KEY_ENV) {
            Ok(t) if !t.is_empty() => HubKey::new(&t).map(Some),
            _ => Ok(None),
        }
    }
}

/// What an envelope carries besides its body: who it is for, the run or study it belongs
/// to, the receiving agent's epoch (empty for a message to a study), and when it was sent.
#[derive(Debug, Clone, Copy)]
pub struct Address<'a> {
    /// An agent's name, or `study`.
    pub to: &'a str,
    /// The run or study it belongs to.
    pub scope: &'a str,
    /// The epoch the receiving agent published at join ([`new_epoch`]); empty for a study.
    pub epoch: &'a str,
    /// When it was sent, on the hub's clock, ns.
    pub at_ns: u64,
}

/// A signed message as it travels: with the hub key, an HMAC (`mac`); with a key per party,
/// the signer's public key (`from`) and its Ed25519 signature (`sig`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    /// Who it is for: an agent's name, or `study`.
    to: String,
    /// The run or study it belongs to.
    scope: String,
    /// The receiving agent's epoch; empty for a study.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    epoch: String,
    /// When it was sent, on the hub's clock, ns.
    at_ns: u64,
    /// The message itself (JSON text).
    body: String,
    /// HMAC-SHA256 over the domain, `to`, `scope`, `epoch`, `at_ns` and `body`, in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mac: Option<String>,
    /// The signer's public key (`concur-ed25519:…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    /// Its Ed25519 signature over the domain, `to`, `scope`, `epoch`, `at_ns`, `from` and
    /// `body`, in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sig: Option<String>,
}

fn tag_input(a: &Address, body: &str) -> Vec<u8> {
    format!(
        "{DOMAIN}\0{}\0{}\0{}\0{}\0{body}",
        a.to, a.scope, a.epoch, a.at_ns
    )
    .into_bytes()
}

fn signed_input(a: &Address, from: &str, body: &str) -> Vec<u8> {
    format!(
        "{SIGNED_DOMAIN}\0{}\0{}\0{}\0{}\0{from}\0{body}",
        a.to, a.scope, a.epoch, a.at_ns
    )
    .into_bytes()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A new epoch for an agent that starts: its start time (ns since the Unix epoch, in hex) and
/// 128 random bits. Work must name the epoch its agent published: what was signed for an
/// earlier process of the same name is refused.
pub fn new_epoch() -> String {
    let mut random = [0u8; 16];
    // A failing system random source leaves the start time alone to tell processes apart.
    let _ = aws_lc_rs::rand::fill(&mut random);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{now:x}-{}", hex(&random))
}

/// Checks an epoch read from the hub: hexadecimal digits and `-`, at most 64 of them.
pub fn check_epoch(epoch: &str) -> std::result::Result<(), String> {
    if !epoch.is_empty()
        && epoch.len() <= EPOCH_MAX_CHARS
        && epoch.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
    {
        Ok(())
    } else {
        Err(format!(
            "an epoch '{}' (allowed: 1 to {EPOCH_MAX_CHARS} hexadecimal digits and '-')",
            epoch.chars().take(80).collect::<String>().escape_debug()
        ))
    }
}

/// How a party signs what it sends.
#[derive(Debug, Clone, Copy)]
pub enum Sealer<'a> {
    /// Not at all: the body travels bare.
    Bare,
    /// With the hub key every party shares.
    Shared(&'a HubKey),
    /// With its own key.
    Own(&'a SigningKey),
}

/// Seals `body` for `to` in `scope` at `at_ns` with the hub key (no epoch: a message to a
/// study); `body` as it is without a key.
pub fn seal(key: Option<&HubKey>, to: &str, scope: &str, at_ns: u64, body: String) -> String {
    let sealer = key.map_or(Sealer::Bare, Sealer::Shared);
    let a = Address {
        to,
        scope,
        epoch: "",
        at_ns,
    };
    seal_with(sealer, &a, body)
}

/// Seals `body` at address `a`: the envelope's text, or `body` as it is for [`Sealer::Bare`].
pub fn seal_with(sealer: Sealer, a: &Address, body: String) -> String {
    let (mac, from, sig) = match sealer {
        Sealer::Bare => return body,
        Sealer::Shared(key) => (
            Some(hex(hmac::sign(&key.0, &tag_input(a, &body)).as_ref())),
            None,
            None,
        ),
        Sealer::Own(key) => {
            let from = key.public().to_string();
            let sig = key.sign(&signed_input(a, &from, &body));
            (None, Some(from), Some(sig))
        }
    };
    let env = Envelope {
        to: a.to.to_string(),
        scope: a.scope.to_string(),
        epoch: a.epoch.to_string(),
        at_ns: a.at_ns,
        body,
        mac,
        from,
        sig,
    };
    serde_json::to_string(&env).unwrap_or_default()
}

/// What a receiver remembers of the envelopes it has opened: their tags, while their
/// instants are still accepted.
#[derive(Default)]
pub struct Seen {
    tags: HashSet<String>,
    order: VecDeque<(u64, String)>,
}

impl Seen {
    fn forget_before(&mut self, oldest_ns: u64) {
        while let Some((at, _)) = self.order.front() {
            if *at >= oldest_ns && self.order.len() < SEEN_MAX {
                break;
            }
            if let Some((_, tag)) = self.order.pop_front() {
                self.tags.remove(&tag);
            }
        }
    }
}

/// How a receiver opens what it is sent.
#[derive(Clone, Copy)]
pub enum Opener<'a> {
    /// It takes bare messages.
    Bare,
    /// With the hub key every party shares.
    Shared(&'a HubKey),
    /// Signed by a key `accept` takes (an agent: a listed study key; a study: the key of the
    /// agent it wrote to); it says why it does not.
    Keys(&'a dyn Fn(&PublicKey) -> std::result::Result<(), String>),
}

/// What was opened: the body, and the key that signed it (with keys per party).
#[derive(Debug, PartialEq, Eq)]
pub struct Opened {
    /// The message.
    pub body: String,
    /// Its signer's key.
    pub signer: Option<PublicKey>,
}

/// What a receiver expects of an envelope: its recipient, its scope (any, for `None`), its
/// epoch (any, for `None`; a receiving agent always gives its own), the hub's clock now.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// Who the receiver is.
    pub to: &'a str,
    /// The scope the message must name.
    pub scope: Option<&'a str>,
    /// The epoch the message must name.
    pub epoch: Option<&'a str>,
    /// The hub's clock read now, ns.
    pub now_ns: u64,
}

/// Opens `text` received by `to`, with the hub's clock read `now_ns`: the body, after the
/// tag, the recipient, the instant and (with `scope`) the scope are checked, and a tag seen
/// before is refused. Without a key, `text` is the body. (The hub key's messages, for a
/// receiver that checks no epoch: see [`open_with`].)
pub fn open(
    key: Option<&HubKey>,
    to: &str,
    scope: Option<&str>,
    text: &str,
    now_ns: u64,
    seen: &mut Seen,
) -> std::result::Result<String, String> {
    let opener = key.map_or(Opener::Bare, Opener::Shared);
    let e = Expect {
        to,
        scope,
        epoch: None,
        now_ns,
    };
    open_with(opener, &e, text, seen).map(|o| o.body)
}

/// Opens `text` as `opener` does, expecting `e`: the signature (and, with keys per party,
/// whether its signer is one the receiver takes), then the recipient, the scope, the epoch,
/// the instant; a signature seen before is refused. Bare, `text` is the body.
pub fn open_with(
    opener: Opener,
    e: &Expect,
    text: &str,
    seen: &mut Seen,
) -> std::result::Result<Opened, String> {
    if let Opener::Bare = opener {
        return Ok(Opened {
            body: text.to_string(),
            signer: None,
        });
    }
    let env: Envelope = serde_json::from_str(text).map_err(|_| not_signed(opener))?;
    let a = Address {
        to: &env.to,
        scope: &env.scope,
        epoch: &env.epoch,
        at_ns: env.at_ns,
    };
    let (tag, signer) = match opener {
        Opener::Bare => return Err(not_signed(opener)),
        Opener::Shared(key) => {
            let mac = env.mac.as_deref().ok_or_else(|| not_signed(opener))?;
            let tag = unhex(mac).ok_or("a message whose signature is not hex")?;
            hmac::verify(&key.0, &tag_input(&a, &env.body), &tag)
                .map_err(|_| "a message whose signature does not match the hub key".to_string())?;
            (mac.to_string(), None)
        }
        Opener::Keys(accept) => {
            let (Some(from), Some(sig)) = (env.from.as_deref(), env.sig.as_deref()) else {
                return Err(not_signed(opener));
            };
            let key = PublicKey::parse(from)?;
            accept(&key)?;
            let bytes = keys::read_signature(sig)?;
            if !key.verifies(&signed_input(&a, from, &env.body), &bytes) {
                return Err(format!(
                    "a message whose signature does not match the key it names ({})",
                    key.short()
                ));
            }
            (sig.to_string(), Some(key))
        }
    };
    if env.to != e.to {
        return Err(format!(
            "a message signed for '{}', not for '{}'",
            env.to.escape_debug(),
            e.to
        ));
    }
    if let Some(s) = e.scope {
        if env.scope != s {
            return Err(format!(
                "a message signed for '{}', not for '{s}'",
                env.scope.escape_debug()
            ));
        }
    }
    if let Some(epoch) = e.epoch {
        if env.epoch != epoch {
            return Err(format!(
                "a message for epoch '{}', not this agent's current one '{epoch}' (sent before it started: a replay, or a study that has not seen it join again)",
                env.epoch.chars().take(80).collect::<String>().escape_debug()
            ));
        }
    }
    if env.at_ns.abs_diff(e.now_ns) > MAX_SKEW.as_nanos() as u64 {
        return Err(format!(
            "a message signed {:.0} s from the hub's clock (allowed: within {} s)",
            (env.at_ns as f64 - e.now_ns as f64) / 1e9,
            MAX_SKEW.as_secs()
        ));
    }
    seen.forget_before(e.now_ns.saturating_sub(2 * MAX_SKEW.as_nanos() as u64));
    if !seen.tags.insert(tag.clone()) {
        return Err("a message seen before (a replay)".into());
    }
    seen.order.push_back((env.at_ns, tag));
    Ok(Opened {
        body: env.body,
        signer,
    })
}

/// The refusal of a message not signed the way `opener` reads.
fn not_signed(opener: Opener) -> String {
    match opener {
        Opener::Keys(_) => {
            "a message not signed with a party's key (keys per party are used here)".into()
        }
        _ => format!("a message not signed with the hub key ({HUB_KEY_ENV} is set here)"),
    }
}

/// The scope a message names, read without checking it (to tell which run an answer is for
/// before opening it); a bare message has none.
pub fn scope_of(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Scope {
        scope: String,
    }
    serde_json::from_str::<Scope>(text).ok().map(|s| s.scope)
}

/// The body a message carries, read without checking its signature (to tell which share an
/// answer whose signature was refused claims to be, for the refusal's words only).
pub fn body_of(text: &str) -> Option<String> {
    serde_json::from_str::<Envelope>(text).ok().map(|e| e.body)
}

/// What an agent's heartbeat signature covers: a domain of its own and the heartbeat's JSON
/// without its signature.
pub fn beat_input(unsigned_json: &str) -> Vec<u8> {
    format!("{BEAT_DOMAIN}\0{unsigned_json}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000_000_000;

    #[test]
    fn a_sealed_message_opens_once_for_its_recipient_and_scope_only() {
        let key = HubKey::new("0123456789abcdef-secret").unwrap();
        let other = HubKey::new("another key, also long").unwrap();
        let text = seal(Some(&key), "a1", "run7", NOW, "{\"work\":\"stop\"}".into());
        let mut seen = Seen::default();
        assert!(open(Some(&other), "a1", None, &text, NOW, &mut seen)
            .unwrap_err()
            .contains("does not match"));
        assert!(open(Some(&key), "a2", None, &text, NOW, &mut seen)
            .unwrap_err()
            .contains("not for 'a2'"));
        assert!(open(Some(&key), "a1", Some("run8"), &text, NOW, &mut seen)
            .unwrap_err()
            .contains("run7"));
        let late = NOW + 61_000_000_000;
        assert!(open(Some(&key), "a1", None, &text, late, &mut seen)
            .unwrap_err()
            .contains("within 60 s"));
        assert_eq!(
            open(Some(&key), "a1", Some("run7"), &text, NOW, &mut seen).unwrap(),
            "{\"work\":\"stop\"}"
        );
        assert!(open(Some(&key), "a1", None, &text, NOW + 1, &mut seen)
            .unwrap_err()
            .contains("replay"));
        // A body changed in transit, and a message without an envelope.
        let forged = text.replace("stop", "part");
        assert!(open(Some(&key), "a1", None, &forged, NOW, &mut Seen::default()).is_err());
        assert!(open(
            Some(&key),
            "a1",
            None,
            "{\"work\":\"stop\"}",
            NOW,
            &mut seen
        )
        .unwrap_err()
        .contains(HUB_KEY_ENV));
        assert_eq!(scope_of(&text).as_deref(), Some("run7"));
        // Without a key, the message is the body.
        assert_eq!(seal(None, "a1", "s", NOW, "x".into()), "x");
        assert_eq!(open(None, "a1", None, "x", NOW, &mut seen).unwrap(), "x");
        assert!(HubKey::new("short").unwrap_err().to_string().contains("16"));
    }

    /// An agent's opener: signed by `listed` keys only.
    fn listed(list: &[PublicKey]) -> impl Fn(&PublicKey) -> std::result::Result<(), String> + '_ {
        move |k| {
            if list.contains(k) {
                Ok(())
            } else {
                Err(format!("{} is not a listed study key", k.short()))
            }
        }
    }

    #[test]
    fn a_party_signs_with_its_own_key_and_a_receiver_takes_only_the_keys_it_lists() {
        let (study, _) = SigningKey::generate().unwrap();
        let (agent, _) = SigningKey::generate().unwrap();
        let keys = [study.public()];
        let accept = listed(&keys);
        let opener = Opener::Keys(&accept);
        let to_a1 = Address {
            to: "a1",
            scope: "run7",
            epoch: "e1",
            at_ns: NOW,
        };
        let expect = Expect {
            to: "a1",
            scope: None,
            epoch: Some("e1"),
            now_ns: NOW,
        };
        let body = "{\"work\":\"stop\"}".to_string();
        // Signed by an agent's key: a signature that verifies, from a key not listed.
        let by_agent = seal_with(Sealer::Own(&agent), &to_a1, body.clone());
        let why = open_with(opener, &expect, &by_agent, &mut Seen::default()).unwrap_err();
        assert!(why.contains("not a listed study key"), "{why}");
        // Signed by the study: opens once, naming its signer.
        let text = seal_with(Sealer::Own(&study), &to_a1, body.clone());
        let mut seen = Seen::default();
        let opened = open_with(opener, &expect, &text, &mut seen).unwrap();
        assert_eq!(opened.body, body);
        assert_eq!(opened.signer, Some(study.public()));
        assert!(open_with(opener, &expect, &text, &mut seen)
            .unwrap_err()
            .contains("replay"));
        // Changed in transit: the body, or the key it names swapped for another listed one.
        let forged = text.replace("stop", "part");
        assert!(open_with(opener, &expect, &forged, &mut Seen::default())
            .unwrap_err()
            .contains("does not match"));
        // A bare message, and one with the hub key's tag, are not a party's.
        let hub_key = HubKey::new("0123456789abcdef-secret").unwrap();
        let shared = seal_with(Sealer::Shared(&hub_key), &to_a1, body.clone());
        for text in [body.as_str(), shared.as_str()] {
            assert!(open_with(opener, &expect, text, &mut Seen::default())
                .unwrap_err()
                .contains("not signed with a party's key"));
        }
    }

    #[test]
    fn work_is_bound_to_the_epoch_its_agent_published() {
        let (study, _) = SigningKey::generate().unwrap();
        let keys = [study.public()];
        let accept = listed(&keys);
        let hub_key = HubKey::new("0123456789abcdef-secret").unwrap();
        let before = new_epoch();
        let now = new_epoch();
        assert_ne!(before, now);
        assert!(check_epoch(&now).is_ok());
        assert!(check_epoch("").is_err() && check_epoch(&"a".repeat(65)).is_err());
        assert!(check_epoch("e1\u{1b}[2J").is_err());
        for (sealer, opener) in [
            (Sealer::Own(&study), Opener::Keys(&accept)),
            (Sealer::Shared(&hub_key), Opener::Shared(&hub_key)),
        ] {
            let at = |epoch| Address {
                to: "a1",
                scope: "run7",
                epoch,
                at_ns: NOW,
            };
            let expect = Expect {
                to: "a1",
                scope: None,
                epoch: Some(&now),
                now_ns: NOW,
            };
            // Sealed for the agent's earlier start: refused by the agent started since, with
            // a memory of nothing (a new process's).
            let old = seal_with(sealer, &at(&before), "{}".into());
            let why = open_with(opener, &expect, &old, &mut Seen::default()).unwrap_err();
            assert!(why.contains("epoch"), "{why}");
            // No epoch at all (what a study of the hub key's first round sent).
            let none = seal_with(sealer, &at(""), "{}".into());
            assert!(open_with(opener, &expect, &none, &mut Seen::default()).is_err());
            let ok = seal_with(sealer, &at(&now), "{}".into());
            assert!(open_with(opener, &expect, &ok, &mut Seen::default()).is_ok());
            // The epoch is signed: rewriting it breaks the signature.
            let moved = old.replace(&before, &now);
            assert!(open_with(opener, &expect, &moved, &mut Seen::default())
                .unwrap_err()
                .contains("does not match"));
        }
    }
}
