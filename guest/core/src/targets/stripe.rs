//! Stripe refunds (`stripe.refund`), through Stripe's official SDKs.
//!
//! The effect: `{"charge": "ch_...", "amount_cents": 2000}`, and optionally `reason`
//! (`duplicate`, `fraudulent`, `requested_by_customer`) and `metadata` (strings; the key
//! `interlock_effect_id` is the gate's).
//!
//! | step | SDK calls | the answer |
//! |---|---|---|
//! | premises | `charges.retrieve(charge)`, then `refunds.list({charge, limit: 100})` page by page | `eligible` (the charge succeeded, is not disputed, and others have not refunded all of it), `refunded_by_others_cents` (the refunds not failed or canceled whose `metadata.interlock_effect_id` is not this effect's); a raise or an answer that is not a charge or a list: `failed` |
//! | send | `refunds.create({charge, amount, metadata: {interlock_effect_id}, reason?}, {idempotency_key, max_network_retries: 0})` | a refund: `applied`; an error as [`send_reply`] says |
//! | lookup | `refunds.list({charge, limit: 100})` page by page | a refund whose `metadata.interlock_effect_id` is this effect's: `found`; none on any page: `not-found`; a raise: `failed` |
//!
//! Its tier (Stripe's documentation, docs.stripe.com/api/idempotent_requests): a POST with
//! an `Idempotency-Key` returns the first request's saved status and body for at least 24
//! hours, so the target dedupes within a 24-hour window; refunds can be listed by charge,
//! and each carries our metadata, so it can be looked up (tier 1 with lookup). A stand-in
//! server that ignores the key (localstripe) is declared `"dedupes": false`: tier 2.
//!
//! The SDK's own network retries are turned off (`max_network_retries: 0`) for the send:
//! every send the gate makes is one DISPATCHED attempt in the journal, and a retry the gate
//! does not know of would be a second refund at a service that does not dedupe.
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde_json::{json, Map, Value};

use super::{
    captured, http_send_verdict, read_object, Context, Phase, SendVerdict, ServiceAnswer,
    ServiceCall, Target, Tier, Turn,
};
use crate::schema::{check_name, field_err, kind, Obj};
use crate::types::{GateError, Reply};

/// The metadata key that carries the effect id on each refund: the reference the lookup
/// and the premises find, and that Stripe's webhooks then name (`webhooks::stripe_event`).
use crate::webhooks::STRIPE_METADATA_KEY as EFFECT_ID_KEY;

/// Stripe keeps an idempotency key's result for at least 24 hours.
pub const IDEMPOTENCY_WINDOW_MS: u64 = 24 * 3_600_000;

/// Refunds per page of `refunds.list` (Stripe's most), and how many pages a step reads
/// before it gives up (`failed`: never a guess from a partial list).
const PAGE: u64 = 100;
const MAX_PAGES: usize = 100;

const REASONS: [&str; 3] = ["duplicate", "fraudulent", "requested_by_customer"];

pub struct Refund;

