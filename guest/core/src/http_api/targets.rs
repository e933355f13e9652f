//! The table by which a server performs an HTTP target (docs/http-api.yaml): the request
//! for a gate step, URL templates, and what the target's answer means.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use serde_json::{json, Value};

use super::*;
use crate::targets::{cut, http_send_verdict, SendVerdict};
use crate::{Ask, Reply};

/// `encodeURIComponent`: every byte but the unreserved marks percent-encoded.
pub(super) fn encode_component(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` decoded (a path segment); `None` when it is not UTF-8 or not well formed.
pub(super) fn decode_component(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `template` with `{effect_id}` and `{member}` filled in, URL-encoded (a string member as
/// it is, anything else as JSON, a missing one empty).
pub fn fill(template: &str, effect_id: &str, effect: &Value) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0
                    && after[..close]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                let name = &after[..close];
                let v = if name == "effect_id" {
                    effect_id.into()
                } else {
                    match effect.get(name) {
                        None => String::new(),
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                    }
                };
                out.push_str(&encode_component(&v));
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A body as JSON text: empty is `null`; not JSON is `Err`.
pub(super) fn body_json(body: &str) -> Result<String, String> {
    if body.trim().is_empty() {
        return Ok("null".into());
    }
    serde_json::from_str::<Value>(body)
        .map(|v| v.to_string())
        .map_err(|e| format!("the answer is not JSON: {e}"))
}

/// The table of docs/http-api.yaml, first half: the request that performs gate step `ask`
/// on a configured HTTP target (`timeout_ms`: the send's). `Err` is the reply when there is
/// nothing to send: a part that is not configured is `failed` (the effect stays open),
/// never a made-up answer.
pub fn target_request(
    targets: &BTreeMap<String, HttpTarget>,
    ask: &Ask,
    timeout_ms: u64,
) -> Result<Fetch, Reply> {
    let get = |e: &Endpoint, effect_id: &str, effect: &str| Fetch {
        method: "GET".into(),
        url: fill(&e.url, effect_id, &parsed(effect)),
        headers: vec![],
        body: None,
        timeout_ms: None,
    };
    // The gate asks only for routed targets, and only configured ones are routed.
    let endpoint = |name: &str, part: &str, e: Option<&Endpoint>| {
        e.cloned().ok_or_else(|| {
            Reply::Failed(format!("target {name} has no {part} endpoint configured"))
        })
    };
    let target = |name: &str| targets.get(name);
    match ask {
        Ask::Capture {
            effect_id,
            target: name,
            effect,
            ..
        } => {
            let e = endpoint(
                name,
                "premises",
                target(name).and_then(|t| t.premises.as_ref()),
            )?;
            Ok(get(&e, effect_id, effect))
        }
        Ask::Authorize {
            effect_id,
            target: name,
            effect,
            agent,
        } => {
            let e = endpoint(name, "check", target(name).and_then(|t| t.check.as_ref()))?;
            let body = json!({"effect_id": effect_id, "agent": agent, "effect": parsed(effect)});
            Ok(Fetch {
                method: "POST".into(),
                url: fill(&e.url, effect_id, &parsed(effect)),
                headers: vec![("content-type".into(), "application/json".into())],
                body: Some(body.to_string()),
                timeout_ms: None,
            })
        }
        Ask::Apply {
            effect_id,
            target: name,
            effect,
            idempotency_key,
            ..
        } => {
            let t = target(name)
                .ok_or_else(|| Reply::Failed(format!("target {name} is not configured")))?;
            Ok(Fetch {
                method: t.apply.method.clone().unwrap_or_else(|| "POST".into()),
                url: fill(&t.apply.url, effect_id, &parsed(effect)),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("idempotency-key".into(), idempotency_key.clone()),
                ],
                body: Some(effect.clone()),
                timeout_ms: Some(timeout_ms),
            })
        }
        Ask::Query {
            effect_id,
            target: name,
            effect,
        } => {
            let e = endpoint(name, "lookup", target(name).and_then(|t| t.lookup.as_ref()))?;
            Ok(get(&e, effect_id, effect))
        }
        Ask::Done(_) | Ask::Sleep(_) | Ask::Crash(_) => Err(Reply::Failed(
            "the gate asks no target request here; nothing to perform".into(),
        )),
    }
}

/// The table's second half: what the target's answer to step `ask` means. `Err`: no answer
/// (refused, lost, timed out).
pub fn target_reply(ask: &Ask, answer: Result<&Fetched, &str>) -> Reply {
    match ask {
        Ask::Capture { .. } => match answer {
            Ok(r) if r.status == 200 => match body_json(&r.body) {
                Ok(j) => Reply::Captured(j),
                Err(m) => Reply::Failed(format!("premises: {m}")),
            },
            Ok(r) => Reply::Failed(format!("premises: HTTP {}", r.status)),
            Err(m) => Reply::Failed(format!("premises: {m}")),
        },
        Ask::Authorize { .. } => match answer {
            Ok(r) => {
                let allowed = (r.status == 200)
                    .then(|| serde_json::from_str::<Value>(&r.body).ok())
                    .flatten()
                    .and_then(|v| v.get("allowed").and_then(Value::as_bool));
                match allowed {
                    Some(b) => Reply::Allowed(b),
                    None => Reply::Failed(format!(
                        "check: HTTP {}, no {{\"allowed\": bool}}",
                        r.status
                    )),
                }
            }
            Err(m) => Reply::Failed(format!("check: {m}")),
        },
        Ask::Apply { .. } => match answer {
            Ok(r) => match http_send_verdict(u32::from(r.status)) {
                SendVerdict::Applied => Reply::Applied(
                    // The target answered, not in JSON: keep its words.
                    body_json(&r.body).unwrap_or_else(|_| json!(r.body).to_string()),
                ),
                SendVerdict::NotApplied => {
                    Reply::Rejected(format!("HTTP {}: {}", r.status, cut(&r.body, 500)))
                }
                SendVerdict::Unknown => Reply::Unknown(format!("HTTP {}", r.status)),
            },
            Err(m) => Reply::Unknown(m.into()),
        },
        Ask::Query { .. } => match answer {
            Ok(r) if r.status == 404 => Reply::NotFound,
            Ok(r) if r.status == 200 => match body_json(&r.body) {
                Ok(j) => Reply::Found(j),
                Err(m) => Reply::Failed(format!("lookup: {m}")),
            },
            Ok(r) => Reply::Failed(format!("lookup: HTTP {}", r.status)),
            Err(m) => Reply::Failed(format!("lookup: {m}")),
        },
        Ask::Sleep(_) => Reply::Slept,
        Ask::Crash(_) | Ask::Done(_) => {
            Reply::Failed("the gate is done; nothing to perform".into())
        }
    }
}
