//! People in the loop: approval rules, routes and deadlines, the inbox, decisions, and a
//! service's signed confirmations (guest/core/src/gate/people.rs, src/rules.rs,
//! src/webhooks.rs).
use interlock_core::webhooks::{Delivery, Scheme};
use interlock_core::{Ask, Gate, GateError, Journal, MemJournal, Outcome, Reason, Reply, State};
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;

fn rules() -> String {
    json!({
        "rules": [
            {"name": "large", "target": "payments", "when": [{"field": "/effect/amount_cents", "over": 5000}],
             "then": "person", "route": "finance", "approvers_needed": 2},
            {"name": "flagged", "when": [{"field": "/premises/flagged", "equals": true}],
             "then": "person", "route": "risk"},
            {"name": "small", "target": "payments", "when": [{"field": "/effect/amount_cents", "at_most": 2000}],
             "then": "approve"}],
        "routes": {
            "finance": {"primary_approvers": ["alice", "bob"],
                        "duration_before_escalation_ms": HOUR,
                        "escalation_approvers": ["cfo"],
                        "duration_before_expiry_ms": 24 * HOUR,
                        "justification_required": true},
            "risk": {"primary_approvers": ["carol"], "duration_before_expiry_ms": 2 * HOUR}}})
    .to_string()
}

fn proposal(order: &str, cents: u64, premises: Value) -> String {
    json!({"agent": "refund-agent", "target": {"name": "payments", "dedupes": true},
           "key": format!("refund:{order}"),
           "effect": {"order": order, "amount_cents": cents},
           "authority": {"lease": "case"}, "premises": premises})
    .to_string()
}

fn setup() -> (Gate, MemJournal) {
    let (mut g, mut j) = (Gate::new(), MemJournal::new());
    g.grant_lease(&mut j, T0, "case", T0 + 1000 * HOUR).unwrap();
    for person in ["alice", "bob", "carol", "cfo", "ops"] {
        g.grant_lease(&mut j, T0, person, T0 + 1000 * HOUR).unwrap();
    }
    g.set_approval_rules(&mut j, T0, &rules()).unwrap();
    (g, j)
}