impl Target for Refund {
    fn name(&self) -> &'static str {
        "stripe.refund"
    }

    fn service(&self) -> &'static str {
        "stripe"
    }

    fn tier(&self) -> Tier {
        Tier {
            dedupes: true,
            dedupe_window_ms: Some(IDEMPOTENCY_WINDOW_MS),
            lookup: true,
        }
    }

    fn premises(&self) -> &'static [&'static str] {
        &["eligible", "refunded_by_others_cents"]
    }

    fn check_effect(&self, effect: &Value) -> Result<(), GateError> {
        let e = Obj::strict(
            effect,
            "/effect",
            "a Stripe refund",
            &["charge", "amount_cents", "reason", "metadata"],
        )?;
        e.name("charge", "the id of the charge to refund (ch_...)")?;
        if e.u64("amount_cents", "the amount to refund, in cents")? == 0 {
            return Err(field_err("/effect/amount_cents", "must be at least 1 cent"));
        }
        if let Some(r) = e.get("reason") {
            if !r.as_str().is_some_and(|r| REASONS.contains(&r)) {
                return Err(field_err(
                    "/effect/reason",
                    format!("must be one of {}", REASONS.join(", ")),
                ));
            }
        }
        if let Some(m) = e.get("metadata") {
            let m = Obj::any(m, "/effect/metadata", "metadata (key -> text)")?;
            for (k, v) in m.map() {
                check_name(k, &m.at(k))?;
                if k == EFFECT_ID_KEY {
                    return Err(field_err(
                        &m.at(k),
                        "is the gate's: it carries the effect id to the refund",
                    ));
                }
                if !v.is_string() {
                    return Err(field_err(
                        &m.at(k),
                        format!("must be text, not {}", kind(v)),
                    ));
                }
            }
        }
        Ok(())
    }

    fn turn(&self, phase: Phase, cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
        let charge = cx.effect["charge"].as_str().unwrap_or_default();
        match phase {
            Phase::Premises => match answers.split_first() {
                None => Turn::Call(call("charges.retrieve", json!({ "id": charge }), json!({}))),
                Some((first, pages)) => match read_object(first, "charge", "charges.retrieve") {
                    Err(m) => Turn::Reply(Reply::Failed(m)),
                    Ok(c) => match refunds(charge, pages) {
                        Listed::More(next) => Turn::Call(next),
                        Listed::Failed(m) => Turn::Reply(Reply::Failed(m)),
                        Listed::All(all) => Turn::Reply(premises(self.name(), cx, c, &all)),
                    },
                },
            },
            Phase::Send => match answers.first() {
                None => {
                    let mut metadata = cx.effect["metadata"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default();
                    metadata.insert(EFFECT_ID_KEY.into(), json!(cx.effect_id));
                    let mut params = json!({"charge": charge, "amount": cx.effect["amount_cents"], "metadata": metadata});
                    if let Some(r) = cx.effect.get("reason") {
                        params["reason"] = r.clone();
                    }
                    let mut c = call(
                        "refunds.create",
                        params,
                        json!({"idempotency_key": cx.idempotency_key, "max_network_retries": 0}),
                    );
                    c.timeout_ms = cx.timeout_ms;
                    Turn::Call(c)
                }
                Some(answer) => Turn::Reply(send_reply(answer)),
            },
            Phase::Lookup => match refunds(charge, answers) {
                Listed::More(next) => Turn::Call(next),
                Listed::Failed(m) => Turn::Reply(Reply::Failed(m)),
                Listed::All(all) => Turn::Reply(match all.iter().find(|r| ours(r, cx.effect_id)) {
                    Some(r) => Reply::Found(result(r)),
                    None => Reply::NotFound,
                }),
            },
        }
    }
}

fn call(operation: &str, params: Value, options: Value) -> ServiceCall {
    ServiceCall {
        operation: operation.into(),
        params,
        options,
        timeout_ms: None,
    }
}

/// What `refunds.create` answered, as Stripe documents it (docs.stripe.com/api/errors,
/// docs.stripe.com/error-low-level):
///
/// | answer | reply | why |
/// |---|---|---|
/// | a refund (`object: "refund"`, an `id`) | `applied` | Stripe took it |
/// | anything else returned | `unknown` | not an answer that can be read |
/// | raised, no status (a connection error, a timeout) | `unknown` | a network error may hide any result, a success included |
/// | raised with a status under 400 (a body the SDK could not read) | `unknown` | the same |
/// | 409 (a concurrent request under the same key) | `unknown` | the other request may apply it |
/// | 424 (an external dependency failed) | `unknown` | the request may have begun |
/// | 429 (rate limited) | `unknown` | nothing ran (the limiter is in front of the idempotency layer), but Stripe asks for a retry, not a refusal: recovery settles it (lookup, then a resend) |
/// | any other 4xx (400 invalid request or idempotency error, 401, 402, 403, 404) | `rejected` | a content error: the request failed, nothing applied |
/// | 5xx | `unknown` | a server error's result is indeterminate; within 24 h a resend under the key replays the saved 500, so the lookup settles it |
/// | no answer in time | `unknown` | |
pub fn send_reply(answer: &ServiceAnswer) -> Reply {
    match answer {
        ServiceAnswer::Returned(v) => match v.as_object() {
            Some(r)
                if r.get("object").and_then(Value::as_str) == Some("refund")
                    && r.get("id").is_some_and(Value::is_string) =>
            {
                Reply::Applied(result(r))
            }
            _ => Reply::Unknown(format!(
                "refunds.create answered something that is not a refund: {}",
                super::cut(&crate::canon::canonical(v), 200)
            )),
        },
        ServiceAnswer::NoAnswer(m) => Reply::Unknown(format!("refunds.create: no answer ({m})")),
        ServiceAnswer::Raised(e) => {
            let verdict = match e.status {
                None => SendVerdict::Unknown,
                Some(409 | 424 | 429) => SendVerdict::Unknown,
                Some(s) if s < 400 => SendVerdict::Unknown,
                Some(s) => http_send_verdict(s),
            };
            let m = format!("refunds.create: {e}");
            match verdict {
                SendVerdict::NotApplied => Reply::Rejected(m),
                SendVerdict::Applied | SendVerdict::Unknown => Reply::Unknown(m),
            }
        }
    }
}

