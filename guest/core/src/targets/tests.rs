//! The built-in targets' tables, answer by answer, and one through the effects machine.
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Value};

use super::stripe::{send_reply, Refund};
use super::*;
use crate::effects::{EffectSession, Next};
use crate::journal::MemJournal;
use crate::types::{CallAnswer, ClaimWait, CrashPoint, State};
use crate::Gate;

const ID: &str = "0123456789abcdef0123456789abcdef";

fn err(status: Option<u32>, error_type: Option<&str>, code: Option<&str>) -> ServiceAnswer {
    ServiceAnswer::Raised(ServiceError {
        error_type: error_type.map(String::from),
        status,
        code: code.map(String::from),
        message: "m".into(),
    })
}

fn cx<'a>(effect: &'a Value, names: &'a [String]) -> Context<'a> {
    Context {
        effect,
        effect_id: ID,
        idempotency_key: ID,
        names,
        timeout_ms: Some(5000),
        decision: false,
    }
}

fn refund(id: &str, amount: u64, status: &str, effect: Option<&str>) -> Value {
    let metadata = match effect {
        Some(e) => json!({"interlock_effect_id": e}),
        None => json!({}),
    };
    json!({"object": "refund", "id": id, "amount": amount, "charge": "ch_1", "status": status, "metadata": metadata})
}

fn list(data: Vec<Value>, has_more: bool) -> ServiceAnswer {
    ServiceAnswer::Returned(json!({"object": "list", "data": data, "has_more": has_more}))
}

fn charge(amount: u64, status: &str) -> ServiceAnswer {
    ServiceAnswer::Returned(
        json!({"object": "charge", "id": "ch_1", "amount": amount, "status": status}),
    )
}

#[test]
fn a_send_is_one_create_with_the_key_as_idempotency_key_and_as_metadata() {
    let effect = json!({"charge": "ch_1", "amount_cents": 2000, "metadata": {"case": "4471"}});
    let Turn::Call(c) = Refund.turn(Phase::Send, &cx(&effect, &[]), &[]) else {
        panic!("a send starts with a call")
    };
    assert_eq!(c.operation, "refunds.create");
    assert_eq!(
        c.params,
        json!({"charge": "ch_1", "amount": 2000, "metadata": {"case": "4471", "interlock_effect_id": ID}})
    );
    // The SDK never resends on its own: every send is one attempt in the journal.
    assert_eq!(
        c.options,
        json!({"idempotency_key": ID, "max_network_retries": 0})
    );
    assert_eq!(c.timeout_ms, Some(5000));
}

#[test]
fn every_answer_to_a_send_maps_as_stripe_documents_it() {
    let applied = send_reply(&ServiceAnswer::Returned(refund(
        "re_1",
        2000,
        "succeeded",
        Some(ID),
    )));
    assert_eq!(
        applied,
        Reply::Applied(
            r#"{"amount":2000,"charge":"ch_1","id":"re_1","status":"succeeded"}"#.into()
        )
    );
    let kind = |a: ServiceAnswer| send_reply(&a).kind();
    for (answer, want) in [
        // Content errors: the request failed, nothing applied.
        (
            err(
                Some(400),
                Some("invalid_request_error"),
                Some("charge_already_refunded"),
            ),
            "rejected",
        ),
        (err(Some(400), Some("idempotency_error"), None), "rejected"),
        (err(Some(401), None, None), "rejected"),
        (
            err(Some(402), Some("card_error"), Some("card_declined")),
            "rejected",
        ),
        (err(Some(403), None, None), "rejected"),
        (
            err(
                Some(404),
                Some("invalid_request_error"),
                Some("resource_missing"),
            ),
            "rejected",
        ),
        // A concurrent request under the same key, an external dependency, a rate limit:
        // not a refusal.
        (
            err(
                Some(409),
                Some("idempotency_error"),
                Some("idempotency_key_in_use"),
            ),
            "unknown",
        ),
        (err(Some(424), None, None), "unknown"),
        (err(Some(429), None, Some("rate_limit")), "unknown"),
        // Server errors and network errors are indeterminate.
        (err(Some(500), Some("api_error"), None), "unknown"),
        (err(Some(503), None, None), "unknown"),
        (err(None, Some("APIConnectionError"), None), "unknown"),
        // A body the SDK could not read (it raises with the 200 it got).
        (err(Some(200), None, None), "unknown"),
        (
            ServiceAnswer::NoAnswer("gave up after 5000 ms".into()),
            "unknown",
        ),
        // An answer that is not a refund is never taken for one.
        (
            ServiceAnswer::Returned(json!({"object": "charge", "id": "ch_1"})),
            "unknown",
        ),
        (
            ServiceAnswer::Returned(json!({"object": "refund"})),
            "unknown",
        ),
        (ServiceAnswer::Returned(json!("ok")), "unknown"),
    ] {
        assert_eq!(kind(answer.clone()), want, "{answer:?}");
    }
}

