//! The original's five questions, answered from one receipt (the bundle check's rule):
//! did it happen once, was it authorized when it fired, did its premises hold, who
//! decided, did the service confirm. Each answer is `{"answer", "why"}`: `yes`, `no`,
//! `unknown` or `not_fired`; `who_decided` answers with the names.
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{json, Map, Value};

fn s<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

fn at<'a>(v: &'a Value, p: &str) -> &'a Value {
    v.pointer(p).unwrap_or(&Value::Null)
}

fn answer(a: &str, why: impl Into<String>) -> Value {
    json!({"answer": a, "why": why.into()})
}

/// The states of the receipt's entries, in order.
fn states(r: &Map<String, Value>) -> Vec<&str> {
    r.get("entries")
        .and_then(Value::as_array)
        .map(|es| {
            es.iter()
                .map(|e| at(e, "/state").as_str().unwrap_or(""))
                .collect()
        })
        .unwrap_or_default()
}

pub fn five(r: &Map<String, Value>) -> Value {
    let receipt = Value::Object(r.clone());
    let executed = s(r, "executed");
    let final_state = s(r, "final");
    let reason = s(r, "reason");
    let attempts = r.get("attempts").and_then(Value::as_u64).unwrap_or(0);
    let via = s(r, "via");
    let dedupes = at(&receipt, "/target/dedupes").as_bool() == Some(true);
    let confirmed = r.get("confirmed");

    let happened_once = match executed {
        "yes" if attempts <= 1 => answer("yes", format!("{final_state}: sent once")),
        "yes" if dedupes => answer(
            "yes",
            format!("{final_state}: {attempts} sends under one idempotency key, which the service dedupes"),
        ),
        "yes" => answer(
            "yes",
            format!("{final_state}: {attempts} sends, each resend only after a lookup found no earlier one"),
        ),
        "no" => answer("no", format!("{final_state} {reason}: not sent, or the service applied nothing")),
        _ => answer(
            "unknown",
            format!("{final_state} {reason}: whether it happened is unknown; a person must find out"),
        ),
    };

    // Every send follows an AUTHORIZED that recorded the authority it was checked under.
    let st = states(r);
    let sends = st.iter().filter(|x| **x == "DISPATCHED").count();
    let authorized = r
        .get("authorized")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut seen_auth = 0usize;
    let mut each_send_authorized = true;
    for x in &st {
        match *x {
            "AUTHORIZED" => seen_auth += 1,
            "DISPATCHED" if seen_auth == 0 => each_send_authorized = false,
            _ => {}
        }
    }
    let authority_of = |a: &Value| -> Option<String> {
        if let Some(l) = at(a, "/checks/lease/name").as_str() {
            let until = at(a, "/checks/lease/live_until_ms");
            return Some(format!("lease {l} (live until {until})"));
        }
        at(a, "/checks/approval/id").as_str().map(|id| {
            format!(
                "approval {id} by {}",
                at(a, "/checks/approval/approver").as_str().unwrap_or("?")
            )
        })
    };
    let named: Vec<String> = authorized.iter().filter_map(authority_of).collect();
    let authorized_when_fired = if sends == 0 {
        answer("not_fired", format!("{final_state}: never sent"))
    } else if each_send_authorized && named.len() == authorized.len() && !named.is_empty() {
        answer(
            "yes",
            format!(
                "each of {sends} send(s) after the authority was checked: {}",
                named.join("; ")
            ),
        )
    } else {
        answer("no", "a send without a recorded authority check before it")
    };

    let declared = at(&receipt, "/proposed/premises")
        .as_object()
        .is_some_and(|p| !p.is_empty());
    let premises_held = if reason == "premise_changed" {
        let changed: Vec<String> = r
            .get("changed")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        format!(
                            "{} was {} is {}",
                            at(c, "/name").as_str().unwrap_or("?"),
                            at(c, "/was"),
                            at(c, "/now")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        answer("no", format!("refused: {}", changed.join(", ")))
    } else if sends == 0 {
        answer("not_fired", format!("{final_state}: never sent"))
    } else if !declared {
        answer("yes", "no premises were declared")
    } else if authorized
        .iter()
        .all(|a| at(a, "/checks/premises_held").is_object())
    {
        answer(
            "yes",
            format!("re-read and compared before each of {sends} send(s)"),
        )
    } else {
        answer("no", "a send without its premises re-checked")
    };

    // Who decided: the agent, the authority it acted under, and every person's decision.
    let mut names: Vec<String> = Vec::new();
    let mut why: Vec<String> = Vec::new();
    let agent = s(r, "agent");
    if !agent.is_empty() {
        names.push(agent.to_string());
        why.push(format!("agent {agent} proposed it"));
    }
    let auth = at(&receipt, "/proposed/authority");
    if let Some(l) = at(auth, "/lease").as_str() {
        why.push(format!("under lease {l}"));
    }
    if let Some(a) = at(auth, "/approval").as_str() {
        why.push(format!("under approval {a}"));
    }
    for a in &authorized {
        if let Some(p) = at(a, "/checks/approval/approver").as_str() {
            if !names.iter().any(|n| n == p) {
                names.push(p.to_string());
            }
        }
    }
    if let Some(people) = r.get("people") {
        if at(people, "/by_rule").as_bool() == Some(true) {
            why.push(format!(
                "approved by rule {}",
                at(people, "/rule").as_str().unwrap_or("?")
            ));
        }
        for d in at(people, "/decisions").as_array().into_iter().flatten() {
            let who = at(d, "/decider").as_str().unwrap_or("?");
            why.push(format!(
                "{who}: {}",
                at(d, "/verdict").as_str().unwrap_or("?")
            ));
            if !names.iter().any(|n| n == who) {
                names.push(who.to_string());
            }
        }
    }
    let who_decided = json!({"answer": names, "why": why.join("; ")});

    let service_confirmed = if let Some(c) = confirmed {
        answer("yes", format!("CONFIRMED: {}", canonical_short(c)))
    } else {
        match (final_state, via) {
            ("COMMITTED", "send") => answer("yes", "the service answered the send: applied"),
            ("COMMITTED", "recovery-retry") => {
                answer("yes", "the service answered the resend: applied")
            }
            ("COMMITTED", "recovery-query") => answer("yes", "the service's lookup found it"),
            _ if reason == "target_rejected" => answer("no", "the service rejected it"),
            _ if sends == 0 => answer("not_fired", format!("{final_state}: never sent")),
            _ => answer(
                "unknown",
                format!("{final_state} {reason}: no answer from the service"),
            ),
        }
    };

    json!({
        "effect_id": s(r, "effect_id"),
        "final": final_state,
        "executed": executed,
        "happened_once": happened_once,
        "authorized_when_fired": authorized_when_fired,
        "premises_held": premises_held,
        "who_decided": who_decided,
        "service_confirmed": service_confirmed,
    })
}

fn canonical_short(v: &Value) -> String {
    let t = crate::canon::canonical(v);
    if t.len() > 200 {
        let mut end = 200;
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &t[..end])
    } else {
        t
    }
}