/// What the gate records of a refund: its id, amount, charge and status.
fn result(r: &Map<String, Value>) -> String {
    let mut out = Map::new();
    for k in ["id", "amount", "charge", "status"] {
        out.insert(k.into(), r.get(k).cloned().unwrap_or(Value::Null));
    }
    crate::canon::canonical(&Value::Object(out))
}

/// Whether refund `r` is this effect's (its metadata names the effect id).
fn ours(r: &Map<String, Value>, effect_id: &str) -> bool {
    r.get("metadata")
        .and_then(|m| m.get(EFFECT_ID_KEY))
        .and_then(Value::as_str)
        == Some(effect_id)
}

enum Listed {
    /// Every refund of the charge, newest first.
    All(Vec<Map<String, Value>>),
    More(ServiceCall),
    Failed(String),
}

/// The charge's refunds from the pages of `refunds.list` read so far, or the next page to
/// read.
fn refunds(charge: &str, pages: &[ServiceAnswer]) -> Listed {
    let mut all = Vec::new();
    let mut more = true;
    for page in pages {
        let list = match read_object(page, "list", "refunds.list") {
            Ok(l) => l,
            Err(m) => return Listed::Failed(m),
        };
        let Some(data) = list.get("data").and_then(Value::as_array) else {
            return Listed::Failed("refunds.list answered a list without data".into());
        };
        for r in data {
            match r.as_object() {
                Some(r) if r.get("id").is_some_and(Value::is_string) => all.push(r.clone()),
                _ => {
                    return Listed::Failed(
                        "refunds.list answered an item that is not a refund".into(),
                    )
                }
            }
        }
        more = list.get("has_more") == Some(&Value::Bool(true));
        if more && data.is_empty() {
            return Listed::Failed("refunds.list has more, but its page was empty".into());
        }
    }
    if !more {
        return Listed::All(all);
    }
    if pages.len() >= MAX_PAGES {
        return Listed::Failed(format!(
            "the charge has more than {} refunds: too many to read",
            MAX_PAGES as u64 * PAGE
        ));
    }
    let mut params = json!({"charge": charge, "limit": PAGE});
    if let Some(last) = all.last().and_then(|r| r.get("id")) {
        params["starting_after"] = last.clone();
    }
    Listed::More(call("refunds.list", params, json!({})))
}

/// The premises from the charge and all its refunds, this effect's own left out.
fn premises(
    target: &str,
    cx: &Context<'_>,
    charge: &Map<String, Value>,
    refunds: &[Map<String, Value>],
) -> Reply {
    let Some(amount) = charge.get("amount").and_then(Value::as_u64) else {
        return Reply::Failed("charges.retrieve answered a charge without an amount".into());
    };
    let mut others: u64 = 0;
    for r in refunds.iter().filter(|r| !ours(r, cx.effect_id)) {
        // A refund that failed or was canceled moved no money.
        if matches!(
            r.get("status").and_then(Value::as_str),
            Some("failed" | "canceled")
        ) {
            continue;
        }
        match r.get("amount").and_then(Value::as_u64) {
            Some(a) => others = others.saturating_add(a),
            None => return Reply::Failed(format!("refund {} has no amount", r["id"])),
        }
    }
    // localstripe's charges carry no `disputed`; Stripe's always do.
    let disputed = charge.get("disputed") == Some(&Value::Bool(true));
    let succeeded = charge.get("status").and_then(Value::as_str) == Some("succeeded");
    let mut all = Map::new();
    all.insert(
        "eligible".into(),
        json!(succeeded && !disputed && others < amount),
    );
    all.insert("refunded_by_others_cents".into(), json!(others));
    captured(target, cx.names, &all)
}