/// Submits and drives it: premises captured as given, the send applied.
fn run(g: &mut Gate, j: &mut MemJournal, now: u64, p: &str, premises: Value) -> Outcome {
    let mut step = g.submit(j, now, p).unwrap();
    loop {
        let reply = match &step.ask {
            Ask::Done(o) => return o.clone(),
            Ask::Capture { .. } => Reply::Captured(premises.to_string()),
            Ask::Authorize { .. } => Reply::Allowed(true),
            Ask::Apply { .. } => Reply::Applied(r#"{"refund":"re_1"}"#.into()),
            Ask::Query { .. } => Reply::NotFound,
            other => panic!("unexpected {other:?}"),
        };
        step = g.resume(j, now, step.op, reply).unwrap();
    }
}

fn decide(g: &mut Gate, j: &mut MemJournal, now: u64, d: Value) -> Result<Value, GateError> {
    g.decide(j, now, &d.to_string())
}

fn inbox(g: &mut Gate, j: &mut MemJournal, now: u64) -> Vec<Value> {
    g.inbox(j, now).unwrap().as_array().unwrap().clone()
}

fn field_of(e: GateError) -> (String, String) {
    match e {
        GateError::InvalidField { field, problem } => (field, problem),
        other => panic!("expected invalid-field, got {other:?}"),
    }
}

#[test]
fn without_rules_nothing_changes() {
    let (mut g, mut j) = (Gate::new(), MemJournal::new());
    g.grant_lease(&mut j, T0, "case", T0 + HOUR).unwrap();
    let o = run(
        &mut g,
        &mut j,
        T0,
        &proposal("o1", 9000, json!({})),
        json!({}),
    );
    assert_eq!(o.state, State::Committed);
    assert!(!j
        .streams()
        .unwrap()
        .iter()
        .any(|s| s.starts_with("request:")));
}

#[test]
fn a_small_refund_is_approved_by_rule_and_recorded_so() {
    let (mut g, mut j) = setup();
    let o = run(
        &mut g,
        &mut j,
        T0,
        &proposal("o1", 1500, json!({})),
        json!({}),
    );
    assert_eq!(o.state, State::Committed);
    let req = j.read(&format!("request:{}", o.effect_id), 0).unwrap();
    let e: Value = serde_json::from_str(&req[0]).unwrap();
    assert_eq!(
        (
            e["state"].as_str(),
            e["rule"].as_str(),
            e["by_rule"].as_bool()
        ),
        (Some("REQUESTED"), Some("small"), Some(true))
    );
    assert!(inbox(&mut g, &mut j, T0).is_empty());
}

#[test]
fn a_large_refund_waits_in_the_inbox_for_two_distinct_approvers_then_goes_out() {
    let (mut g, mut j) = setup();
    let p = proposal("o2", 9000, json!({"refunded": 0}));
    let o = run(&mut g, &mut j, T0, &p, json!({"refunded": 0}));
    assert_eq!(
        (o.state, o.reason),
        (State::Proposed, Some(Reason::ApprovalPending))
    );
    assert_eq!(o.return_to.as_deref(), Some("finance"));
    assert_eq!(
        j.length(&format!("effect:{}", o.effect_id)).unwrap(),
        0,
        "nothing of the effect recorded"
    );
    // A second process on the same journal sees the same inbox.
    let items = inbox(&mut Gate::new(), &mut j, T0 + 1);
    assert_eq!(items.len(), 1);
    let item = &items[0];
    assert_eq!(item["kind"], "approval");
    assert_eq!(item["status"], "pending");
    assert_eq!(item["approvers"], json!(["alice", "bob"]));
    assert_eq!(item["approvals_needed"], 2);
    assert_eq!(item["actions"], json!(["approve", "reject"]));
    let id = item["item"].as_str().unwrap().to_string();

    // The route wants a justification; a stranger may not decide.
    let (f, _) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 2,
            json!({"item": id, "decider": "alice", "verdict": "approve"}),
        )
        .unwrap_err(),
    );
    assert_eq!(f, "/why");
    let (f, msg) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 2,
            json!({"item": id, "decider": "carol", "verdict": "approve", "why": "ok"}),
        )
        .unwrap_err(),
    );
    assert_eq!(f, "/decider");
    assert!(msg.contains("not an approver of route finance"), "{msg}");

    decide(
        &mut g,
        &mut j,
        T0 + 3,
        json!({"item": id, "decider": "alice", "verdict": "approve", "why": "customer verified"}),
    )
    .unwrap();
    // The same person twice is not two approvals.
    let (_, msg) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 4,
            json!({"item": id, "decider": "alice", "verdict": "approve", "why": "again"}),
        )
        .unwrap_err(),
    );
    assert!(msg.contains("already approved"), "{msg}");
    let o = run(&mut g, &mut j, T0 + 5, &p, json!({"refunded": 0}));
    assert_eq!(
        o.reason,
        Some(Reason::ApprovalPending),
        "one approval of two"
    );

    let after = decide(
        &mut g,
        &mut j,
        T0 + 6,
        json!({"item": id, "decider": "bob", "verdict": "approve", "why": "fine"}),
    )
    .unwrap();
    assert_eq!(after["approved_by"], json!(["alice", "bob"]));
    assert!(inbox(&mut g, &mut j, T0 + 7).is_empty());
    let o = run(&mut g, &mut j, T0 + 8, &p, json!({"refunded": 0}));
    assert_eq!(o.state, State::Committed);
    // Deciding after the send is refused, saying why.
    let (_, msg) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 9,
            json!({"item": id, "decider": "bob", "verdict": "reject", "why": "late"}),
        )
        .unwrap_err(),
    );
    assert!(msg.contains("already"), "{msg}");

    // The receipt names the rule, the route and each decision, pinned: an edit is caught.
    let receipt = g.receipt(&mut j, &id, Some(b"k")).unwrap();
    let r: Value = serde_json::from_str(&receipt).unwrap();
    assert_eq!(r["people"]["rule"], "large");
    assert_eq!(r["people"]["route"], "finance");
    let deciders: Vec<&Value> = r["people"]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["decider"])
        .collect();
    assert_eq!(deciders, [&json!("alice"), &json!("bob")]);
    assert_eq!(r["people"]["decisions"][0]["why"], "customer verified");
    assert!(g
        .check_receipt(&mut j, &receipt, b"k")
        .unwrap()
        .problems
        .is_empty());
    let mut forged = r.clone();
    forged["people"]["decisions"][1]["decider"] = json!("mallory");
    forged.as_object_mut().unwrap().remove("signature");
    let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(b"k").unwrap();
    hmac::Mac::update(&mut mac, interlock_core::canonical(&forged).as_bytes());
    let sig = hex::encode(hmac::Mac::finalize(mac).into_bytes());
    forged["signature"] = json!({"alg": "HMAC-SHA256", "value": sig});
    let forged = forged.to_string();
    let problems = g.check_receipt(&mut j, &forged, b"k").unwrap().problems;
    assert!(
        problems
            .iter()
            .any(|p| p.detail.contains("decisions do not match")),
        "{problems:?}"
    );
}

