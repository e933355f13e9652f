//! Authority (leases, approvals), premises and caps: the checks made right before a send
//! and again before any send by recovery.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{Map, Value};

use crate::canon::{canonical, sha256_hex};
use crate::entry::{Spelled, Stream};
use crate::proposal::{Bound, Cap};
use crate::types::{PremiseChange, Reason};

pub fn lease_stream(name: &str) -> String {
    format!("lease:{name}")
}
pub fn approval_stream(id: &str) -> String {
    format!("approval:{id}")
}
pub fn cap_stream(name: &str) -> String {
    format!("cap:{name}")
}
pub fn effect_stream(id: &str) -> String {
    format!("effect:{id}")
}

/// What an entry of a lease, approval or cap stream records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Granted,
    /// A lease or an approval withdrawn.
    Revoked,
    Approved,
    /// A share of a cap held for one effect's payload.
    Reserved,
    Released,
}

impl Mark {
    const ALL: [Mark; 5] = [
        Mark::Granted,
        Mark::Revoked,
        Mark::Approved,
        Mark::Reserved,
        Mark::Released,
    ];

    pub fn parse(s: &str) -> Option<Mark> {
        Mark::ALL.into_iter().find(|m| m.spelling() == s)
    }
}

impl Spelled for Mark {
    fn spelling(self) -> &'static str {
        match self {
            Mark::Granted => "GRANTED",
            Mark::Revoked => "REVOKED",
            Mark::Approved => "APPROVED",
            Mark::Reserved => "RESERVED",
            Mark::Released => "RELEASED",
        }
    }
}

/// A lease is live when it was granted, not revoked since, and its expiry is in the future.
pub fn check_lease(s: &Stream, now_ms: u64) -> Result<u64, Reason> {
    let last = s.last().ok_or(Reason::LeaseMissing)?;
    if Stream::mark_of(last) == Some(Mark::Revoked) {
        return Err(Reason::LeaseRevoked);
    }
    let until = last
        .get("expires_at_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if now_ms >= until {
        Err(Reason::LeaseExpired)
    } else {
        Ok(until)
    }
}

/// What an approval grants, as read back from its stream.
#[derive(Clone, Debug)]
pub struct Approval {
    pub approver: String,
    pub premises_seen: BTreeMap<String, Value>,
}

/// The approval in stream `s`, if it approves exactly this effect (its id and its payload)
/// and still holds at `now_ms`.
pub fn check_approval(
    s: &Stream,
    effect_id: &str,
    effect: &Value,
    now_ms: u64,
) -> Result<Approval, Reason> {
    let first = s.entries.first().ok_or(Reason::ApprovalMissing)?;
    if first.get("effect_id").and_then(Value::as_str) != Some(effect_id) {
        return Err(Reason::ApprovalMissing);
    }
    // Another payload under the same key (a $30 refund under a $20 approval) is another
    // request: not approved.
    let approved = first.get("effect_sha256").and_then(Value::as_str);
    if approved != Some(sha256_hex(canonical(effect).as_bytes()).as_str()) {
        return Err(Reason::ApprovalMissing);
    }
    if s.entries
        .iter()
        .any(|e| Stream::mark_of(e) == Some(Mark::Revoked))
    {
        return Err(Reason::ApprovalRevoked);
    }
    if let Some(until) = first.get("expires_at_ms").and_then(Value::as_u64) {
        if now_ms >= until {
            return Err(Reason::ApprovalExpired);
        }
    }
    let premises_seen = first
        .get("premises_seen")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let approver = first
        .get("approver")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(Approval {
        approver,
        premises_seen,
    })
}

/// A numeric value as an exact integer where possible, so cents never go through floats.
fn num(v: &Value) -> Option<i128> {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
}

fn within(bound: &Bound, now: &Value) -> bool {
    let (limit, at_most) = match bound {
        Bound::AtMost(x) => (x, true),
        Bound::AtLeast(x) => (x, false),
    };
    match (num(limit), num(now)) {
        (Some(l), Some(n)) => {
            if at_most {
                n <= l
            } else {
                n >= l
            }
        }
        _ => match (limit.as_f64(), now.as_f64()) {
            (Some(l), Some(n)) => {
                if at_most {
                    n <= l
                } else {
                    n >= l
                }
            }
            _ => false,
        },
    }
}

