//! After the fact: an operator's confirmation, receipts, and verification of the journal.
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Value};

use super::outcome::recorded_outcome;
use super::Gate;
use crate::authority::{approval_stream, cap_stream, effect_stream, lease_stream};
use crate::canon::canonical;
use crate::entry::Stream;
use crate::fields;
use crate::journal::Journal;
use crate::proposal::{check_effect_id, field_err, parse_json};
use crate::receipt::{self, Streams, VerifyReport};
use crate::schema::Obj;
use crate::types::{GateError, Outcome, State};

/// What a receipt pins: each stream it rests on, at a length.
pub(crate) type Pins = BTreeMap<String, u64>;

/// The streams an effect's decision relied on besides its own: the lease or approval its
/// proposal named, its cap, and, when people decided, the approval rules and each
/// decider's own lease.
fn authority_streams(s: &Stream, people: Option<&Value>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let proposal = s
        .entries
        .iter()
        .find(|e| Stream::state_of(e) == Some(State::Proposed))
        .and_then(|e| e.get("proposal"));
    let at = |p: &str| proposal.and_then(|v| v.pointer(p)).and_then(Value::as_str);
    if let Some(l) = at("/authority/lease") {
        out.insert(lease_stream(l));
    }
    if let Some(a) = at("/authority/approval") {
        out.insert(approval_stream(a));
    }
    if let Some(c) = at("/cap/name") {
        out.insert(cap_stream(c));
    }
    if let Some(p) = people {
        out.insert(super::people::RULES_STREAM.into());
        for d in p
            .get("decisions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(who) = d.get("decider").and_then(Value::as_str) {
                out.insert(lease_stream(who));
            }
        }
    }
    out
}

/// The hash of entry `len - 1` of `stream` as stored (None: it holds fewer), from the
/// streams already read when they hold it.
fn entry_hash(
    j: &mut dyn Journal,
    kept: Option<&Streams>,
    stream: &str,
    len: u64,
) -> Result<Option<String>, GateError> {
    if let Some(s) = kept.and_then(|k| k.get(stream)).filter(|s| s.len() >= len) {
        return Ok(s.entries[len as usize - 1]
            .get("hash")
            .and_then(Value::as_str)
            .map(String::from));
    }
    let lines = j.read(stream, len - 1)?;
    Ok(lines
        .first()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|e| e.get("hash").and_then(Value::as_str).map(String::from)))
}

fn stream_of(r: &Value) -> String {
    r.get("stream").and_then(Value::as_str).unwrap_or("").into()
}

