//! Receipts and verification. A receipt is derived from an effect's stream alone, so anyone
//! holding the journal can rebuild and check it; its head pins the stream against
//! truncation, and an HMAC-SHA256 signature lets a party holding the key (the service, an
//! auditor) check it was not edited.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::canon::{canonical, canonical_object};
use crate::entry::Stream;
use crate::journal::Journal;
use crate::types::{GateError, State};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    HashMismatch,
    BrokenLink,
    BadSeq,
    Unparsable,
    Truncated,
}

impl ProblemKind {
    /// The WIT spelling (`problem-kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::HashMismatch => "hash-mismatch",
            ProblemKind::BrokenLink => "broken-link",
            ProblemKind::BadSeq => "bad-seq",
            ProblemKind::Unparsable => "unparsable",
            ProblemKind::Truncated => "truncated",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub stream: String,
    pub seq: u64,
    pub kind: ProblemKind,
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub streams: u64,
    pub entries: u64,
    pub problems: Vec<Problem>,
}

fn get<'a>(e: &'a Map<String, Value>, k: &str) -> &'a Value {
    e.get(k).unwrap_or(&Value::Null)
}

fn vget<'a>(v: &'a Value, k: &str) -> &'a Value {
    v.get(k).unwrap_or(&Value::Null)
}

/// The receipt of one effect stream (schema: ARCHITECTURE.md, "Receipt").
pub fn build(effect_id: &str, s: &Stream) -> Value {
    let find = |state: State| {
        s.entries
            .iter()
            .find(|e| Stream::state_of(e) == Some(state))
    };
    let proposed = find(State::Proposed);
    let last_final = s.entries.iter().rev().find(|e| {
        matches!(
            Stream::state_of(e),
            Some(State::Committed | State::Refused | State::Ambiguous)
        )
    });
    let sends = s
        .entries
        .iter()
        .filter(|e| Stream::state_of(e) == Some(State::Dispatched))
        .count();
    // As stored: a receipt repeats the journal, whatever it says.
    let final_state = s
        .last()
        .map(|e| Stream::spelling_of(e).to_string())
        .unwrap_or_default();

    let mut r = Map::new();
    r.insert("receipt".into(), "interlock/0.1".into());
    r.insert("effect_id".into(), effect_id.into());
    if let Some(p) = proposed {
        let prop = get(p, "proposal");
        r.insert("agent".into(), vget(prop, "agent").clone());
        r.insert("effect".into(), vget(prop, "effect").clone());
        r.insert("target".into(), vget(prop, "target").clone());
        let mut o = Map::new();
        o.insert("at_ms".into(), get(p, "at_ms").clone());
        o.insert("premises".into(), vget(prop, "premises").clone());
        o.insert("authority".into(), vget(prop, "authority").clone());
        r.insert("proposed".into(), Value::Object(o));
    }
    // Authorized when it fired: every DISPATCHED follows an AUTHORIZED that recorded checks.
    let mut authorized = Vec::new();
    for e in s
        .entries
        .iter()
        .filter(|e| Stream::state_of(e) == Some(State::Authorized))
    {
        let mut o = Map::new();
        o.insert("at_ms".into(), get(e, "at_ms").clone());
        o.insert("checks".into(), get(e, "checks").clone());
        authorized.push(Value::Object(o));
    }
    r.insert("authorized".into(), Value::Array(authorized));
    let executed = match last_final {
        _ if find(State::Confirmed).is_some() => "yes".to_string(),
        Some(f) if Stream::state_of(f) == Some(State::Committed) => "yes".to_string(),
        Some(f) => f
            .get("executed")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        None if sends == 0 => "no".into(),
        None => "unknown".into(),
    };
    r.insert("executed".into(), executed.into());
    // Attempts, not refunds: a tier-1 resend under the same key is deduped by the target.
    r.insert("attempts".into(), (sends as u64).into());
    // Recorded: the intent was durable before any send, or the refusal was recorded.
    r.insert("recorded".into(), (!s.entries.is_empty()).into());
    r.insert("final".into(), final_state.into());
    if let Some(f) = last_final {
        for k in ["reason", "changed", "result", "return_to", "via"] {
            if let Some(v) = f.get(k) {
                r.insert(k.into(), v.clone());
            }
        }
    }
    if let Some(c) = find(State::Confirmed) {
        r.insert("confirmed".into(), get(c, "evidence").clone());
    }
    let entries = s
        .entries
        .iter()
        .map(|e| {
            let mut o = Map::new();
            for k in ["seq", "state", "at_ms", "via", "attempt", "hash"] {
                if let Some(v) = e.get(k) {
                    o.insert(k.into(), v.clone());
                }
            }
            Value::Object(o)
        })
        .collect();
    r.insert("entries".into(), Value::Array(entries));
    let mut head = Map::new();
    head.insert("length".into(), s.len().into());
    head.insert("hash".into(), s.head.clone().into());
    r.insert("head".into(), Value::Object(head));
    r.insert("stream".into(), s.name.clone().into());
    Value::Object(r)
}

