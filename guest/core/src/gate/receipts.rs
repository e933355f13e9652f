//! After the fact: an operator's confirmation, receipts, and verification of the journal.
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::Value;

use super::outcome::recorded_outcome;
use super::Gate;
use crate::authority::effect_stream;
use crate::canon::canonical;
use crate::entry::Stream;
use crate::fields;
use crate::journal::Journal;
use crate::proposal::{check_effect_id, field_err, parse_json};
use crate::receipt::{self, VerifyReport};
use crate::schema::Obj;
use crate::types::{GateError, Outcome, State};

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
        check_effect_id(effect_id)?;
        // A receipt pins what it shows: make it durable first, or a power loss could take
        // a lazily written COMMITTED away from under it.
        j.sync()?;
        let s = Stream::load(j, &effect_stream(effect_id))?;
        if s.entries.is_empty() {
            return Err(GateError::UnknownEffect(effect_id.into()));
        }
        let mut r = receipt::build(effect_id, &s);
        let people = Stream::load(j, &super::people::request_stream(effect_id))?;
        if let (Some(part), Value::Object(m)) = (super::people::receipt_part(&people), &mut r) {
            m.insert("people".into(), part);
        }
        Ok(canonical(&match key {
            Some(k) => receipt::sign(r, k),
            None => r,
        }))
    }

    pub fn check_receipt(
        &mut self,
        j: &mut dyn Journal,
        receipt_text: &str,
        key: &[u8],
    ) -> Result<VerifyReport, GateError> {
        let r = parse_json(receipt_text)?;
        let stream = Obj::any(&r, "", "a receipt")?.name("stream", "the receipt's stream")?;
        let mut report = receipt::verify_all(j, core::slice::from_ref(&r))?;
        report.problems.retain(|p| p.stream == stream);
        if !receipt::signature_holds(&r, key) {
            report.problems.push(receipt::Problem {
                stream: stream.clone(),
                seq: 0,
                kind: receipt::ProblemKind::HashMismatch,
                detail: "the receipt's signature does not match its content".into(),
            });
        }
        // The receipt must also say what the journal says.
        let id = stream.strip_prefix("effect:").unwrap_or("");
        if let Ok(s) = Stream::load(j, &stream) {
            if !s.entries.is_empty() && report.problems.is_empty() {
                let mut body = r.clone();
                body.as_object_mut().map(|o| o.remove("signature"));
                // The decisions it names, pinned as the effect's entries are.
                let people = body.as_object_mut().and_then(|o| o.remove("people"));
                if let Some(p) = people {
                    let held = super::people::pinned_part(j, id, &p)?;
                    if held.as_ref() != Some(&p) {
                        report.problems.push(receipt::Problem {
                            stream: super::people::request_stream(id),
                            seq: 0,
                            kind: receipt::ProblemKind::HashMismatch,
                            detail: "the receipt's decisions do not match the journal".into(),
                        });
                    }
                }
                // A receipt pins 1..=len entries; anything else cannot match this journal.
                let pinned = s.pinned(&r);
                let matches =
                    pinned.is_some_and(|p| canonical(&receipt::build(id, &p)) == canonical(&body));
                if !matches {
                    report.problems.push(receipt::Problem {
                        stream,
                        seq: 0,
                        kind: receipt::ProblemKind::HashMismatch,
                        detail: "the receipt does not match the journal it pins".into(),
                    });
                }
            }
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
        receipt::verify_all(j, &parsed)
    }
}