#[test]
fn a_rejection_refuses_and_is_a_persons_no() {
    let (mut g, mut j) = setup();
    let p = proposal("o3", 100, json!({"flagged": true}));
    let o = run(&mut g, &mut j, T0, &p, json!({"flagged": true}));
    assert_eq!(o.reason, Some(Reason::ApprovalPending));
    decide(&mut g, &mut j, T0 + 1, json!({"item": o.effect_id, "decider": "carol", "verdict": "reject", "why": "fraud pattern"})).unwrap();
    let o = run(&mut g, &mut j, T0 + 2, &p, json!({"flagged": true}));
    assert_eq!(
        (o.state, o.reason, o.return_to.as_deref()),
        (
            State::Refused,
            Some(Reason::ApprovalRejected),
            Some("carol")
        )
    );
}

#[test]
fn deadlines_escalate_then_expire_never_a_silent_no() {
    let (mut g, mut j) = setup();
    let p = proposal("o4", 9000, json!({}));
    let o = run(&mut g, &mut j, T0, &p, json!({}));
    let id = o.effect_id.clone();
    // Before the escalation time the CFO may not decide; after it, the CFO may.
    let (f, _) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + HOUR - 1,
            json!({"item": id, "decider": "cfo", "verdict": "approve", "why": "x"}),
        )
        .unwrap_err(),
    );
    assert_eq!(f, "/decider");
    let items = inbox(&mut g, &mut j, T0 + HOUR);
    assert_eq!(items[0]["status"], "escalated");
    assert_eq!(items[0]["approvers"], json!(["alice", "bob", "cfo"]));
    decide(
        &mut g,
        &mut j,
        T0 + HOUR,
        json!({"item": id, "decider": "cfo", "verdict": "approve", "why": "x"}),
    )
    .unwrap();
    // One approval of two, and the day passes: expired, not rejected.
    let items = inbox(&mut g, &mut j, T0 + 24 * HOUR);
    assert_eq!(items[0]["status"], "expired");
    let o = run(&mut g, &mut j, T0 + 24 * HOUR, &p, json!({}));
    assert_eq!(
        (o.state, o.reason),
        (State::Refused, Some(Reason::ApprovalExpired))
    );
    let req: Vec<Value> = j
        .read(&format!("request:{id}"), 0)
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(req.last().unwrap()["state"], "EXPIRED");
    assert!(
        req.iter().all(|e| e["verdict"] != "reject"),
        "a timeout is never a person's no"
    );
    let (_, msg) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 24 * HOUR,
            json!({"item": id, "decider": "alice", "verdict": "approve", "why": "late"}),
        )
        .unwrap_err(),
    );
    assert!(msg.contains("expired"), "{msg}");
}

#[test]
fn an_approver_who_lost_access_decides_nothing() {
    let (mut g, mut j) = setup();
    let o = run(
        &mut g,
        &mut j,
        T0,
        &proposal("o5", 9000, json!({})),
        json!({}),
    );
    g.revoke_lease(&mut j, T0 + 1, "alice").unwrap();
    let (f, msg) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 2,
            json!({"item": o.effect_id, "decider": "alice", "verdict": "approve", "why": "x"}),
        )
        .unwrap_err(),
    );
    assert_eq!(f, "/decider");
    assert!(msg.contains("revoked"), "{msg}");
}

#[test]
fn an_approval_on_other_premises_is_returned_with_what_changed() {
    let (mut g, mut j) = setup();
    let p0 = proposal("o6", 9000, json!({"refunded": 0}));
    let o = run(&mut g, &mut j, T0, &p0, json!({"refunded": 0}));
    let id = o.effect_id.clone();
    for who in ["alice", "bob"] {
        decide(
            &mut g,
            &mut j,
            T0 + 1,
            json!({"item": id, "decider": who, "verdict": "approve", "why": "ok"}),
        )
        .unwrap();
    }
    // Someone refunded 3000 meanwhile: the agent's proposal now carries that.
    let p1 = proposal("o6", 9000, json!({"refunded": 3000}));
    let o = run(&mut g, &mut j, T0 + 2, &p1, json!({"refunded": 3000}));
    assert_eq!(
        (o.state, o.reason),
        (State::Proposed, Some(Reason::ApprovalStale))
    );
    assert_eq!(o.changed[0].name, "refunded");
    assert_eq!(
        (o.changed[0].was.as_str(), o.changed[0].now.as_str()),
        ("0", "3000")
    );
    let items = inbox(&mut g, &mut j, T0 + 3);
    assert_eq!(items[0]["status"], "pending");
    assert_eq!(items[0]["round"], 1);
    assert_eq!(items[0]["changed"][0]["now"], 3000);
    assert_eq!(items[0]["premises_seen"], json!({"refunded": 3000}));
    // Re-approved on the new premises: it goes out.
    for who in ["alice", "bob"] {
        decide(
            &mut g,
            &mut j,
            T0 + 4,
            json!({"item": id, "decider": who, "verdict": "approve", "why": "still fine"}),
        )
        .unwrap();
    }
    assert_eq!(
        run(&mut g, &mut j, T0 + 5, &p1, json!({"refunded": 3000})).state,
        State::Committed
    );
}