fn mac(key: &[u8], body: &Value) -> String {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    m.update(canonical(body).as_bytes());
    hex::encode(m.finalize().into_bytes())
}

pub fn sign(mut receipt: Value, key: &[u8]) -> Value {
    let sig = mac(key, &receipt);
    let mut s = Map::new();
    s.insert("alg".into(), "HMAC-SHA256".into());
    s.insert("value".into(), sig.into());
    receipt
        .as_object_mut()
        .expect("a receipt is an object")
        .insert("signature".into(), Value::Object(s));
    receipt
}

/// The signature is over the canonical receipt without its `signature` member.
pub fn signature_holds(receipt: &Value, key: &[u8]) -> bool {
    let Some(obj) = receipt.as_object() else {
        return false;
    };
    let Some(given) = obj
        .get("signature")
        .and_then(|s| s.get("value"))
        .and_then(Value::as_str)
    else {
        return false;
    };
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    m.update(canonical_object(obj, Some("signature")).as_bytes());
    match hex::decode(given) {
        Ok(bytes) => m.verify_slice(&bytes).is_ok(),
        Err(_) => false,
    }
}

/// Check an anchor (a receipt's stream and head) against the stream as stored.
pub fn anchor_problem(anchor: &Value, s: &Stream) -> Option<Problem> {
    let length = anchor
        .get("head")
        .and_then(|h| h.get("length"))
        .and_then(Value::as_u64)?;
    let hash = anchor
        .get("head")
        .and_then(|h| h.get("hash"))
        .and_then(Value::as_str)?;
    let truncated = |seq: u64, detail: String| {
        Some(Problem {
            stream: s.name.clone(),
            seq,
            kind: ProblemKind::Truncated,
            detail,
        })
    };
    if s.len() < length {
        return truncated(
            s.len(),
            format!(
                "the receipt pins {length} entries, the journal holds {}",
                s.len()
            ),
        );
    }
    if length == 0 {
        return None;
    }
    let at = &s.entries[(length - 1) as usize];
    if at.get("hash").and_then(Value::as_str) != Some(hash) {
        return truncated(
            length - 1,
            "the entry the receipt pins as head differs: the tail was rewritten".into(),
        );
    }
    None
}

/// Every `{stream, head}` a list of anchors pins: each anchor, and a receipt's own anchors
/// (the authority streams it relied on) and its people part.
fn expand(anchors: &[Value]) -> Vec<&Value> {
    let mut out = Vec::new();
    for a in anchors {
        out.push(a);
        for inner in a
            .get("anchors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push(inner);
        }
        if let Some(p) = a.get("people").filter(|p| p.get("stream").is_some()) {
            out.push(p);
        }
    }
    out
}

/// Streams read and verified once, for every check of one `verify`: each stream's
/// verified chain, or the first problem in it, in the order they were named.
pub(crate) struct Streams {
    read: Vec<(String, Result<Stream, Problem>)>,
    at: BTreeMap<String, usize>,
    entries: u64,
}

impl Streams {
    /// Read and verify the chains of `names`.
    pub fn read(j: &mut dyn Journal, names: &[String]) -> Result<Streams, GateError> {
        let mut out = Streams {
            read: Vec::with_capacity(names.len()),
            at: BTreeMap::new(),
            entries: 0,
        };
        for name in names {
            let lines = j.read(name, 0)?;
            out.entries += lines.len() as u64;
            out.at.insert(name.clone(), out.read.len());
            out.read.push((name.clone(), Stream::parse(name, &lines)));
        }
        Ok(out)
    }

    /// Stream `name` as read, when it was read: its chain, or the first problem in it.
    pub fn result(&self, name: &str) -> Option<&Result<Stream, Problem>> {
        self.at.get(name).map(|i| &self.read[*i].1)
    }

    /// Stream `name` when it was read and its chain holds.
    pub fn get(&self, name: &str) -> Option<&Stream> {
        self.result(name).and_then(|r| r.as_ref().ok())
    }

    /// The report: each stream's chain problem, or each anchor's against it, in order; then
    /// each anchor whose stream was not read (a stream gone is a truncation at 0).
    pub fn report(&self, anchors: &[Value]) -> VerifyReport {
        let anchors = &expand(anchors);
        let mut report = VerifyReport {
            streams: self.read.len() as u64,
            entries: self.entries,
            problems: Vec::new(),
        };
        for (name, read) in &self.read {
            match read {
                Err(p) => report.problems.push(p.clone()),
                Ok(s) => {
                    for a in anchors
                        .iter()
                        .filter(|a| a.get("stream").and_then(Value::as_str) == Some(name.as_str()))
                    {
                        report.problems.extend(anchor_problem(a, s));
                    }
                }
            }
        }
        // An anchor whose stream is gone entirely is the most complete truncation of all.
        for a in anchors {
            if let Some(stream) = a.get("stream").and_then(Value::as_str) {
                if !self.at.contains_key(stream) {
                    report.problems.push(Problem {
                        stream: stream.into(),
                        seq: 0,
                        kind: ProblemKind::Truncated,
                        detail: "the receipt's stream is missing".into(),
                    });
                }
            }
        }
        report
    }
}
