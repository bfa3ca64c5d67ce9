//! A key per party (issue 42, row 3): each study and each agent holds an Ed25519 signing key
//! of its own (aws-lc-rs, already compiled in for TLS) in a file, and lists the public keys of
//! the parties it trusts: an agent the studies' whose work it runs, a study the agents' whose
//! answers it takes (or it trusts an agent's key on first sight and says so). A key never
//! travels on a command line: `concur hub keygen --out FILE` writes one (PKCS#8 in PEM,
//! created 0600, no symbolic link followed) and prints its public half, which is what an
//! operator lists: `concur-ed25519:` and the base64 of its 32 bytes. Anchors: SSH's host and
//! user keys and `known_hosts`, WireGuard's peers.
//!
//! Everything here that comes from a file, the environment or the hub is bounded before it is
//! decoded: a key's text by its exact length, a signature's too, a list by its file's size and
//! its number of keys.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use base64::Engine;

use crate::base::error::{Error, Input, Result};

/// What a public key's text starts with.
pub const PUBLIC_PREFIX: &str = "concur-ed25519:";

/// The environment variable that names this party's signing key file (never the key itself).
pub use crate::plan::options::SIGNING_KEY_ENV;

/// The environment variable that holds the public keys of the studies an agent runs work
/// from (keys, not a file name: public keys are not secret), separated by commas, spaces or
/// new lines.
pub const STUDY_KEYS_ENV: &str = "CONCUR_STUDY_KEYS";

/// The largest private key file read (a PKCS#8 PEM of an Ed25519 key is under 200 bytes).
pub const MAX_KEY_FILE_BYTES: u64 = 16 << 10;

/// The largest list of public keys read (a file or the environment).
pub const MAX_LIST_BYTES: u64 = 1 << 20;

/// The most keys a list may hold.
pub const MAX_LISTED: usize = 10_000;

/// The length of a public key's text: the prefix and 44 characters of base64.
pub const PUBLIC_TEXT_LEN: usize = PUBLIC_PREFIX.len() + 44;

/// The length of a signature's text: 88 characters of base64 (64 bytes).
pub const SIGNATURE_TEXT_LEN: usize = 88;

/// The PEM armour of the private key file.
const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

/// What a key list's line looks like, for refusals.
const LINE_FORM: &str = "one key a line, `concur-ed25519:<44 characters of base64>`, then optionally a name; `#` starts a comment";

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// A party's public key: what it signs with, as others list it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// Reads a key's text (`concur-ed25519:BASE64`), its length checked before anything is
    /// decoded.
    pub fn parse(text: &str) -> std::result::Result<PublicKey, String> {
        let shown = || {
            let clipped: String = text.chars().take(24).collect();
            clipped.escape_debug().to_string()
        };
        if text.len() != PUBLIC_TEXT_LEN || !text.starts_with(PUBLIC_PREFIX) {
            return Err(format!(
                "'{}{}' is not a public key (expected: {PUBLIC_PREFIX} and 44 characters of base64, as concur hub keygen prints)",
                shown(),
                if text.chars().count() > 24 { "…" } else { "" }
            ));
        }
        let bytes = b64().decode(&text[PUBLIC_PREFIX.len()..]).map_err(|_| {
            format!(
                "'{}…' is not a public key: its base64 does not decode",
                shown()
            )
        })?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("'{}…' is not a public key: not 32 bytes", shown()))?;
        Ok(PublicKey(key))
    }

    /// Whether `sig` (64 bytes) is this key's signature of `msg`.
    pub fn verifies(&self, msg: &[u8], sig: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(msg, sig)
            .is_ok()
    }

    /// The start of its text, for lines a person reads (`concur-ed25519:AbCdEfGh…`).
    pub fn short(&self) -> String {
        let full = self.to_string();
        format!("{}…", &full[..PUBLIC_PREFIX.len() + 8])
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_PREFIX}{}", b64().encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// A signature's text: its 64 bytes in base64.
pub fn signature_text(sig: &[u8]) -> String {
    b64().encode(sig)
}

