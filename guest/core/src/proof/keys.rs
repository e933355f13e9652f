//! Ed25519 keys in the C2SP signed-note encoding (c2sp.org/signed-note, Go's
//! golang.org/x/mod/sumdb/note), so receipts, bundles and log checkpoints share one key:
//!
//! - verifier (public): `<name>+<key id, 8 hex>+<base64(0x01 || 32-byte public key)>`
//! - signer (private): `PRIVATE+KEY+<name>+<key id>+<base64(0x01 || 32-byte seed)>`
//!
//! where key id = SHA-256(name || 0x0A || 0x01 || public key)[..4]. No error names or
//! repeats a key's text: a signer key is a secret.
use alloc::format;
use alloc::string::{String, ToString};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use super::ProofError;

/// The signature type byte of Ed25519 in a signed note.
const ED25519: u8 = 0x01;
const PRIVATE: &str = "PRIVATE+KEY+";

/// A key's name: non-empty, no space, no `+`, no control character (it appears in a
/// note's signature lines).
pub fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c == '+' || c.is_control())
}

fn key_id(name: &str, public: &[u8; 32]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', ED25519]);
    h.update(public);
    let d = h.finalize();
    [d[0], d[1], d[2], d[3]]
}

/// A verifier key: checks what its signer signed.
#[derive(Clone, Debug)]
pub struct Verifier {
    pub name: String,
    pub id: [u8; 4],
    key: VerifyingKey,
}

/// A signer key (the secret half).
#[derive(Clone)]
pub struct Signer {
    pub name: String,
    pub id: [u8; 4],
    key: SigningKey,
}

impl core::fmt::Debug for Signer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the seed.
        write!(f, "Signer({})", self.label())
    }
}

/// `name+id`: how a signature names its key (never the key itself).
fn label(name: &str, id: &[u8; 4]) -> String {
    format!("{name}+{}", hex::encode(id))
}

fn bad(what: &str, problem: &str) -> ProofError {
    ProofError::BadKey(format!("{what}: {problem}"))
}

/// `name+hash8+base64` (the verifier form, or a signer's after `PRIVATE+KEY+`), checked:
/// its name, its id as 8 lowercase hex, its key as 0x01 and 32 bytes.
fn split<'a>(text: &'a str, what: &str) -> Result<(&'a str, [u8; 4], [u8; 32]), ProofError> {
    let mut parts = text.splitn(3, '+');
    let (Some(name), Some(id_hex), Some(data)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad(
            what,
            "not of the form <name>+<key id>+<key> (c2sp.org/signed-note)",
        ));
    };
    if !name_ok(name) {
        return Err(bad(
            what,
            "its name is empty or holds a space, a + or a control character",
        ));
    }
    let id_ok = id_hex.len() == 8
        && id_hex
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let id = hex::decode(id_hex)
        .ok()
        .filter(|_| id_ok)
        .ok_or_else(|| bad(what, "its key id is not 8 lowercase hex digits"))?;
    let bytes = B64
        .decode(data)
        .map_err(|_| bad(what, "its key is not standard base64"))?;
    match bytes.first() {
        Some(&ED25519) => {}
        Some(t) => {
            return Err(bad(
                what,
                &format!(
                "its signature type is 0x{t:02x}; this gate signs and checks Ed25519 (0x01) only"
            ),
            ))
        }
        None => return Err(bad(what, "its key is empty")),
    }
    let key: [u8; 32] = bytes[1..]
        .try_into()
        .map_err(|_| bad(what, "an Ed25519 key is 32 bytes after the type byte"))?;
    Ok((name, [id[0], id[1], id[2], id[3]], key))
}

/// A key as read from a file or the environment: one line, its trailing newline allowed.
fn one_line(text: &str) -> &str {
    text.trim_end_matches(['\n', '\r'])
}

impl Verifier {
    /// Parse a verifier key; a signer key given instead is refused, so a private key is
    /// never handed to a checker by mistake.
    pub fn parse(text: &str) -> Result<Verifier, ProofError> {
        let text = one_line(text);
        let what = "the public (verifier) key";
        if text.starts_with(PRIVATE) {
            return Err(bad(
                what,
                "this is a private signer key (PRIVATE+KEY+...); give its public key (interlock keygen prints both)",
            ));
        }
        let (name, id, public) = split(text, what)?;
        let key = VerifyingKey::from_bytes(&public)
            .map_err(|_| bad(what, "its 32 bytes are not an Ed25519 public key"))?;
        if key_id(name, &public) != id {
            return Err(bad(
                what,
                "its key id does not match its name and key (a mistyped or altered key)",
            ));
        }
        Ok(Verifier {
            name: name.to_string(),
            id,
            key,
        })
    }

    /// The key in its text form.
    pub fn text(&self) -> String {
        let mut data = alloc::vec![ED25519];
        data.extend_from_slice(self.key.as_bytes());
        format!("{}+{}", self.label(), B64.encode(data))
    }

    /// `name+id`.
    pub fn label(&self) -> String {
        label(&self.name, &self.id)
    }

    /// Does `sig` (64 bytes) sign `msg` under this key (RFC 8032, strict: no malleable
    /// signature, no weak key)?
    pub fn holds(&self, msg: &[u8], sig: &[u8]) -> bool {
        let Ok(sig) = <[u8; 64]>::try_from(sig) else {
            return false;
        };
        self.key
            .verify_strict(msg, &Signature::from_bytes(&sig))
            .is_ok()
    }
}

