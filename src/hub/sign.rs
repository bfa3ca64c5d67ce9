//! The hub key (`CONCUR_HUB_KEY`): a secret shared by a study and its agents, with which the
//! study signs the work it sends and the agents sign their answers, so that a Redis shared with
//! others cannot give an agent work or a study an answer. Each message travels in an envelope
//! that names its recipient, its scope (the run or study it belongs to) and the hub-clock
//! instant it was sent at; the HMAC-SHA256 (aws-lc-rs, already compiled in for TLS) covers all
//! of them and the body, so a message moved to another agent's list, another run, or sent
//! again later is refused: a receiver keeps the tags it has seen for as long as an envelope's
//! instant is accepted ([`MAX_SKEW`]).
//!
//! Without a key, messages travel as bare JSON, as before; a keyed receiver refuses them.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use aws_lc_rs::hmac;
use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};

/// The environment variable that holds the hub key (never a flag: `ps` shows every argv).
pub const HUB_KEY_ENV: &str = crate::base::secret::CHILD_ENV_SECRETS[0];

/// The shortest key accepted.
pub const MIN_KEY_BYTES: usize = 16;

/// How far an envelope's instant may be from the receiver's reading of the hub's clock.
pub const MAX_SKEW: Duration = Duration::from_secs(60);

/// What every tag's input starts with: a version and a domain of its own.
const DOMAIN: &str = "concur-hub-v1";

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

/// A signed message as it travels.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    /// Who it is for: an agent's name, or `study`.
    to: String,
    /// The run or study it belongs to.
    scope: String,
    /// When it was sent, on the hub's clock, ns.
    at_ns: u64,
    /// The message itself (JSON text).
    body: String,
    /// HMAC-SHA256 over the domain, `to`, `scope`, `at_ns` and `body`, in hex.
    mac: String,
}

fn tag_input(to: &str, scope: &str, at_ns: u64, body: &str) -> Vec<u8> {
    format!("{DOMAIN}\0{to}\0{scope}\0{at_ns}\0{body}").into_bytes()
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

/// Seals `body` for `to` in `scope` at `at_ns`: the envelope's text with a key, `body` as
/// it is without one.
pub fn seal(key: Option<&HubKey>, to: &str, scope: &str, at_ns: u64, body: String) -> String {
    let Some(key) = key else {
        return body;
    };
    let mac = hex(hmac::sign(&key.0, &tag_input(to, scope, at_ns, &body)).as_ref());
    let env = Envelope {
        to: to.to_string(),
        scope: scope.to_string(),
        at_ns,
        body,
        mac,
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

/// Opens `text` received by `to`, with the hub's clock read `now_ns`: the body, after the
/// tag, the recipient, the instant and (with `scope`) the scope are checked, and a tag seen
/// before is refused. Without a key, `text` is the body.
pub fn open(
    key: Option<&HubKey>,
    to: &str,
    scope: Option<&str>,
    text: &str,
    now_ns: u64,
    seen: &mut Seen,
) -> std::result::Result<String, String> {
    let Some(key) = key else {
        return Ok(text.to_string());
    };
    let env: Envelope = serde_json::from_str(text).map_err(|_| {
        format!("a message not signed with the hub key ({HUB_KEY_ENV} is set here)")
    })?;
    let tag = unhex(&env.mac).ok_or("a message whose signature is not hex")?;
    hmac::verify(
        &key.0,
        &tag_input(&env.to, &env.scope, env.at_ns, &env.body),
        &tag,
    )
    .map_err(|_| "a message whose signature does not match the hub key".to_string())?;
    if env.to != to {
        return Err(format!(
            "a message signed for '{}', not for '{to}'",
            env.to.escape_debug()
        ));
    }
    if let Some(s) = scope {
        if env.scope != s {
            return Err(format!(
                "a message signed for '{}', not for '{s}'",
                env.scope.escape_debug()
            ));
        }
    }
    if env.at_ns.abs_diff(now_ns) > MAX_SKEW.as_nanos() as u64 {
        return Err(format!(
            "a message signed {:.0} s from the hub's clock (allowed: within {} s)",
            (env.at_ns as f64 - now_ns as f64) / 1e9,
            MAX_SKEW.as_secs()
        ));
    }
    seen.forget_before(now_ns.saturating_sub(2 * MAX_SKEW.as_nanos() as u64));
    if !seen.tags.insert(env.mac.clone()) {
        return Err("a message seen before (a replay)".into());
    }
    seen.order.push_back((env.at_ns, env.mac));
    Ok(env.body)
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
}
