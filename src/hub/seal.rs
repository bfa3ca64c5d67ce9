//! Shares sealed to the agent that runs them (issue 42, row 12): with keys per party, a share's
//! request (its URL, headers, body, certificates: whatever may carry a credential) travels
//! encrypted to its agent, so that a reader of the hub sees none of it.
//!
//! An Ed25519 key signs and cannot encrypt, so each agent makes an X25519 key pair when it
//! starts (kept in its memory only, never written) and publishes the public half in its
//! heartbeat, under the heartbeat's signature: a study trusts it only as far as it trusts the
//! agent's pinned signing key. A study seals each share with a key of its own for that one
//! message (ephemeral X25519), agreed with the agent's (ECDH), drawn through HKDF-SHA256 (salt:
//! both public keys) to an AES-256-GCM key; the associated data is the share's identity (the
//! agent's name, its epoch, the run and the share's index), so a blob moved to another share,
//! agent or start of the agent does not open. The key is new for every message, so its one
//! nonce (zero) is never used twice. The blob is `base64(ephemeral public key ‖ ciphertext ‖
//! tag)`, bounded by [`MAX_SEALED_CHARS`] before it is decoded. (An HPKE base mode of one
//! message, RFC 9180, in its parts: aws-lc-rs has no HPKE.)

use std::fmt;

use aws_lc_rs::{aead, agreement, hkdf};
use base64::Engine;

/// What a sealing key's text starts with.
pub const SEAL_PREFIX: &str = "concur-x25519:";

/// The length of a sealing key's text: the prefix and 44 characters of base64.
pub const SEAL_TEXT_LEN: usize = SEAL_PREFIX.len() + 44;

/// The longest sealed blob's text read: a work item's own bound (80 MiB, `admit`'s), which
/// the share inside is held to again once opened.
pub const MAX_SEALED_CHARS: usize = 80 << 20;

/// The shortest blob that can open: an ephemeral key and a tag.
const MIN_SEALED_BYTES: usize = 32 + 16;

/// The length of the text [`seal_to`] makes of `plain` bytes: the base64 of an ephemeral
/// key, the ciphertext and its tag (4/3 of the share).
pub fn sealed_chars(plain: usize) -> usize {
    4 * (plain + MIN_SEALED_BYTES).div_ceil(3)
}

/// The most bytes whose sealed text ([`sealed_chars`]) is at most `chars` long.
pub fn most_sealable(chars: usize) -> usize {
    (chars / 4 * 3).saturating_sub(MIN_SEALED_BYTES)
}

/// What the key derivation's input names, so that no other use of these keys derives the same.
const INFO: &[u8] = b"concur-hub-seal-v1";

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// An agent's public sealing key, as its heartbeat publishes it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SealKey([u8; 32]);

impl SealKey {
    /// Reads a key's text (`concur-x25519:BASE64`), its length checked before it is decoded.
    pub fn parse(text: &str) -> Result<SealKey, String> {
        if text.len() != SEAL_TEXT_LEN || !text.starts_with(SEAL_PREFIX) {
            return Err(format!(
                "'{}' is not a sealing key (expected: {SEAL_PREFIX} and 44 characters of base64)",
                text.chars().take(24).collect::<String>().escape_debug()
            ));
        }
        let bytes = b64()
            .decode(&text[SEAL_PREFIX.len()..])
            .map_err(|_| "a sealing key whose base64 does not decode".to_string())?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| "a sealing key that is not 32 bytes".to_string())?;
        Ok(SealKey(key))
    }
}

impl fmt::Display for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SEAL_PREFIX}{}", b64().encode(self.0))
    }
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey({self})")
    }
}

/// An agent's private sealing key: made when it starts, held in its memory only.
pub struct OpenKey {
    private: agreement::PrivateKey,
    public: SealKey,
}

impl fmt::Debug for OpenKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenKey({})", self.public)
    }
}

