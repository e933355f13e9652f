//! Signed webhooks from a service, checked exactly as the schemes document them, and the
//! event read for the effect it speaks of. Pure: the gate records what a checked event
//! confirms (`Gate::webhook`).
//!
//! - **Stripe** (`Stripe-Signature: t=<unix s>,v1=<hex>[,v1=<hex>...]`): HMAC-SHA256 with
//!   the endpoint secret over `<t>.<body>`, any `v1` matching (other schemes ignored), and
//!   the timestamp no older than the tolerance (Stripe's libraries: 300 s by default).
//! - **Standard Webhooks** (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>
//!   [v1,<base64>...]`; the secret `whsec_<base64>`): HMAC-SHA256 over
//!   `<id>.<timestamp>.<body>`, the timestamp within the tolerance either way (5 minutes).
//!
//! Every comparison of a signature is constant-time (`hmac`'s `verify_slice`).
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Stripe's default tolerance, and Standard Webhooks'.
pub const DEFAULT_TOLERANCE_S: u64 = 300;

/// The schemes the gate checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Stripe,
    Standard,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Stripe => "stripe",
            Scheme::Standard => "standard-webhooks",
        }
    }

    /// The scheme a name (`as_str`) spells.
    pub fn parse(name: &str) -> Option<Scheme> {
        match name {
            "stripe" => Some(Scheme::Stripe),
            "standard-webhooks" => Some(Scheme::Standard),
            _ => None,
        }
    }
}

/// A webhook as received: how it is signed, its headers and its raw body.
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    pub scheme: Scheme,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

/// Why a webhook was not accepted; nothing is recorded for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookError {
    /// A header the scheme needs is missing or malformed (which, and why).
    Malformed(String),
    /// No signature matches: a tampered body or a wrong secret.
    Mismatch,
    /// The timestamp is outside the tolerance (a replay, or a clock far off).
    OutsideTolerance { age_s: i64, tolerance_s: u64 },
    /// The secret is not usable (Standard Webhooks: not `whsec_` + base64).
    BadSecret(String),
}

impl core::fmt::Display for WebhookError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WebhookError::Malformed(m) => write!(f, "{m}"),
            WebhookError::Mismatch => write!(
                f,
                "no signature matches the body: it was changed, or signed with another secret"
            ),
            WebhookError::OutsideTolerance { age_s, tolerance_s } => write!(
                f,
                "the timestamp is {age_s} s from now, outside the {tolerance_s} s tolerance (a replay, or a clock far off)"
            ),
            WebhookError::BadSecret(m) => write!(f, "{m}"),
        }
    }
}

fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn mac(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    for p in parts {
        m.update(p);
    }
    m
}

/// Checks a Stripe webhook; answers the event's id (the `id` of the JSON body is checked
/// by the caller that parses it, so here: the signed timestamp).
pub fn verify_stripe(
    headers: &[(String, String)],
    body: &[u8],
    secret: &str,
    now_s: u64,
    tolerance_s: u64,
) -> Result<(), WebhookError> {
    let h = header(headers, "stripe-signature")
        .ok_or_else(|| WebhookError::Malformed("no Stripe-Signature header".into()))?;
    let mut t: Option<&str> = None;
    let mut v1 = Vec::new();
    for part in h.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = Some(v),
            Some(("v1", v)) => v1.push(v),
            _ => {}
        }
    }
    let t =
        t.ok_or_else(|| WebhookError::Malformed("Stripe-Signature has no timestamp (t=)".into()))?;
    let ts: i64 = t.parse().map_err(|_| {
        WebhookError::Malformed(format!(
            "Stripe-Signature's timestamp {t:?} is not a number"
        ))
    })?;
    if v1.is_empty() {
        return Err(WebhookError::Malformed(
            "Stripe-Signature has no v1 signature".into(),
        ));
    }
    let signed = mac(secret.as_bytes(), &[t.as_bytes(), b".", body]);
    let matched = v1
        .iter()
        .any(|sig| hex::decode(sig).is_ok_and(|bytes| signed.clone().verify_slice(&bytes).is_ok()));
    if !matched {
        return Err(WebhookError::Mismatch);
    }
    // Stripe's libraries refuse an event older than the tolerance (age from the signed t).
    let age = now_s as i64 - ts;
    if age > tolerance_s as i64 {
        return Err(WebhookError::OutsideTolerance {
            age_s: age,
            tolerance_s,
        });
    }
    Ok(())
}

/// A Standard Webhooks secret's key: `whsec_` (optional) followed by base64.
pub fn standard_secret(secret: &str) -> Result<Vec<u8>, WebhookError> {
    let key_b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    base64::engine::general_purpose::STANDARD
        .decode(key_b64)
        .ok()
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            WebhookError::BadSecret("the secret is not base64 (whsec_ followed by base64)".into())
        })
}