/// The `{stream, head}` of every stream a receipt pins: its own, its people part's, its
/// anchors'.
pub(crate) fn pinned_heads(r: &Value) -> Vec<Value> {
    let own = core::iter::once(r).chain(r.get("people"));
    let anchors = r
        .get("anchors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    own.chain(anchors)
        .filter(|v| v.get("stream").is_some() && v.get("head").is_some())
        .map(|v| json!({"stream": v["stream"], "head": v["head"]}))
        .collect()
}

/// The name of every stream a receipt pins (its own, its people part's, its anchors'), in
/// the order the receipt lists them: the streams `verify` reads to check it.
pub fn pinned_streams(receipt: &Value) -> Vec<String> {
    pinned_heads(receipt)
        .iter()
        .filter_map(|v| v["stream"].as_str().map(String::from))
        .collect()
}

/// What a receipt pins: each stream it rests on, at a length.
pub(crate) fn pins_of(r: &Value) -> Pins {
    pinned_heads(r)
        .iter()
        .filter_map(|v| {
            Some((
                v["stream"].as_str()?.into(),
                v.pointer("/head/length")?.as_u64()?,
            ))
        })
        .collect()
}

impl Gate {
    pub fn confirm(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        effect_id: &str,
        evidence: &str,
    ) -> Result<Outcome, GateError> {
        let ev = parse_json(evidence)?;
        check_effect_id(effect_id)?;
        let mut s = self.load(j, &effect_stream(effect_id))?;
        let last = s
            .last()
            .ok_or_else(|| GateError::UnknownEffect(effect_id.into()))?;
        match Stream::state_of(last) {
            Some(State::Confirmed) => return self.replay(j, effect_id, &s),
            Some(State::Committed | State::Ambiguous) => {}
            // Refused with the send's fate unknown: a person (or the service) found it
            // happened.
            Some(State::Refused) if last.get("executed").and_then(Value::as_str) == Some("unknown") => {}
            _ => {
                return Err(field_err(
                    "/effect",
                    format!(
                        "only a committed or ambiguous effect (or a refused one whose send may have landed) can be confirmed; this one is {}",
                        Stream::spelling_of(last)
                    ),
                ))
            }
        }
        s.append(
            j,
            vec![(
                State::Confirmed,
                fields!("evidence" => ev, "executed" => "yes"),
            )],
            now_ms,
            true,
            false,
        )?;
        Ok(recorded_outcome(effect_id, &s, false))
    }

    pub fn receipt(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
        key: Option<&[u8]>,
    ) -> Result<String, GateError> {
        let r = self.receipt_now(j, effect_id)?;
        Ok(canonical(&match key {
            Some(k) => receipt::sign(r, k),
            None => r,
        }))
    }

    /// The unsigned receipt of `effect_id` as the journal stands now, made durable first.
    pub(crate) fn receipt_now(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
    ) -> Result<Value, GateError> {
        check_effect_id(effect_id)?;
        // A receipt pins what it shows: make it durable first, or a power loss could take
        // a lazily written COMMITTED away from under it.
        j.sync()?;
        match self.receipt_at(j, effect_id, None)? {
            Some((r, _)) => Ok(r),
            None => Err(GateError::UnknownEffect(effect_id.into())),
        }
    }

    /// The receipt of `effect_id` (unsigned) and what it pins: as the journal stands
    /// (`pins` none), or as it stood at `pins` (a stream → length map: what a receipt, or
    /// the log, recorded). `None` when the journal does not hold what `pins` names (a
    /// truncation), or no such effect.
    pub(crate) fn receipt_at(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
        pins: Option<&Pins>,
    ) -> Result<Option<(Value, Pins)>, GateError> {
        receipt_from(j, effect_id, pins, None)
    }

    pub fn check_receipt(
        &mut self,
        j: &mut dyn Journal,
        receipt_text: &str,
        key: &[u8],
    ) -> Result<VerifyReport, GateError> {
        let r = parse_json(receipt_text)?;
        let mut report = self.check_against_journal(j, &r)?;
        if !receipt::signature_holds(&r, key) {
            report.problems.push(receipt::Problem {
                stream: stream_of(&r),
                seq: 0,
                kind: receipt::ProblemKind::HashMismatch,
                detail: "the receipt's signature does not match its content".into(),
            });
        }
        Ok(report)
    }

    /// A receipt against the journal: every stream it pins verifies, holds what it pins
    /// (its own head, its anchors, its people part), and rebuilds to the same receipt.
    pub(crate) fn check_against_journal(
        &mut self,
        j: &mut dyn Journal,
        r: &Value,
    ) -> Result<VerifyReport, GateError> {
        let stream = Obj::any(r, "", "a receipt")?.name("stream", "the receipt's stream")?;
        let pins = pins_of(r);
        // Only what it pins: a check costs the receipt's streams, not the journal's.
        let mut names: Vec<String> = pins.keys().cloned().collect();
        if !pins.contains_key(&stream) {
            names.push(stream.clone());
        }
        let read = Streams::read(j, &names)?;
        let mut report = read.report(core::slice::from_ref(r));
        let id = stream.strip_prefix("effect:").unwrap_or("");
        let empty = read.get(&stream).is_none_or(|s| s.entries.is_empty());
        if !report.problems.is_empty() || empty || check_effect_id(id).is_err() {
            return Ok(report);
        }
        let mismatch = |stream: String, detail: &str| receipt::Problem {
            stream,
            seq: 0,
            kind: receipt::ProblemKind::HashMismatch,
            detail: detail.into(),
        };
        let Some((mut rebuilt, _)) = receipt_from(j, id, Some(&pins), Some(&read))? else {
            report.problems.push(mismatch(
                stream,
                "the receipt does not match the journal it pins",
            ));
            return Ok(report);
        };
        let mut body = r.clone();
        let (b, o) = (
            body.as_object_mut().expect("checked an object"),
            rebuilt.as_object_mut().expect("a receipt is an object"),
        );
        b.remove("signature");
        // A receipt from before anchors: the rest must still match.
        if !b.contains_key("anchors") {
            o.remove("anchors");
        }
        // The decisions it names, pinned as the effect's entries are.
        if b.get("people") != o.get("people") {
            report.problems.push(mismatch(
                super::people::request_stream(id),
                "the receipt's decisions do not match the journal",
            ));
            b.remove("people");
            o.remove("people");
        }
        if canonical(&body) != canonical(&rebuilt) {
            report.problems.push(mismatch(
                stream,
                "the receipt does not match the journal it pins",
            ));
        }
        Ok(report)
    }

    pub fn verify(
        &mut self,
        j: &mut dyn Journal,
        anchors: &[String],
    ) -> Result<VerifyReport, GateError> {
        let parsed = anchors
            .iter()
            .map(|a| parse_json(a))
            .collect::<Result<Vec<_>, _>>()?;
        // A checkpoint an auditor holds is checked against the log; every receipt the log
        // holds pins its streams as an anchor does.
        let (held, mut anchors): (Vec<Value>, Vec<Value>) = parsed
            .into_iter()
            .partition(|a| a.get("checkpoint").is_some());
        // Every stream is read and verified once, for its chain, the anchors and the log.
        let names = j.streams()?;
        let read = Streams::read(j, &names)?;
        anchors.extend(super::proofs::log_pins(&read));
        let mut report = read.report(&anchors);
        self.verify_log(j, &read, &held, &mut report)?;
        Ok(report)
    }
}

/// The receipt of `effect_id` and what it pins (see [`Gate::receipt_at`]), reading streams
/// from `kept` (what a `verify` already read and verified) where it holds them.
pub(crate) fn receipt_from(
    j: &mut dyn Journal,
    effect_id: &str,
    pins: Option<&Pins>,
    kept: Option<&Streams>,
) -> Result<Option<(Value, Pins)>, GateError> {
    let load = |j: &mut dyn Journal, name: &str| match kept.and_then(|k| k.get(name)) {
        Some(s) => Ok(s.clone()),
        None => Stream::load(j, name),
    };
    let name = effect_stream(effect_id);
    let whole = load(j, &name)?;
    let at = |stream: &Stream| -> Option<Stream> {
        match pins {
            None => Some(stream.clone()),
            Some(p) => {
                let len = *p.get(&stream.name)?;
                stream.pinned(&json!({"head": {"length": len}}))
            }
        }
    };
    let Some(s) = at(&whole).filter(|s| !s.entries.is_empty()) else {
        return Ok(None);
    };
    let mut used = Pins::new();
    used.insert(name, s.len());
    let mut r = receipt::build(effect_id, &s);
    let people = load(j, &super::people::request_stream(effect_id))?;
    let people = match pins {
        None => Some(people),
        Some(p) if p.contains_key(&people.name) => match at(&people) {
            Some(pinned) => Some(pinned),
            None => return Ok(None),
        },
        Some(_) => None,
    };
    let part = people.as_ref().and_then(super::people::receipt_part);
    if let (Some(part), Some(people)) = (&part, &people) {
        used.insert(people.name.clone(), people.len());
        r.as_object_mut()
            .expect("a receipt is an object")
            .insert("people".into(), part.clone());
    }
    // The authority streams the decision relied on, anchored as they stand (or as
    // pinned): a dropped REVOKED or RESERVED under them shows as a truncation.
    let mut anchors = Vec::new();
    for stream in authority_streams(&s, part.as_ref()) {
        let len = match pins {
            None => j.length(&stream)?,
            Some(p) => match p.get(&stream) {
                Some(len) => *len,
                None => continue,
            },
        };
        if len == 0 {
            continue;
        }
        let Some(hash) = entry_hash(j, kept, &stream, len)? else {
            return Ok(None);
        };
        used.insert(stream.clone(), len);
        anchors.push(json!({"stream": stream, "head": {"length": len, "hash": hash}}));
    }
    r.as_object_mut()
        .expect("a receipt is an object")
        .insert("anchors".into(), Value::Array(anchors));
    Ok(Some((r, used)))
}