#[test]
fn two_people_on_one_item_at_once_one_wins_the_other_is_told() {
    let (mut g, mut j) = setup();
    let o = run(
        &mut g,
        &mut j,
        T0,
        &proposal("o7", 100, json!({"flagged": true})),
        json!({"flagged": true}),
    );
    let mut other = Gate::new();
    // Both read the item pending; the first decision lands; the second is decided on
    // a stale read and must be told.
    other.inbox(&mut j, T0).unwrap();
    decide(
        &mut g,
        &mut j,
        T0 + 1,
        json!({"item": o.effect_id, "decider": "carol", "verdict": "reject", "why": "no"}),
    )
    .unwrap();
    let (_, msg) = field_of(
        decide(
            &mut other,
            &mut j,
            T0 + 1,
            json!({"item": o.effect_id, "decider": "carol", "verdict": "approve", "why": "yes"}),
        )
        .unwrap_err(),
    );
    assert!(msg.contains("rejected by carol"), "{msg}");
}

/// An AMBIGUOUS effect: tier 3 (no dedupe, no lookup) with a lost reply.
fn ambiguous(g: &mut Gate, j: &mut MemJournal, order: &str) -> String {
    let p = json!({"agent": "a", "target": {"name": "mail"}, "key": format!("mail:{order}"),
                   "effect": {"to": order}, "authority": {"lease": "case"}})
    .to_string();
    let step = g.submit(j, T0, &p).unwrap();
    let Ask::Apply { effect_id, .. } = &step.ask else {
        panic!("{:?}", step.ask)
    };
    let id = effect_id.clone();
    let Ask::Done(o) = g
        .resume(j, T0, step.op, Reply::Unknown("timeout".into()))
        .unwrap()
        .ask
    else {
        panic!()
    };
    assert_eq!(o.state, State::Dispatched, "open until its claim runs out");
    // Recovery after the claim: tier 3 cannot know, so AMBIGUOUS.
    let Ask::Done(o) = g.recover(j, T0 + 10 * 60_000, &id).unwrap().ask else {
        panic!()
    };
    assert_eq!(o.state, State::Ambiguous);
    id
}

#[test]
fn an_ambiguous_effect_is_settled_by_a_person_with_evidence() {
    let (mut g, mut j) = setup();
    let a = ambiguous(&mut g, &mut j, "x@shop");
    let b = ambiguous(&mut g, &mut j, "y@shop");
    let items = inbox(&mut g, &mut j, T0 + 1);
    let kinds: Vec<_> = items
        .iter()
        .map(|i| (i["item"].as_str().unwrap(), i["kind"].as_str().unwrap()))
        .collect();
    assert!(
        kinds.contains(&(a.as_str(), "ambiguous")) && kinds.contains(&(b.as_str(), "ambiguous")),
        "{kinds:?}"
    );
    let (f, _) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 2,
            json!({"item": a, "decider": "ops", "verdict": "happened"}),
        )
        .unwrap_err(),
    );
    assert_eq!(f, "/evidence");
    decide(&mut g, &mut j, T0 + 2, json!({"item": a, "decider": "ops", "verdict": "happened", "evidence": {"mail_log": "250 OK id 17"}})).unwrap();
    decide(&mut g, &mut j, T0 + 3, json!({"item": b, "decider": "ops", "verdict": "did_not_happen", "why": "bounced", "evidence": {"mail_log": "no such message"}})).unwrap();
    assert!(inbox(&mut g, &mut j, T0 + 4).is_empty());
    // "Happened" is CONFIRMED with who and why; "did not happen" never resends by itself.
    let last: Value =
        serde_json::from_str(j.read(&format!("effect:{a}"), 0).unwrap().last().unwrap()).unwrap();
    assert_eq!(last["state"], "CONFIRMED");
    assert_eq!(last["evidence"]["decider"], "ops");
    let step = g.recover(&mut j, T0 + 5, &b).unwrap();
    let Ask::Done(o) = step.ask else {
        panic!("a settled effect is never sent again silently")
    };
    assert_eq!(o.state, State::Ambiguous);
    let (_, msg) = field_of(
        decide(
            &mut g,
            &mut j,
            T0 + 6,
            json!({"item": b, "decider": "ops", "verdict": "happened", "evidence": {}}),
        )
        .unwrap_err(),
    );
    assert!(
        msg.contains("already decided: did_not_happen by ops"),
        "{msg}"
    );
}