#[test]
fn premises_read_the_charge_then_every_page_of_refunds_leaving_this_effects_own_out() {
    let effect = json!({"charge": "ch_1", "amount_cents": 2000});
    let names: Vec<String> = vec!["eligible".into(), "refunded_by_others_cents".into()];
    let cx = cx(&effect, &names);
    let Turn::Call(first) = Refund.turn(Phase::Premises, &cx, &[]) else {
        panic!()
    };
    assert_eq!(
        (first.operation.as_str(), &first.params),
        ("charges.retrieve", &json!({"id": "ch_1"}))
    );
    let mut answers = vec![charge(10_000, "succeeded")];
    let Turn::Call(page1) = Refund.turn(Phase::Premises, &cx, &answers) else {
        panic!()
    };
    assert_eq!(page1.params, json!({"charge": "ch_1", "limit": 100}));
    answers.push(list(
        vec![
            refund("re_3", 2000, "succeeded", Some(ID)),
            refund("re_2", 500, "failed", None),
        ],
        true,
    ));
    let Turn::Call(page2) = Refund.turn(Phase::Premises, &cx, &answers) else {
        panic!()
    };
    assert_eq!(
        page2.params,
        json!({"charge": "ch_1", "limit": 100, "starting_after": "re_2"})
    );
    answers.push(list(vec![refund("re_1", 700, "pending", None)], false));
    // This effect's own refund (re_3) and a failed one (re_2) do not count.
    assert_eq!(
        Refund.turn(Phase::Premises, &cx, &answers),
        Turn::Reply(Reply::Captured(
            r#"{"eligible":true,"refunded_by_others_cents":700}"#.into()
        ))
    );
    // Refunded in full by others, or a charge that did not succeed: not eligible.
    let full = [
        charge(700, "succeeded"),
        list(vec![refund("re_1", 700, "succeeded", None)], false),
    ];
    assert_eq!(
        Refund.turn(Phase::Premises, &cx, &full),
        Turn::Reply(Reply::Captured(
            r#"{"eligible":false,"refunded_by_others_cents":700}"#.into()
        ))
    );
    let failed = [charge(700, "failed"), list(vec![], false)];
    assert!(
        matches!(Refund.turn(Phase::Premises, &cx, &failed), Turn::Reply(Reply::Captured(t)) if t.contains("\"eligible\":false"))
    );
    // A read that fails or answers something else is a failed read, never a guess.
    for bad in [
        vec![err(
            Some(404),
            Some("invalid_request_error"),
            Some("resource_missing"),
        )],
        vec![ServiceAnswer::NoAnswer("x".into())],
        vec![ServiceAnswer::Returned(json!({"object": "list"}))],
        vec![charge(700, "succeeded"), err(Some(500), None, None)],
        vec![
            charge(700, "succeeded"),
            ServiceAnswer::Returned(json!({"object": "list", "has_more": false})),
        ],
        vec![charge(700, "succeeded"), list(vec![], true)],
    ] {
        assert!(
            matches!(
                Refund.turn(Phase::Premises, &cx, &bad),
                Turn::Reply(Reply::Failed(_))
            ),
            "{bad:?}"
        );
    }
    // A premise the target does not read.
    let odd: Vec<String> = vec!["colour".into()];
    let cx2 = super::Context { names: &odd, ..cx };
    assert!(
        matches!(Refund.turn(Phase::Premises, &cx2, &full), Turn::Reply(Reply::Failed(m)) if m.contains("colour"))
    );
}