/// A signature from its text, its length checked before it is decoded.
pub fn read_signature(text: &str) -> std::result::Result<Vec<u8>, String> {
    if text.len() != SIGNATURE_TEXT_LEN {
        return Err(format!(
            "a signature of {} characters (expected: {SIGNATURE_TEXT_LEN} of base64)",
            text.len()
        ));
    }
    let sig = b64()
        .decode(text)
        .map_err(|_| "a signature whose base64 does not decode".to_string())?;
    if sig.len() != 64 {
        return Err("a signature that is not 64 bytes".into());
    }
    Ok(sig)
}

/// A party's own signing key.
pub struct SigningKey {
    pair: Ed25519KeyPair,
    public: PublicKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({})", self.public)
    }
}

impl SigningKey {
    /// A new key and its file's text (PKCS#8 v1 in PEM, the form OpenSSL reads too).
    pub fn generate() -> Result<(SigningKey, String)> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8v1(&rng)
            .map_err(|_| Error::Internal("generating an Ed25519 key failed".into()))?;
        let encoded = b64().encode(doc.as_ref());
        let mut pem = String::from(PEM_BEGIN);
        pem.push('\n');
        for chunk in encoded.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(chunk));
            pem.push('\n');
        }
        pem.push_str(PEM_END);
        pem.push('\n');
        let key = SigningKey::from_pem(&pem).map_err(Error::Internal)?;
        Ok((key, pem))
    }

    /// A key from its file's text: PKCS#8 (v1, as `openssl genpkey -algorithm ed25519`
    /// writes it, or v2) in PEM.
    pub fn from_pem(text: &str) -> std::result::Result<SigningKey, String> {
        let body = text
            .trim()
            .strip_prefix(PEM_BEGIN)
            .and_then(|t| t.strip_suffix(PEM_END))
            .ok_or_else(|| format!("not a PEM private key (no {PEM_BEGIN} … {PEM_END})"))?;
        let der: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let der = b64()
            .decode(der)
            .map_err(|_| "its base64 does not decode".to_string())?;
        let pair = Ed25519KeyPair::from_pkcs8(&der)
            .map_err(|e| format!("not an Ed25519 private key in PKCS#8 ({e})"))?;
        SigningKey::of_pair(pair)
    }

    /// Reads the key file `flag` names: a regular file of at most [`MAX_KEY_FILE_BYTES`],
    /// that no other user may read (as SSH holds its private keys), holding one key.
    pub fn load(flag: &str, path: &Path) -> Result<SigningKey> {
        use std::os::unix::fs::MetadataExt;
        let expected =
            "an Ed25519 private key in PKCS#8 PEM, as `concur hub keygen --out FILE` writes it";
        let bytes = crate::os::files::read_regular(flag, path, MAX_KEY_FILE_BYTES, expected)?;
        let refuse = |why: String| {
            Error::file(
                path,
                None,
                format!("{flag} '{}': {why} (expected: {expected})", path.display()),
            )
        };
        let mode = std::fs::metadata(path)
            .map_err(|e| refuse(e.to_string()))?
            .mode();
        if mode & 0o077 != 0 {
            return Err(Error::file(
                path,
                None,
                format!(
                    "{flag} '{}': other users may read or write it (mode {:04o}; allowed: its owner's alone, chmod 600)",
                    path.display(),
                    mode & 0o7777
                ),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|_| refuse("not text".into()))?;
        SigningKey::from_pem(&text).map_err(refuse)
    }

    /// The key of `pair`, its public half kept beside it.
    fn of_pair(pair: Ed25519KeyPair) -> std::result::Result<SigningKey, String> {
        let public: [u8; 32] = pair
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| "its public key is not 32 bytes".to_string())?;
        Ok(SigningKey {
            pair,
            public: PublicKey(public),
        })
    }

    /// A key from its 32-byte seed: the fixed keys of tests and fuzz harnesses (a party's
    /// key comes from [`SigningKey::generate`] and its file).
    pub fn from_seed(seed: &[u8; 32]) -> std::result::Result<SigningKey, String> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed).map_err(|e| e.to_string())?;
        SigningKey::of_pair(pair)
    }

    /// Its public half.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// Signs `msg`: the signature's text.
    pub fn sign(&self, msg: &[u8]) -> String {
        signature_text(self.pair.sign(msg).as_ref())
    }
}