impl OpenKey {
    /// A new key pair (the system's random source).
    pub fn generate() -> Result<OpenKey, String> {
        let private = agreement::PrivateKey::generate(&agreement::X25519)
            .map_err(|_| "generating an X25519 key failed".to_string())?;
        OpenKey::of(private)
    }

    /// A key from its 32 bytes: the fixed keys of tests and fuzz harnesses.
    pub fn from_seed(seed: &[u8; 32]) -> Result<OpenKey, String> {
        let private = agreement::PrivateKey::from_private_key(&agreement::X25519, seed)
            .map_err(|e| format!("not an X25519 private key: {e}"))?;
        OpenKey::of(private)
    }

    fn of(private: agreement::PrivateKey) -> Result<OpenKey, String> {
        let public = private
            .compute_public_key()
            .map_err(|_| "computing an X25519 public key failed".to_string())?;
        let public: [u8; 32] = public
            .as_ref()
            .try_into()
            .map_err(|_| "an X25519 public key that is not 32 bytes".to_string())?;
        Ok(OpenKey {
            private,
            public: SealKey(public),
        })
    }

    /// Its public half, which the agent publishes.
    pub fn public(&self) -> SealKey {
        self.public
    }

    /// Opens `blob`, sealed to this key with associated data `ad`: the plaintext, or why not
    /// (the same words for every failure past the blob's form: no oracle to tell them apart).
    pub fn open(&self, ad: &[u8], blob: &str) -> Result<Vec<u8>, String> {
        if blob.len() > MAX_SEALED_CHARS {
            return Err(format!(
                "a sealed share of {} characters (allowed: at most {MAX_SEALED_CHARS})",
                blob.len()
            ));
        }
        let mut bytes = b64()
            .decode(blob)
            .map_err(|_| "a sealed share whose base64 does not decode".to_string())?;
        if bytes.len() < MIN_SEALED_BYTES {
            return Err(format!(
                "a sealed share of {} bytes (at least {MIN_SEALED_BYTES})",
                bytes.len()
            ));
        }
        let mut sealed = bytes.split_off(32);
        let peer: [u8; 32] = bytes
            .try_into()
            .map_err(|_| "a sealed share without its key".to_string())?;
        let refused = || {
            "a sealed share that does not open with this agent's key (sealed to another key, another share, or changed)"
                .to_string()
        };
        let key = agreement::agree(
            &self.private,
            agreement::UnparsedPublicKey::new(&agreement::X25519, peer),
            (),
            |secret| aead_key(secret, &peer, &self.public.0),
        )
        .map_err(|_| refused())?;
        let plain = key
            .open_in_place(
                aead::Nonce::assume_unique_for_key([0; aead::NONCE_LEN]),
                aead::Aad::from(ad),
                &mut sealed,
            )
            .map_err(|_| refused())?;
        Ok(plain.to_vec())
    }
}

/// The AEAD key of one message: HKDF-SHA256 over the agreed secret, salted with the
/// ephemeral and the recipient's public keys.
fn aead_key(
    secret: &[u8],
    ephemeral: &[u8; 32],
    recipient: &[u8; 32],
) -> Result<aead::LessSafeKey, ()> {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(ephemeral);
    salt[32..].copy_from_slice(recipient);
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &salt).extract(secret);
    let info = [INFO];
    let okm = prk.expand(&info, &aead::AES_256_GCM).map_err(|_| ())?;
    let key = aead::UnboundKey::from(okm);
    Ok(aead::LessSafeKey::new(key))
}