fn stripe_sign(secret: &str, t: u64, body: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut m = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    m.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", hex::encode(m.finalize().into_bytes()))
}

fn refund_event(evt: &str, effect: &str, status: &str) -> String {
    json!({"id": evt, "type": "refund.updated", "data": {"object": {
        "object": "refund", "id": "re_1", "status": status,
        "metadata": {"interlock_effect_id": effect}}}})
    .to_string()
}

#[test]
fn a_signed_stripe_webhook_confirms_once_and_a_bad_one_records_nothing() {
    let (mut g, mut j) = setup();
    let id = ambiguous(&mut g, &mut j, "z@shop");
    let secret = "whsec_test_secret";
    let now_s = T0 / 1000;
    let body = refund_event("evt_1", &id, "succeeded");
    let hook =
        |g: &mut Gate, j: &mut MemJournal, sig: String, body: &str, secret: &str, now_s: u64| {
            g.webhook(
                j,
                now_s * 1000,
                Delivery {
                    scheme: Scheme::Stripe,
                    headers: &[("Stripe-Signature".into(), sig)],
                    body: body.as_bytes(),
                },
                secret,
                None,
            )
        };
    let before = j.to_jsonl();
    let bad: Vec<(String, String, &str, u64)> = vec![
        (
            stripe_sign(secret, now_s, &body),
            body.replace("succeeded", "failed"),
            secret,
            now_s,
        ), // tampered
        (
            stripe_sign("whsec_other", now_s, &body),
            body.clone(),
            secret,
            now_s,
        ), // wrong secret
        (
            stripe_sign(secret, now_s - 301, &body),
            body.clone(),
            secret,
            now_s,
        ), // outside tolerance
        (
            stripe_sign(
                secret,
                now_s,
                &refund_event("evt_9", &"0".repeat(32), "succeeded"),
            ),
            refund_event("evt_9", &"0".repeat(32), "succeeded"),
            secret,
            now_s,
        ), // unknown reference
    ];
    for (sig, b, s, n) in bad {
        let e = hook(&mut g, &mut j, sig, &b, s, n).unwrap_err();
        assert!(matches!(e, GateError::InvalidField { .. }), "{e:?}");
        assert_eq!(j.to_jsonl(), before, "a bad webhook records nothing");
    }
    let r = hook(
        &mut g,
        &mut j,
        stripe_sign(secret, now_s, &body),
        &body,
        secret,
        now_s,
    )
    .unwrap();
    assert_eq!(r["recorded"], "confirmed");
    let after = j.to_jsonl();
    let (_, msg) = field_of(
        hook(
            &mut g,
            &mut j,
            stripe_sign(secret, now_s + 1, &body),
            &body,
            secret,
            now_s + 1,
        )
        .unwrap_err(),
    );
    assert!(msg.contains("replay"), "{msg}");
    assert_eq!(j.to_jsonl(), after, "a replayed event records nothing");
    let last: Value =
        serde_json::from_str(j.read(&format!("effect:{id}"), 0).unwrap().last().unwrap()).unwrap();
    assert_eq!(
        (last["state"].as_str(), last["evidence"]["event"].as_str()),
        (Some("CONFIRMED"), Some("evt_1"))
    );
}

#[test]
fn a_service_that_contradicts_the_journal_goes_to_a_person() {
    let (mut g, mut j) = setup();
    // The journal says COMMITTED; the service later says the refund failed.
    let o = run(
        &mut g,
        &mut j,
        T0,
        &proposal("o8", 3000, json!({})),
        json!({}),
    );
    assert_eq!(o.state, State::Committed);
    let body = refund_event("evt_2", &o.effect_id, "failed");
    let r = g
        .webhook(
            &mut j,
            T0,
            Delivery {
                scheme: Scheme::Stripe,
                headers: &[(
                    "stripe-signature".into(),
                    stripe_sign("s", T0 / 1000, &body),
                )],
                body: body.as_bytes(),
            },
            "s",
            None,
        )
        .unwrap();
    assert_eq!(r["recorded"], "contradiction");
    let items = inbox(&mut g, &mut j, T0 + 1);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["kind"], "contradiction");
    assert_eq!(items[0]["contradiction"]["service_says"], "did_not_happen");
}
