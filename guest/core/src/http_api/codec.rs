//! The API's JSON: errors and their statuses, steps, replies.
use alloc::format;
use alloc::string::{String, ToString};

use serde_json::{json, Map, Value};

use super::*;
use crate::tools::outcome_json;
use crate::{Ask, GateError, JournalError, Reply, Step};

/// The gate error's HTTP status (the rest are the server's own).
pub(super) fn status_of(e: &GateError) -> u16 {
    match e {
        GateError::InvalidJson(_) | GateError::InvalidField { .. } => 400,
        GateError::TooLarge(_) => 413,
        GateError::UnknownEffect(_) | GateError::UnknownOperation(_) => 404,
        GateError::UnexpectedReply(_) => 409,
        GateError::Journal(_) | GateError::CorruptJournal(_) | GateError::Contention(_) => 503,
    }
}

pub(super) fn journal_error_json(e: &JournalError) -> Value {
    match e {
        JournalError::Conflict(n) => json!({"tag": "conflict", "val": n}),
        JournalError::Io(m) => json!({"tag": "io", "val": m}),
        JournalError::Corrupt(m) => json!({"tag": "corrupt", "val": m}),
        JournalError::TornTail(m) => json!({"tag": "torn-tail", "val": m}),
        JournalError::Other(m) => json!({"tag": "other", "val": m}),
    }
}

/// `{"error": {"kind", "message", "value"}}`: the gate error's case and payload.
pub fn error_json(e: &GateError) -> Value {
    let (kind, value) = match e {
        GateError::InvalidJson(m) => ("invalid-json", json!(m)),
        GateError::InvalidField { field, problem } => {
            ("invalid-field", json!({"field": field, "problem": problem}))
        }
        GateError::TooLarge(n) => ("too-large", json!(n)),
        GateError::UnknownEffect(id) => ("unknown-effect", json!(id)),
        GateError::UnknownOperation(op) => ("unknown-operation", json!(op)),
        GateError::UnexpectedReply(m) => ("unexpected-reply", json!(m)),
        GateError::Journal(j) => ("journal", journal_error_json(j)),
        GateError::CorruptJournal(m) => ("corrupt-journal", json!(m)),
        GateError::Contention(m) => ("contention", json!(m)),
    };
    json!({"error": {"kind": kind, "message": e.to_string(), "value": value}})
}

/// A proof error's answer: a bad key or document 400, a signature or proof that does not
/// hold 422; a gate error inside, as the gate's.
pub(super) fn proof_failure(e: &crate::proof::ProofError) -> Response {
    use crate::proof::ProofError as P;
    let (status, kind) = match e {
        P::BadKey(_) => (400, "bad-key"),
        P::BadSignature(_) => (422, "bad-signature"),
        P::Malformed(_) => (400, "malformed"),
        P::UnknownVersion(_) => (400, "unknown-version"),
        P::ProofFailed(_) => (422, "proof-failed"),
        P::Gate(g) => return gate_failure(g),
    };
    failure(status, kind, e.to_string())
}

pub(super) fn gate_failure(e: &GateError) -> Response {
    Response::json(status_of(e), &error_json(e))
}

/// A server's own error: `kind` is not a gate error case.
pub(super) fn failure(status: u16, kind: &str, message: impl Into<String>) -> Response {
    Response::json(
        status,
        &json!({"error": {"kind": kind, "message": message.into()}}),
    )
}

pub(super) fn invalid(field: &str, problem: &str) -> GateError {
    GateError::InvalidField {
        field: field.into(),
        problem: problem.into(),
    }
}

pub(super) fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// A step as JSON: the request's members in snake_case, its effect parsed.
pub fn step_json(s: &Step) -> Value {
    let base = |effect_id: &str, target: &str, effect: &str| {
        let mut m = Map::new();
        m.insert("effect_id".into(), json!(effect_id));
        m.insert("target".into(), json!(target));
        m.insert("effect".into(), parsed(effect));
        m
    };
    let (ask, request) = match &s.ask {
        Ask::Done(o) => return json!({"op": s.op, "ask": "done", "outcome": outcome_json(o)}),
        Ask::Sleep(ms) => return json!({"op": s.op, "ask": "sleep", "ms": ms}),
        Ask::Crash(p) => return json!({"op": s.op, "ask": "crash", "point": p.as_str()}),
        Ask::Capture {
            effect_id,
            target,
            effect,
            names,
        } => {
            let mut m = base(effect_id, target, effect);
            m.insert("names".into(), json!(names));
            ("capture", m)
        }
        Ask::Authorize {
            effect_id,
            target,
            effect,
            agent,
        } => {
            let mut m = base(effect_id, target, effect);
            m.insert("agent".into(), json!(agent));
            ("authorize", m)
        }
        Ask::Apply {
            effect_id,
            target,
            effect,
            idempotency_key,
            attempt,
        } => {
            let mut m = base(effect_id, target, effect);
            m.insert("idempotency_key".into(), json!(idempotency_key));
            m.insert("attempt".into(), json!(attempt));
            ("apply", m)
        }
        Ask::Query {
            effect_id,
            target,
            effect,
        } => ("query", base(effect_id, target, effect)),
    };
    json!({"op": s.op, "ask": ask, "request": request})
}

/// The reply a JSON reply `{"reply": ..., "value": ...}` names.
pub fn reply_of(body: &str) -> Result<Reply, GateError> {
    let v: Value = serde_json::from_str(body).map_err(|e| GateError::InvalidJson(e.to_string()))?;
    let obj = v
        .as_object()
        .ok_or_else(|| invalid("", "is not an object {\"reply\": ..., \"value\": ...}"))?;
    if let Some(extra) = obj.keys().find(|k| *k != "reply" && *k != "value") {
        return Err(invalid(&format!("/{extra}"), "is not a member of a reply"));
    }
    let value = obj.get("value");
    let text = |tag: &str| match value {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(invalid(
            "/value",
            &format!("is not a string (the message of {tag})"),
        )),
    };
    let json_value = |tag: &str| match value {
        Some(v) => Ok(v.to_string()),
        None => Err(invalid("/value", &format!("is required with {tag} (JSON)"))),
    };
    Ok(match obj.get("reply").and_then(Value::as_str) {
        Some("captured") => Reply::Captured(json_value("captured")?),
        Some("applied") => Reply::Applied(json_value("applied")?),
        Some("found") => Reply::Found(json_value("found")?),
        Some("allowed") => match value {
            Some(Value::Bool(b)) => Reply::Allowed(*b),
            _ => return Err(invalid("/value", "is not a boolean")),
        },
        Some("rejected") => Reply::Rejected(text("rejected")?),
        Some("unknown") => Reply::Unknown(text("unknown")?),
        Some("failed") => Reply::Failed(text("failed")?),
        Some("slept") if value.is_none() => Reply::Slept,
        Some("slept") => return Err(invalid("/value", "is not taken by slept")),
        Some("not-found") if value.is_none() => Reply::NotFound,
        Some("not-found") => return Err(invalid("/value", "is not taken by not-found")),
        _ => return Err(invalid(
            "/reply",
            "is not one of captured, allowed, applied, rejected, unknown, found, not-found, failed, slept",
        )),
    })
}