/// Seals `plain` to the agent key `to` with associated data `ad`: the blob's text.
pub fn seal_to(to: &SealKey, ad: &[u8], plain: &[u8]) -> Result<String, String> {
    let failed = || "sealing a share to its agent's key failed".to_string();
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let mine =
        agreement::EphemeralPrivateKey::generate(&agreement::X25519, &rng).map_err(|_| failed())?;
    let ephemeral: [u8; 32] = mine
        .compute_public_key()
        .map_err(|_| failed())?
        .as_ref()
        .try_into()
        .map_err(|_| failed())?;
    let key = agreement::agree_ephemeral(
        mine,
        agreement::UnparsedPublicKey::new(&agreement::X25519, to.0),
        (),
        |secret| aead_key(secret, &ephemeral, &to.0),
    )
    .map_err(|_| failed())?;
    let mut out = plain.to_vec();
    key.seal_in_place_append_tag(
        aead::Nonce::assume_unique_for_key([0; aead::NONCE_LEN]),
        aead::Aad::from(ad),
        &mut out,
    )
    .map_err(|_| failed())?;
    let mut blob = Vec::with_capacity(32 + out.len());
    blob.extend_from_slice(&ephemeral);
    blob.extend_from_slice(&out);
    Ok(b64().encode(blob))
}

/// The associated data of the share `part` of `run` for agent `agent` at its `epoch`.
pub fn share_ad(agent: &str, epoch: &str, run: &str, part: usize) -> Vec<u8> {
    format!("concur-hub-share-v1\0{agent}\0{epoch}\0{run}\0{part}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_share_opens_only_with_its_key_and_its_share() {
        let agent = OpenKey::generate().unwrap();
        let other = OpenKey::generate().unwrap();
        let ad = share_ad("a1", "e1", "run7", 0);
        let plain = b"{\"headers\":[\"Authorization: Bearer SECRET123\"]}";
        let blob = seal_to(&agent.public(), &ad, plain).unwrap();
        assert!(!blob.contains("SECRET123"));
        assert_eq!(agent.open(&ad, &blob).unwrap(), plain);
        assert_eq!(blob.len(), sealed_chars(plain.len()));
        for chars in [0, 64, 65, 1000, 80 << 20] {
            let most = most_sealable(chars);
            assert!(most == 0 || sealed_chars(most) <= chars, "{chars}");
            assert!(sealed_chars(most + 1) > chars, "{chars}");
        }
        // Each message its own ephemeral key: the same share sealed twice differs.
        assert_ne!(seal_to(&agent.public(), &ad, plain).unwrap(), blob);
        // Another agent's key.
        let why = other.open(&ad, &blob).unwrap_err();
        assert!(why.contains("does not open"), "{why}");
        // Another share, agent, epoch or run.
        for moved in [
            share_ad("a1", "e1", "run7", 1),
            share_ad("a2", "e1", "run7", 0),
            share_ad("a1", "e2", "run7", 0),
            share_ad("a1", "e1", "run8", 0),
        ] {
            assert!(agent.open(&moved, &blob).is_err());
        }
        // Changed in transit: a byte of the ciphertext, of the tag, of the ephemeral key.
        let bytes = b64().decode(&blob).unwrap();
        for at in [0, 40, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[at] ^= 1;
            assert!(agent.open(&ad, &b64().encode(&b)).is_err(), "byte {at}");
        }
        // Bounded and checked before decoding.
        assert!(agent.open(&ad, "").unwrap_err().contains("0 bytes"));
        assert!(agent.open(&ad, "!!!!").unwrap_err().contains("base64"));
        let huge = "A".repeat(MAX_SEALED_CHARS + 4);
        assert!(agent.open(&ad, &huge).unwrap_err().contains("at most"));
        // The public key's text reads back; others are refused.
        let text = agent.public().to_string();
        assert_eq!(text.len(), SEAL_TEXT_LEN);
        assert_eq!(SealKey::parse(&text).unwrap(), agent.public());
        assert!(SealKey::parse("concur-x25519:abc").is_err());
        assert!(SealKey::parse(&text.replace(SEAL_PREFIX, "concur-x25518:")).is_err());
        // A fixed seed gives the same key each time.
        let a = OpenKey::from_seed(&[3; 32]).unwrap();
        assert_eq!(a.public(), OpenKey::from_seed(&[3; 32]).unwrap().public());
        assert!(a
            .open(&ad, &seal_to(&a.public(), &ad, b"x").unwrap())
            .is_ok());
    }
}
