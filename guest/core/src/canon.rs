//! Canonical JSON and the hashes taken over it. Hashes are always over a canonical form,
//! never over text as received, so the same request hashes the same in every host.
use alloc::string::String;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Compact JSON with object keys sorted (serde_json's map is a BTreeMap without the
/// `preserve_order` feature) and no whitespace.
pub fn canonical(v: &Value) -> String {
    serde_json::to_string(v).expect("a Value always serializes")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Effect ids are 128 bits: at a billion effects the chance of any collision is about
/// 1.5e-21, and 32 hex digits stay readable in logs and fit every idempotency-key limit.
pub const EFFECT_ID_HEX_LEN: usize = 32;

/// The identity of an approved request: SHA-256 over the canonical key, or over the
/// canonical effect when the request has no key. Never from anything the model adds later.
pub fn effect_id_for(key: Option<&Value>, effect: &Value) -> String {
    let mut h = sha256_hex(canonical(key.unwrap_or(effect)).as_bytes());
    h.truncate(EFFECT_ID_HEX_LEN);
    h
}

pub fn is_effect_id(s: &str) -> bool {
    s.len() == EFFECT_ID_HEX_LEN
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_ignores_key_order_and_whitespace() {
        let a: Value =
            serde_json::from_str(r#"{"order":"order_881","amount_cents":2000}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{ "amount_cents" : 2000, "order" : "order_881" }"#).unwrap();
        assert_eq!(effect_id_for(None, &a), effect_id_for(None, &b));
        assert_eq!(effect_id_for(None, &a).len(), 32);
        assert!(is_effect_id(&effect_id_for(None, &a)));
    }

    #[test]
    fn identity_comes_from_the_key_when_given() {
        let key = json!("refund:order_881");
        let e20 = json!({"order":"order_881","amount_cents":2000});
        let e30 = json!({"order":"order_881","amount_cents":3000});
        assert_eq!(
            effect_id_for(Some(&key), &e20),
            effect_id_for(Some(&key), &e30)
        );
        assert_ne!(effect_id_for(None, &e20), effect_id_for(None, &e30));
        // Pinned: a change to canonicalization or hashing breaks every stored journal.
        assert_eq!(
            effect_id_for(Some(&key), &e20),
            &sha256_hex(br#""refund:order_881""#)[..32]
        );
    }
}