/// Writes a new signing key to `path` (`concur hub keygen --out FILE`): created, never
/// overwritten, 0600, a symbolic link there refused. Returns its public key.
pub fn keygen(flag: &str, path: &Path) -> Result<PublicKey> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (key, pem) = SigningKey::generate()?;
    let cannot = |e: std::io::Error| {
        let why = match e.raw_os_error() {
            Some(libc::EEXIST) => {
                "it exists (allowed: a new file; a key is never overwritten)".to_string()
            }
            Some(libc::ELOOP) => "it is a symbolic link, which concur does not follow".into(),
            _ => e.to_string(),
        };
        // (No "key:" before the reason: stderr masks what follows a credential's name.)
        Error::flag(
            flag,
            format!("{flag} '{}': not written, {why}", path.display()),
        )
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(cannot)?;
    file.write_all(pem.as_bytes()).map_err(cannot)?;
    file.sync_all().map_err(cannot)?;
    Ok(key.public())
}

/// A list of public keys an operator wrote, each with the name it gives it (an agent's
/// name, in a study's list of agent keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyList {
    keys: Vec<(PublicKey, Option<String>)>,
}

impl KeyList {
    /// Reads a list's text: one key a line, then optionally a name; blank lines and `#`
    /// comments skipped; commas separate keys too (an environment variable's one line). The
    /// error is the line (from 1) and why.
    pub fn parse(text: &str) -> std::result::Result<KeyList, (usize, String)> {
        if text.len() as u64 > MAX_LIST_BYTES {
            return Err((0, format!("{} bytes (allowed: at most 1 MiB)", text.len())));
        }
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            for item in line.split(',') {
                let mut words = item.split_whitespace();
                let Some(first) = words.next() else {
                    continue;
                };
                let key = PublicKey::parse(first).map_err(|why| (i + 1, why))?;
                let name = words.next().map(str::to_string);
                if let Some(n) = &name {
                    super::check_name(n).map_err(|_| {
                        (
                            i + 1,
                            format!(
                                "'{}' is not an agent name (allowed: 1 to 64 letters, digits, '.', '_' or '-')",
                                n.escape_debug()
                            ),
                        )
                    })?;
                }
                if let Some(extra) = words.next() {
                    return Err((
                        i + 1,
                        format!("'{}' after the key and its name", extra.escape_debug()),
                    ));
                }
                if keys.len() == MAX_LISTED {
                    return Err((i + 1, format!("over {MAX_LISTED} keys")));
                }
                keys.push((key, name));
            }
        }
        Ok(KeyList { keys })
    }

    /// Reads the list in the file `flag` names; with `named`, every key must name its agent,
    /// and no name may come twice.
    pub fn load(flag: &str, path: &Path, named: bool) -> Result<KeyList> {
        let bytes = crate::os::files::read_regular(flag, path, MAX_LIST_BYTES, LINE_FORM)?;
        let refuse = |line: Option<u64>, why: String| {
            let at = line.map_or(String::new(), |l| format!(", line {l}"));
            Error::file(
                path,
                line,
                format!(
                    "{flag} '{}'{at}: {why} (expected: {LINE_FORM}{})",
                    path.display(),
                    if named {
                        "; here the name is the agent's, and required"
                    } else {
                        ""
                    }
                ),
            )
        };
        let text = String::from_utf8(bytes).map_err(|_| refuse(None, "not text".into()))?;
        let list = KeyList::parse(&text).map_err(|(l, why)| refuse(Some(l as u64), why))?;
        if list.keys.is_empty() {
            return Err(refuse(None, "no key in it".into()));
        }
        if named {
            let mut seen = BTreeSet::new();
            for (k, name) in &list.keys {
                let Some(name) = name else {
                    return Err(refuse(None, format!("{} names no agent", k.short())));
                };
                if !seen.insert(name) {
                    return Err(refuse(None, format!("agent '{name}' listed twice")));
                }
            }
        }
        Ok(list)
    }

    /// The list in the environment variable `var`, if it is set and not empty.
    pub fn from_env(var: &str) -> Result<Option<KeyList>> {
        let Some(text) = std::env::var(var).ok().filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        KeyList::parse(&text).map(Some).map_err(|(_, why)| {
            Error::bad(
                Input::Env(var.into()),
                format!("{var}: {why} (expected: public keys as concur hub keygen prints them, separated by commas or spaces)"),
            )
        })
    }

    /// This list and `other`'s keys.
    pub fn and(mut self, other: KeyList) -> KeyList {
        self.keys.extend(other.keys);
        self
    }

    /// Whether `key` is listed.
    pub fn contains(&self, key: &PublicKey) -> bool {
        self.keys.iter().any(|(k, _)| k == key)
    }

    /// The key listed for the agent `name`.
    pub fn key_of(&self, name: &str) -> Option<PublicKey> {
        self.keys
            .iter()
            .find(|(_, n)| n.as_deref() == Some(name))
            .map(|(k, _)| *k)
    }

    /// Its keys, in order.
    pub fn iter(&self) -> impl Iterator<Item = &PublicKey> {
        self.keys.iter().map(|(k, _)| k)
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_signs_and_only_its_public_half_verifies() {
        let (a, pem) = SigningKey::generate().unwrap();
        let (b, _) = SigningKey::generate().unwrap();
        let sig = read_signature(&a.sign(b"msg")).unwrap();
        assert!(a.public().verifies(b"msg", &sig));
        assert!(!a.public().verifies(b"msg2", &sig));
        assert!(!b.public().verifies(b"msg", &sig));
        // The file's text reads back as the same key; its public text reads back too.
        assert_eq!(SigningKey::from_pem(&pem).unwrap().public(), a.public());
        let text = a.public().to_string();
        assert_eq!(text.len(), PUBLIC_TEXT_LEN);
        assert_eq!(PublicKey::parse(&text).unwrap(), a.public());
        assert!(a.public().short().starts_with(PUBLIC_PREFIX));
    }

    #[test]
    fn malformed_keys_and_signatures_are_refused_before_decoding() {
        assert!(PublicKey::parse("").is_err());
        assert!(PublicKey::parse(&"x".repeat(1 << 20)).is_err());
        let bad = format!("{PUBLIC_PREFIX}{}", "!".repeat(44));
        assert!(PublicKey::parse(&bad).unwrap_err().contains("base64"));
        assert!(read_signature("abc").unwrap_err().contains("88"));
        assert!(read_signature(&"!".repeat(88)).is_err());
        assert!(SigningKey::from_pem("hello").unwrap_err().contains("PEM"));
        let junk = format!("{PEM_BEGIN}\nAAAA\n{PEM_END}\n");
        assert!(SigningKey::from_pem(&junk).unwrap_err().contains("PKCS#8"));
    }

    #[test]
    fn a_list_is_keys_a_line_with_names_comments_and_commas() {
        let (a, _) = SigningKey::generate().unwrap();
        let (b, _) = SigningKey::generate().unwrap();
        let text = format!(
            "# the lab's studies\n{} laptop\n\n{}, {}\n",
            a.public(),
            b.public(),
            a.public()
        );
        let list = KeyList::parse(&text).unwrap();
        assert_eq!(list.len(), 3);
        assert!(list.contains(&a.public()) && list.contains(&b.public()));
        assert_eq!(list.key_of("laptop"), Some(a.public()));
        assert_eq!(list.key_of("b"), None);
        let (line, why) = KeyList::parse(&format!("{}\nnot-a-key\n", a.public())).unwrap_err();
        assert_eq!(line, 2);
        assert!(why.contains("not a public key"), "{why}");
        let (line, why) = KeyList::parse(&format!("{} a b\n", a.public())).unwrap_err();
        assert_eq!(line, 1);
        assert!(why.contains("'b'"), "{why}");
        assert!(KeyList::parse(&format!("{} a;b\n", a.public())).is_err());
    }

    #[test]
    fn keygen_writes_a_private_file_once_and_follows_no_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("study.key");
        let public = keygen("--out", &path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            SigningKey::load("--signing-key", &path).unwrap().public(),
            public
        );
        let again = keygen("--out", &path).unwrap_err().to_string();
        assert!(again.contains("exists"), "{again}");
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
        assert!(keygen("--out", &link).is_err());
        assert!(!dir.path().join("elsewhere").exists());
        // Readable by others: refused, as SSH refuses it.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let open = SigningKey::load("--signing-key", &path)
            .unwrap_err()
            .to_string();
        assert!(open.contains("chmod 600"), "{open}");
    }
}