#[test]
fn a_lookup_finds_the_refund_by_its_metadata_on_any_page() {
    let effect = json!({"charge": "ch_1", "amount_cents": 2000});
    let cx = cx(&effect, &[]);
    let Turn::Call(c) = Refund.turn(Phase::Lookup, &cx, &[]) else {
        panic!()
    };
    assert_eq!(c.operation, "refunds.list");
    let pages = [
        list(vec![refund("re_2", 2000, "succeeded", None)], true),
        list(vec![refund("re_1", 2000, "succeeded", Some(ID))], false),
    ];
    assert_eq!(
        Refund.turn(Phase::Lookup, &cx, &pages),
        Turn::Reply(Reply::Found(
            r#"{"amount":2000,"charge":"ch_1","id":"re_1","status":"succeeded"}"#.into()
        ))
    );
    assert_eq!(
        Refund.turn(Phase::Lookup, &cx, &pages[..1]).clone(),
        Turn::Call(ServiceCall {
            operation: "refunds.list".into(),
            params: json!({"charge": "ch_1", "limit": 100, "starting_after": "re_2"}),
            options: json!({}),
            timeout_ms: None,
        })
    );
    let none = [list(
        vec![refund("re_2", 2000, "succeeded", Some("another"))],
        false,
    )];
    assert_eq!(
        Refund.turn(Phase::Lookup, &cx, &none),
        Turn::Reply(Reply::NotFound)
    );
    assert!(matches!(
        Refund.turn(Phase::Lookup, &cx, &[err(Some(500), None, None)]),
        Turn::Reply(Reply::Failed(_))
    ));
}

#[test]
fn a_bad_effect_is_refused_at_its_pointer() {
    let at = |e: Value| match Refund.check_effect(&e) {
        Err(GateError::InvalidField { field, .. }) => field,
        other => panic!("{e}: {other:?}"),
    };
    assert!(Refund.check_effect(&json!({"charge": "ch_1", "amount_cents": 1, "reason": "duplicate", "metadata": {"a": "b"}})).is_ok());
    assert_eq!(at(json!({"charge": "ch_1"})), "/effect/amount_cents");
    assert_eq!(
        at(json!({"charge": "ch_1", "amount_cents": 0})),
        "/effect/amount_cents"
    );
    assert_eq!(
        at(json!({"charge": "ch_1", "amount_cents": -5})),
        "/effect/amount_cents"
    );
    assert_eq!(at(json!({"amount_cents": 5})), "/effect/charge");
    assert_eq!(
        at(json!({"charge": "ch_1", "amount_cents": 5, "amount": 5})),
        "/effect/amount"
    );
    assert_eq!(
        at(json!({"charge": "ch_1", "amount_cents": 5, "reason": "because"})),
        "/effect/reason"
    );
    assert_eq!(
        at(json!({"charge": "ch_1", "amount_cents": 5, "metadata": {"interlock_effect_id": "x"}})),
        "/effect/metadata/interlock_effect_id"
    );
    assert_eq!(
        at(json!({"charge": "ch_1", "amount_cents": 5, "metadata": {"n": 1}})),
        "/effect/metadata/n"
    );
}

/// A Stripe account as the tests need one: charges and refunds in memory.
#[derive(Default)]
struct Account {
    refunds: Vec<Value>,
}

impl Account {
    fn perform(&mut self, c: &ServiceCall) -> ServiceAnswer {
        match c.operation.as_str() {
            "charges.retrieve" => charge(10_000, "succeeded"),
            "refunds.list" => list(self.refunds.iter().rev().cloned().collect(), false),
            "refunds.create" => {
                let id = format!("re_{}", self.refunds.len() + 1);
                let effect = c.params["metadata"]["interlock_effect_id"].as_str();
                let r = refund(
                    &id,
                    c.params["amount"].as_u64().unwrap(),
                    "succeeded",
                    effect,
                );
                self.refunds.push(r.clone());
                ServiceAnswer::Returned(r)
            }
            other => panic!("no such operation {other}"),
        }
    }
}

fn drive(
    s: &mut EffectSession,
    gate: &mut Gate,
    j: &mut MemJournal,
    acct: &mut Account,
    now: u64,
    mut n: Next,
) -> Result<crate::Outcome, CrashPoint> {
    loop {
        n = match n {
            Next::Request(r) => {
                assert_eq!(
                    (r.target.as_str(), r.service.as_str()),
                    ("refunds", "stripe")
                );
                let a = acct.perform(&r.call);
                s.answer(gate, j, now, r.id, a).unwrap()
            }
            Next::Call(c) => {
                assert_eq!(c.role, crate::effects::Role::Key);
                s.resume(
                    gate,
                    j,
                    now,
                    c.id,
                    CallAnswer::Returned("\"case-4471\"".into()),
                )
                .unwrap()
            }
            Next::Done(o) => return Ok(o),
            Next::Crash(p) => return Err(p),
            other => panic!("{other:?}"),
        };
    }
}

/// An effect session on `gate` with the one definition `def`, waiting out no claim.
fn session(gate: &mut Gate, def: &str) -> EffectSession {
    let wait = ClaimWait {
        poll_ms: 1,
        max_polls: 0,
    };
    let mut s = EffectSession::new("agent", None, wait);
    s.define(gate, def).unwrap();
    s
}