impl Signer {
    /// Parse a signer key (`PRIVATE+KEY+...`); a verifier key given instead is refused.
    pub fn parse(text: &str) -> Result<Signer, ProofError> {
        let text = one_line(text);
        let what = "the signing (private) key";
        let Some(rest) = text.strip_prefix(PRIVATE) else {
            return Err(bad(
                what,
                "it does not start with PRIVATE+KEY+ (a public key cannot sign; interlock keygen makes a pair)",
            ));
        };
        let (name, id, seed) = split(rest, what)?;
        let key = SigningKey::from_bytes(&seed);
        if key_id(name, key.verifying_key().as_bytes()) != id {
            return Err(bad(
                what,
                "its key id does not match its name and key (a mistyped or altered key)",
            ));
        }
        Ok(Signer {
            name: name.to_string(),
            id,
            key,
        })
    }

    /// A new key pair named `name` from 32 bytes of randomness the host drew (the gate has
    /// no source of randomness of its own).
    pub fn generate(name: &str, seed: &[u8]) -> Result<Signer, ProofError> {
        if !name_ok(name) {
            return Err(ProofError::BadKey(
                "a key's name must be non-empty, without spaces, + or control characters (a schema-less URL such as shop.example/interlock is recommended)".into(),
            ));
        }
        let seed: [u8; 32] = seed.try_into().map_err(|_| {
            ProofError::BadKey(format!(
                "a key is made from 32 random bytes; {} were given",
                seed.len()
            ))
        })?;
        let key = SigningKey::from_bytes(&seed);
        Ok(Signer {
            name: name.to_string(),
            id: key_id(name, key.verifying_key().as_bytes()),
            key,
        })
    }

    /// The signer key's text (the secret: for the host to store, never to print).
    pub fn text(&self) -> String {
        let mut data = alloc::vec![ED25519];
        data.extend_from_slice(self.key.as_bytes());
        format!("{PRIVATE}{}+{}", self.label(), B64.encode(data))
    }

    pub fn verifier(&self) -> Verifier {
        Verifier {
            name: self.name.clone(),
            id: self.id,
            key: self.key.verifying_key(),
        }
    }

    pub fn label(&self) -> String {
        label(&self.name, &self.id)
    }

    pub fn sign(&self, msg: &[u8]) -> [u8; 64] {
        self.key.sign(msg).to_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // golang.org/x/mod/sumdb/note's documented example key pair.
    pub const GO_SIGNER: &str =
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    pub const GO_VERIFIER: &str =
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";

    #[test]
    fn the_go_reference_keys_parse_and_match() {
        let s = Signer::parse(GO_SIGNER).unwrap();
        assert_eq!(s.text(), GO_SIGNER);
        assert_eq!(s.verifier().text(), GO_VERIFIER);
        let v = Verifier::parse(GO_VERIFIER).unwrap();
        assert_eq!(
            (v.name.as_str(), v.label().as_str()),
            ("PeterNeumann", "PeterNeumann+c74f20a3")
        );
        // A file's trailing newline is fine.
        assert!(Verifier::parse(&format!("{GO_VERIFIER}\n")).is_ok());
    }

    #[test]
    fn every_mangling_of_a_key_is_refused_without_echoing_it() {
        // As Go's TestNewVerifier / TestNewSigner: every strict substring, every byte + 1.
        for key in [GO_VERIFIER, GO_SIGNER] {
            let parse = |k: &str| {
                if key == GO_SIGNER {
                    Signer::parse(k).map(|_| ())
                } else {
                    Verifier::parse(k).map(|_| ())
                }
            };
            let b = key.as_bytes();
            for i in 0..b.len() {
                for j in i + 1..=b.len() {
                    if (i, j) == (0, b.len()) {
                        continue;
                    }
                    let Ok(k) = core::str::from_utf8(&b[i..j]) else {
                        continue;
                    };
                    // A trailing newline cut off is the same key; none of these end so.
                    let err = parse(k).unwrap_err();
                    let ProofError::BadKey(m) = err else {
                        panic!("{err:?}")
                    };
                    assert!(!m.contains("AYEKFALV") && !m.contains("ARpc2Q"), "{m}");
                }
            }
            for i in 0..b.len() {
                let mut m = b.to_vec();
                m[i] = m[i].wrapping_add(1);
                if let Ok(k) = core::str::from_utf8(&m) {
                    assert!(parse(k).is_err(), "{k}");
                }
            }
        }
        // Go's own: a wrong length and an unknown algorithm, each with a matching key id.
        assert!(Verifier::parse(
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=="
        )
        .is_err());
        assert!(Verifier::parse(
            "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
        )
        .is_err());
    }

    #[test]
    fn the_wrong_half_is_refused_saying_so() {
        let ProofError::BadKey(m) = Verifier::parse(GO_SIGNER).unwrap_err() else {
            panic!()
        };
        assert!(m.contains("private signer key"), "{m}");
        let ProofError::BadKey(m) = Signer::parse(GO_VERIFIER).unwrap_err() else {
            panic!()
        };
        assert!(m.contains("PRIVATE+KEY+"), "{m}");
    }

    #[test]
    fn a_generated_pair_round_trips() {
        let s = Signer::generate("shop.example/log", &[7u8; 32]).unwrap();
        let again = Signer::parse(&s.text()).unwrap();
        assert_eq!(again.text(), s.text());
        let v = Verifier::parse(&s.verifier().text()).unwrap();
        assert!(v.holds(b"x", &s.sign(b"x")));
        assert!(!v.holds(b"y", &s.sign(b"x")));
        assert!(Signer::generate("a b", &[7u8; 32]).is_err());
        assert!(Signer::generate("a+b", &[7u8; 32]).is_err());
        assert!(Signer::generate("ok", &[7u8; 31]).is_err());
    }
}