/// Signs a Standard Webhooks message: the `webhook-signature` header's value (`v1,<base64>`)
/// for this id, timestamp and body, what a receiver's library checks.
pub fn sign_standard(
    secret: &str,
    id: &str,
    timestamp_s: u64,
    body: &[u8],
) -> Result<String, WebhookError> {
    let key = standard_secret(secret)?;
    let ts = timestamp_s.to_string();
    let sig = mac(&key, &[id.as_bytes(), b".", ts.as_bytes(), b".", body])
        .finalize()
        .into_bytes();
    Ok(format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(sig)
    ))
}

/// Checks a Standard Webhooks message; answers its `webhook-id` (what a replay repeats).
pub fn verify_standard(
    headers: &[(String, String)],
    body: &[u8],
    secret: &str,
    now_s: u64,
    tolerance_s: u64,
) -> Result<String, WebhookError> {
    let need = |name: &str| {
        header(headers, name).ok_or_else(|| WebhookError::Malformed(format!("no {name} header")))
    };
    let id = need("webhook-id")?;
    let ts_text = need("webhook-timestamp")?;
    let sigs = need("webhook-signature")?;
    let key = standard_secret(secret)?;
    let ts: i64 = ts_text.parse().map_err(|_| {
        WebhookError::Malformed(format!("webhook-timestamp {ts_text:?} is not a number"))
    })?;
    let signed = mac(&key, &[id.as_bytes(), b".", ts_text.as_bytes(), b".", body]);
    let matched = sigs.split(' ').any(|s| match s.split_once(',') {
        Some(("v1", b64)) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .is_ok_and(|bytes| signed.clone().verify_slice(&bytes).is_ok()),
        _ => false,
    });
    if !matched {
        return Err(WebhookError::Mismatch);
    }
    let age = now_s as i64 - ts;
    if age.unsigned_abs() > tolerance_s {
        return Err(WebhookError::OutsideTolerance {
            age_s: age,
            tolerance_s,
        });
    }
    Ok(id.to_string())
}

/// What a checked event says of one effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The event's id: Stripe's `evt_...`, or the `webhook-id`.
    pub id: String,
    pub kind: String,
    /// The effect id the service was given as the reference.
    pub effect_id: String,
    /// Whether the service says the effect happened (`succeeded`) or did not (`failed`,
    /// `canceled`); `None` when it says neither yet (`pending`).
    pub happened: Option<bool>,
}

/// The metadata key under which a target passes the effect id to Stripe.
pub const STRIPE_METADATA_KEY: &str = "interlock_effect_id";

fn status_happened(status: Option<&str>) -> Option<bool> {
    match status? {
        "succeeded" => Some(true),
        "failed" | "canceled" => Some(false),
        _ => None,
    }
}