#[test]
fn through_the_effects_machine_a_lost_reply_is_found_by_the_lookup_and_sent_once() {
    let def = r#"{"target": "refunds", "builtin": "stripe.refund", "functions": ["key"], "dedupes": false}"#;
    let mut gate = Gate::new();
    let mut j = MemJournal::new();
    let mut acct = Account::default();
    let mut s = session(&mut gate, def);
    gate.crash_at(Some(CrashPoint::AfterSend));
    let effect = r#"[{"charge": "ch_1", "amount_cents": 2000}]"#;
    let first = s
        .call(&mut gate, &mut j, 1_000, "refunds", effect, "null")
        .unwrap();
    assert_eq!(
        drive(&mut s, &mut gate, &mut j, &mut acct, 1_000, first),
        Err(CrashPoint::AfterSend)
    );
    assert_eq!(acct.refunds.len(), 1);
    // A new process: the same definition, then recovery.
    let mut gate = Gate::new();
    let mut s = session(&mut gate, def);
    let open = gate.open_effects(&mut j).unwrap();
    assert_eq!(open.len(), 1);
    let later = 1_000 + 31_000;
    let n = s.recover(&mut gate, &mut j, later, &open[0]).unwrap();
    let o = drive(&mut s, &mut gate, &mut j, &mut acct, later, n).unwrap();
    assert_eq!((o.state, acct.refunds.len()), (State::Committed, 1));
    // The proposal named the target's tier as the definition declared it, and its premises.
    let p = gate.receipt(&mut j, &open[0], None).unwrap();
    let p: Value = serde_json::from_str(&p).unwrap();
    assert_eq!(p["target"]["lookup"], true);
    assert_eq!(p["target"]["dedupes"], false);
    assert_eq!(
        p["proposed"]["premises"],
        json!({"eligible": true, "refunded_by_others_cents": 0})
    );
    assert_eq!(p["via"], "recovery-query");
    let _ = ID.to_string();
}