/// Compare premises read now with the recorded ones: equal by canonical JSON, or inside
/// the declared bound. A premise missing from the fresh read counts as changed.
pub fn compare_premises(
    recorded: &BTreeMap<String, Value>,
    bounds: &BTreeMap<String, Bound>,
    fresh: &Map<String, Value>,
) -> Vec<PremiseChange> {
    let mut changed = Vec::new();
    for (name, was) in recorded {
        let now = fresh.get(name).cloned().unwrap_or(Value::Null);
        let holds = match bounds.get(name) {
            Some(b) => within(b, &now),
            None => canonical(was) == canonical(&now),
        };
        if !holds {
            let was = match bounds.get(name) {
                Some(Bound::AtMost(x)) => format!("{{\"at_most\":{}}}", canonical(x)),
                Some(Bound::AtLeast(x)) => format!("{{\"at_least\":{}}}", canonical(x)),
                None => canonical(was),
            };
            changed.push(PremiseChange {
                name: name.clone(),
                was,
                now: canonical(&now),
            });
        }
    }
    changed
}

/// The shares held against a cap and not released, by (effect id, payload hash). A share is
/// keyed by payload too: two payloads racing under one key (a model that changed its mind)
/// each hold their own, so neither can shrink the other's; the same payload twice is one.
pub fn cap_shares(s: &Stream) -> BTreeMap<(String, String), u64> {
    let mut held = BTreeMap::new();
    for e in &s.entries {
        let field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let key = (field("effect_id"), field("payload_hash"));
        match Stream::mark_of(e) {
            Some(Mark::Reserved) => {
                held.insert(
                    key,
                    e.get("amount_cents").and_then(Value::as_u64).unwrap_or(0),
                );
            }
            Some(Mark::Released) => {
                held.remove(&key);
            }
            _ => {}
        }
    }
    held
}

pub fn cap_fits(cap: &Cap, others: u64) -> bool {
    others
        .checked_add(cap.amount_cents)
        .is_some_and(|t| t <= cap.limit_cents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn snapshot_premises_name_what_changed() {
        let rec: BTreeMap<String, Value> = [
            ("eligible".to_string(), json!(true)),
            ("refunded_by_others_cents".to_string(), json!(0)),
        ]
        .into();
        let none = BTreeMap::new();
        assert!(compare_premises(
            &rec,
            &none,
            &map(json!({"eligible": true, "refunded_by_others_cents": 0}))
        )
        .is_empty());
        let ch = compare_premises(
            &rec,
            &none,
            &map(json!({"eligible": false, "refunded_by_others_cents": 0})),
        );
        assert_eq!(
            ch,
            alloc::vec![PremiseChange {
                name: "eligible".into(),
                was: "true".into(),
                now: "false".into()
            }]
        );
        // A premise the host did not return is a change, never a pass.
        assert_eq!(
            compare_premises(&rec, &none, &map(json!({"eligible": true}))).len(),
            1
        );
    }

    #[test]
    fn bounds_tolerate_unrelated_changes_inside_them() {
        let rec: BTreeMap<String, Value> =
            [("refunded_by_others_cents".to_string(), json!(0))].into();
        let b: BTreeMap<String, Bound> = [(
            "refunded_by_others_cents".to_string(),
            Bound::AtMost(json!(1000)),
        )]
        .into();
        assert!(
            compare_premises(&rec, &b, &map(json!({"refunded_by_others_cents": 500}))).is_empty()
        );
        let ch = compare_premises(&rec, &b, &map(json!({"refunded_by_others_cents": 2000})));
        assert_eq!(ch[0].was, "{\"at_most\":1000}");
        assert_eq!(
            compare_premises(&rec, &b, &map(json!({"refunded_by_others_cents": "x"}))).len(),
            1
        );
    }
}