/// The effect a Stripe event speaks of: a refund object (`refund.*` events) or a charge's
/// refunds (`charge.refunded`, `charge.refund.updated`), by the refund's
/// `metadata.interlock_effect_id`.
pub fn stripe_event(v: &Value) -> Result<Event, String> {
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .ok_or("the event has no id")?;
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or("the event has no type")?;
    let object = v
        .pointer("/data/object")
        .ok_or("the event has no data.object")?;
    let refunds: Vec<&Value> = match object.get("object").and_then(Value::as_str) {
        Some("refund") => Vec::from([object]),
        Some("charge") => object
            .pointer("/refunds/data")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        other => {
            return Err(format!(
                "an event about {other:?}, not a refund or a charge"
            ))
        }
    };
    let refund = refunds
        .into_iter()
        .find(|r| {
            r.pointer(&format!("/metadata/{STRIPE_METADATA_KEY}"))
                .is_some()
        })
        .ok_or_else(|| format!("no refund in it carries metadata.{STRIPE_METADATA_KEY}"))?;
    let effect_id = refund
        .pointer(&format!("/metadata/{STRIPE_METADATA_KEY}"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("metadata.{STRIPE_METADATA_KEY} is not a string"))?;
    Ok(Event {
        id: id.into(),
        kind: kind.into(),
        effect_id: effect_id.into(),
        happened: status_happened(refund.get("status").and_then(Value::as_str)),
    })
}

/// The effect a Standard Webhooks message speaks of: `{"type": ..., "data":
/// {"interlock_effect_id": ..., "status": "succeeded" | "failed" | ...}}` (the schema a
/// service is asked to send; the spec fixes only `type`, `timestamp` and `data`).
pub fn standard_event(id: &str, v: &Value) -> Result<Event, String> {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or("the message has no type")?;
    let effect_id = v
        .pointer(&format!("/data/{STRIPE_METADATA_KEY}"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the message has no data.{STRIPE_METADATA_KEY}"))?;
    Ok(Event {
        id: id.into(),
        kind: kind.into(),
        effect_id: effect_id.into(),
        happened: status_happened(v.pointer("/data/status").and_then(Value::as_str)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn stripe_header(secret: &str, t: u64, body: &[u8]) -> String {
        let sig = mac(secret.as_bytes(), &[t.to_string().as_bytes(), b".", body])
            .finalize()
            .into_bytes();
        format!("t={t},v1={},v0=ignored", hex::encode(sig))
    }

    #[test]
    fn stripe_signatures_as_documented() {
        let body = br#"{"id":"evt_1"}"#;
        let h = |v: String| vec![("Stripe-Signature".to_string(), v)];
        let good = stripe_header("whsec_test", 1000, body);
        assert_eq!(
            verify_stripe(&h(good.clone()), body, "whsec_test", 1100, 300),
            Ok(())
        );
        // One of several v1 signatures matching is enough (a secret being rolled).
        let two = format!(
            "t=1000,v1={},{}",
            "00".repeat(32),
            good.split(',').nth(1).unwrap()
        );
        assert_eq!(
            verify_stripe(&h(two), body, "whsec_test", 1000, 300),
            Ok(())
        );
        assert_eq!(
            verify_stripe(
                &h(good.clone()),
                br#"{"id":"evt_2"}"#,
                "whsec_test",
                1000,
                300
            ),
            Err(WebhookError::Mismatch)
        );
        assert_eq!(
            verify_stripe(&h(good.clone()), body, "whsec_other", 1000, 300),
            Err(WebhookError::Mismatch)
        );
        assert_eq!(
            verify_stripe(&h(good), body, "whsec_test", 1301, 300),
            Err(WebhookError::OutsideTolerance {
                age_s: 301,
                tolerance_s: 300
            })
        );
        assert!(matches!(
            verify_stripe(&[], body, "s", 0, 300),
            Err(WebhookError::Malformed(_))
        ));
        assert!(matches!(
            verify_stripe(&h("v1=ab".into()), body, "s", 0, 300),
            Err(WebhookError::Malformed(_))
        ));
    }

    #[test]
    fn standard_webhooks_as_specified() {
        // The specification's example (standard-webhooks/spec): secret, id, timestamp,
        // payload and the signature its reference libraries produce.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let headers = vec![
            (
                "webhook-id".to_string(),
                "msg_p5jXN8AQM9LWM0D4loKWxJek".to_string(),
            ),
            ("webhook-timestamp".to_string(), "1614265330".to_string()),
            (
                "webhook-signature".to_string(),
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".to_string(),
            ),
        ];
        assert_eq!(
            verify_standard(&headers, body, secret, 1614265330, 300).as_deref(),
            Ok("msg_p5jXN8AQM9LWM0D4loKWxJek")
        );
        assert_eq!(
            verify_standard(&headers, b"{}", secret, 1614265330, 300),
            Err(WebhookError::Mismatch)
        );
        assert!(matches!(
            verify_standard(&headers, body, secret, 1614265330 + 301, 300),
            Err(WebhookError::OutsideTolerance { .. })
        ));
        assert!(matches!(
            verify_standard(&headers, body, secret, 1614265330 - 301, 300),
            Err(WebhookError::OutsideTolerance { .. })
        ));
        assert!(matches!(
            verify_standard(&headers, body, "whsec_%%%", 1614265330, 300),
            Err(WebhookError::BadSecret(_))
        ));
    }

    #[test]
    fn events_name_their_effect() {
        let refund = serde_json::json!({"id": "evt_1", "type": "refund.updated", "data": {"object": {
            "object": "refund", "status": "succeeded", "metadata": {"interlock_effect_id": "abc"}}}});
        let e = stripe_event(&refund).unwrap();
        assert_eq!((e.effect_id.as_str(), e.happened), ("abc", Some(true)));
        let charge = serde_json::json!({"id": "evt_2", "type": "charge.refunded", "data": {"object": {
            "object": "charge", "refunds": {"data": [
                {"object": "refund", "status": "failed", "metadata": {"interlock_effect_id": "def"}}]}}}});
        assert_eq!(stripe_event(&charge).unwrap().happened, Some(false));
        let none = serde_json::json!({"id": "evt_3", "type": "refund.created", "data": {"object": {
            "object": "refund", "status": "pending", "metadata": {}}}});
        assert!(stripe_event(&none).is_err());
    }
}