#[test]
fn a_definition_of_a_built_in_target_is_checked() {
    let mut gate = Gate::new();
    let mut s = EffectSession::new("agent", None, ClaimWait::default());
    let at = |s: &mut EffectSession, gate: &mut Gate, d: &str| match s.define(gate, d) {
        Err(GateError::InvalidField { field, .. }) => field,
        other => panic!("{d}: {other:?}"),
    };
    assert_eq!(
        at(
            &mut s,
            &mut gate,
            r#"{"target": "t", "builtin": "paypal.refund"}"#
        ),
        "/builtin"
    );
    assert_eq!(
        at(
            &mut s,
            &mut gate,
            r#"{"target": "t", "builtin": "stripe.refund", "params": ["a"]}"#
        ),
        "/params"
    );
    assert_eq!(
        at(
            &mut s,
            &mut gate,
            r#"{"target": "t", "builtin": "stripe.refund", "functions": ["key", "apply"]}"#
        ),
        "/functions/1"
    );
    assert_eq!(
        at(
            &mut s,
            &mut gate,
            r#"{"target": "t", "builtin": "stripe.refund", "dedupe_window_ms": 90000000}"#
        ),
        "/dedupe_window_ms"
    );
    s.define(&mut gate, r#"{"target": "t", "builtin": "stripe.refund"}"#)
        .unwrap();
    let mut j = MemJournal::new();
    let e = s
        .call(&mut gate, &mut j, 1, "t", r#"[{"charge": "ch_1"}]"#, "null")
        .unwrap_err();
    assert!(
        matches!(e, GateError::InvalidField { ref field, .. } if field == "/effect/amount_cents"),
        "{e:?}"
    );
    assert!(describe().contains("\"stripe.refund\""));
}

// guide: rust-target
/// A target of a ledger service whose SDK has `accounts.retrieve(id)`,
/// `entries.create({account, amount, reference})` (it dedupes on an idempotency key) and
/// `entries.list({account, reference})`.
struct LedgerEntry;

impl Target for LedgerEntry {
    fn name(&self) -> &'static str {
        "ledger.entry"
    }
    fn service(&self) -> &'static str {
        "ledger"
    }
    fn tier(&self) -> Tier {
        Tier {
            dedupes: true,
            dedupe_window_ms: Some(86_400_000),
            lookup: true,
        }
    }
    fn premises(&self) -> &'static [&'static str] {
        &["balance_before_cents"]
    }
    fn check_effect(&self, effect: &Value) -> Result<(), GateError> {
        let e = crate::schema::Obj::strict(
            effect,
            "/effect",
            "a ledger entry",
            &["account", "amount_cents"],
        )?;
        e.name("account", "the account")?;
        e.u64("amount_cents", "the amount, in cents").map(|_| ())
    }
    fn turn(&self, phase: Phase, cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
        let account = cx.effect["account"].clone();
        let call = |operation: &str, params: Value, options: Value| {
            Turn::Call(ServiceCall {
                operation: operation.into(),
                params,
                options,
                timeout_ms: None,
            })
        };
        match (phase, answers) {
            // The premise leaves this effect's own entry out: the balance before it.
            (Phase::Premises, []) => call("accounts.retrieve", json!({"id": account}), json!({})),
            (Phase::Premises, [_]) => call(
                "entries.list",
                json!({"account": account, "reference": cx.effect_id}),
                json!({}),
            ),
            (Phase::Premises, [a, mine]) => match (
                read_object(a, "account", "accounts.retrieve"),
                read_object(mine, "list", "entries.list"),
            ) {
                (Ok(a), Ok(mine)) => {
                    let own: i64 = mine["data"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|e| e["amount"].as_i64())
                        .sum();
                    let balance = a["balance"].as_i64().unwrap_or_default() - own;
                    let mut all = serde_json::Map::new();
                    all.insert("balance_before_cents".into(), json!(balance));
                    Turn::Reply(captured(self.name(), cx.names, &all))
                }
                (Err(m), _) | (_, Err(m)) => Turn::Reply(Reply::Failed(m)),
            },
            // The send carries the effect id as the key the service dedupes on and as the
            // reference the lookup finds.
            (Phase::Send, []) => {
                let params = json!({"account": account, "amount": cx.effect["amount_cents"], "reference": cx.effect_id});
                call(
                    "entries.create",
                    params,
                    json!({"idempotency_key": cx.idempotency_key}),
                )
            }
            (Phase::Send, [answer, ..]) => Turn::Reply(match answer {
                ServiceAnswer::Returned(v) if v["object"] == "entry" => {
                    Reply::Applied(v.to_string())
                }
                ServiceAnswer::Raised(e)
                    if http_send_verdict(e.status.unwrap_or(0)) == SendVerdict::NotApplied =>
                {
                    Reply::Rejected(e.to_string())
                }
                // Anything else may have landed: unknown, never guessed.
                other => Reply::Unknown(format!("{other:?}")),
            }),
            (Phase::Lookup, []) => call(
                "entries.list",
                json!({"account": account, "reference": cx.effect_id}),
                json!({}),
            ),
            (Phase::Lookup, [list, ..]) => {
                Turn::Reply(match read_object(list, "list", "entries.list") {
                    Ok(l) => match l["data"].as_array().and_then(|d| d.first()) {
                        Some(entry) => Reply::Found(entry.to_string()),
                        None => Reply::NotFound,
                    },
                    Err(m) => Reply::Failed(m),
                })
            }
            (_, _) => Turn::Reply(Reply::Failed("no more calls in this step".into())),
        }
    }
}
// guide: end

#[test]
fn a_target_of_your_own_is_a_table_of_calls_and_answers() {
    let effect = json!({"account": "acc_1", "amount_cents": 500});
    let names: Vec<String> = vec!["balance_before_cents".into()];
    let cx = cx(&effect, &names);
    LedgerEntry.check_effect(&effect).unwrap();
    let Turn::Call(c) = LedgerEntry.turn(Phase::Send, &cx, &[]) else {
        panic!()
    };
    assert_eq!(
        (c.operation.as_str(), &c.options),
        ("entries.create", &json!({"idempotency_key": ID}))
    );
    let account = ServiceAnswer::Returned(json!({"object": "account", "balance": 10_500}));
    let mine = ServiceAnswer::Returned(json!({"object": "list", "data": [{"amount": 500}]}));
    assert_eq!(
        LedgerEntry.turn(Phase::Premises, &cx, &[account, mine]),
        Turn::Reply(Reply::Captured(r#"{"balance_before_cents":10000}"#.into()))
    );
    assert_eq!(
        LedgerEntry
            .turn(Phase::Send, &cx, &[err(Some(503), None, None)])
            .clone(),
        Turn::Reply(Reply::Unknown(format!("{:?}", err(Some(503), None, None))))
    );
    assert!(matches!(
        LedgerEntry.turn(Phase::Send, &cx, &[err(Some(422), None, None)]),
        Turn::Reply(Reply::Rejected(_))
    ));
    let none = ServiceAnswer::Returned(json!({"object": "list", "data": []}));
    assert_eq!(
        LedgerEntry.turn(Phase::Lookup, &cx, &[none]),
        Turn::Reply(Reply::NotFound)
    );
}
