//! The fault catalogue (docs/FAULTS.md) against the core, natively: an in-memory
//! journal, the simulated payments service, and a crash modelled as dropping the Gate
//! (everything it held in memory is lost; the journal and the service remain).
use interlock_core::{
    Ask, Executed, Gate, Journal, MemJournal, Outcome, Reason, Reply, State, Step,
};
use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Crash {
    /// The intent is durable; the process dies before the service is called.
    AfterIntent,
    /// The service committed; the process dies before the reply is handed back.
    AfterCommit,
}

struct World {
    gate: Gate,
    j: MemJournal,
    pay: Payments,
    now: u64,
}

impl World {
    fn new(tier: Tier) -> World {
        let mut pay = Payments::in_memory(tier);
        pay.add_order("order_881", 10_000).unwrap();
        let mut w = World {
            gate: Gate::new(),
            j: MemJournal::new(),
            pay,
            now: T0,
        };
        w.gate
            .grant_lease(&mut w.j, w.now, "case-4471", T0 + 48 * HOUR)
            .unwrap();
        w
    }

    fn proposal(&self, amount: u64) -> Value {
        let t = self.pay.tier();
        json!({"agent": "refund-agent",
               "target": {"name": "payments", "dedupes": t.dedupes, "lookup": t.lookup, "timeout_ms": 1000},
               "key": "refund:order_881", "effect": {"order": "order_881", "amount_cents": amount},
               "authority": {"lease": "case-4471"},
               "premises": self.pay.premises("order_881", None).unwrap()})
    }

    fn restart(&mut self) {
        self.gate = Gate::new();
        self.now += 2000; // past the 1 s claim
    }

    /// The host loop: perform each asked step against the service.
    fn drive(&mut self, mut step: Step, crash: Option<Crash>) -> Option<Outcome> {
        loop {
            let reply = match step.ask {
                Ask::Done(o) => return Some(o),
                Ask::Sleep(ms) => {
                    self.now += ms;
                    Reply::Slept
                }
                Ask::Crash(_) => return None,
                Ask::Capture {
                    effect_id, names, ..
                } => {
                    let p = self.pay.premises("order_881", Some(&effect_id)).unwrap();
                    let picked: serde_json::Map<String, Value> =
                        names.iter().map(|n| (n.clone(), p[n].clone())).collect();
                    Reply::Captured(Value::Object(picked).to_string())
                }
                Ask::Authorize { .. } => Reply::Allowed(true),
                Ask::Apply {
                    effect_id,
                    effect,
                    idempotency_key,
                    ..
                } => {
                    if crash == Some(Crash::AfterIntent) {
                        return None;
                    }
                    let e: Value = serde_json::from_str(&effect).unwrap();
                    let r = self.pay.refund(
                        e["order"].as_str().unwrap(),
                        e["amount_cents"].as_u64().unwrap(),
                        Some(&idempotency_key),
                        Some(&effect_id),
                        self.now,
                    );
                    if crash == Some(Crash::AfterCommit) {
                        return None;
                    }
                    match r {
                        Ok(r) => Reply::Applied(json!({"refund_id": r.id}).to_string()),
                        Err(e) => Reply::Rejected(e.to_string()),
                    }
                }
                Ask::Query { effect_id, .. } => {
                    match self.pay.find_by_reference(&effect_id).unwrap() {
                        Some(r) => Reply::Found(json!({"refund_id": r.id}).to_string()),
                        None => Reply::NotFound,
                    }
                }
            };
            step = self
                .gate
                .resume(&mut self.j, self.now, step.op, reply)
                .unwrap();
        }
    }

    fn submit(&mut self, amount: u64, crash: Option<Crash>) -> Option<Outcome> {
        let p = self.proposal(amount).to_string();
        self.submit_text(&p, crash)
    }

    fn submit_text(&mut self, p: &str, crash: Option<Crash>) -> Option<Outcome> {
        let step = self.gate.submit(&mut self.j, self.now, p).unwrap();
        self.drive(step, crash)
    }

    fn recover_all(&mut self) -> Vec<Outcome> {
        let ids = self.gate.open_effects(&mut self.j).unwrap();
        ids.iter()
            .map(|id| {
                let step = self.gate.recover(&mut self.j, self.now, id).unwrap();
                self.drive(step, None).unwrap()
            })
            .collect()
    }

    fn refunded(&self) -> u64 {
        self.pay.refunded_cents("order_881")
    }

    fn journal_verifies(&mut self) {
        let r = self.gate.verify(&mut self.j, &[]).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}

fn tiers() -> [Tier; 3] {
    [Tier::ONE, Tier::TWO, Tier::THREE]
}

#[test]
fn plain_send_is_one_durable_write() {
    for tier in tiers() {
        let mut w = World::new(tier);
        let before = w.j.durable_writes;
        let o = w.submit(2000, None).unwrap();
        assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
        assert_eq!(
            w.j.durable_writes - before,
            1,
            "exactly one fsync on the send path"
        );
        assert_eq!(w.refunded(), 2000);
        w.journal_verifies();
    }
}

#[test]
fn f1_crash_before_the_intent_is_durable() {
    for tier in tiers() {
        let mut w = World::new(tier);
        // The process died before submit wrote anything; on restart the agent submits again.
        w.restart();
        assert!(w.recover_all().is_empty());
        assert_eq!(w.submit(2000, None).unwrap().state, State::Committed);
        assert_eq!(w.refunded(), 2000);
    }
}

#[test]
fn crash_after_the_intent_before_the_send() {
    for (tier, want, paid) in [
        (Tier::ONE, State::Committed, 2000),
        (Tier::TWO, State::Committed, 2000),
        (Tier::THREE, State::Ambiguous, 0),
    ] {
        let mut w = World::new(tier);
        assert!(w.submit(2000, Some(Crash::AfterIntent)).is_none());
        w.restart();
        let o = w.recover_all();
        assert_eq!(o[0].state, want, "{tier:?}");
        assert_eq!(w.refunded(), paid, "{tier:?}");
    }
}

#[test]
fn f2_crash_after_the_send_before_the_reply() {
    for (tier, want) in [
        (Tier::ONE, State::Committed),
        (Tier::TWO, State::Committed),
        (Tier::THREE, State::Ambiguous),
    ] {
        let mut w = World::new(tier);
        assert!(w.submit(2000, Some(Crash::AfterCommit)).is_none());
        // While the claim is live recovery only reads: a target without a lookup is left
        // alone; one with a lookup is asked, and what it found is closed at once.
        let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
        let live = w.gate.recover(&mut w.j, w.now, &id).unwrap();
        match (tier, live.ask) {
            (Tier::TWO, Ask::Query { .. }) => {}
            (Tier::ONE | Tier::THREE, Ask::Done(o)) => assert_eq!(
                (o.state, o.reason),
                (State::Dispatched, Some(Reason::ClaimLive))
            ),
            (_, other) => panic!("acted under a live claim: {other:?}"),
        }
        w.restart();
        let o = w.recover_all();
        assert_eq!(o[0].state, want, "{tier:?}");
        assert_eq!(w.refunded(), 2000, "{tier:?}");
        assert_eq!(w.pay.refund_count(), 1, "{tier:?}");
        if tier == Tier::THREE {
            assert_eq!(
                (o[0].reason, o[0].executed),
                (Some(Reason::NoDedupeNoLookup), Executed::Unknown)
            );
        }
        w.journal_verifies();
    }
}

#[test]
fn f3_same_request_twice_returns_the_first_outcome() {
    for tier in tiers() {
        let mut w = World::new(tier);
        let p = w.proposal(2000).to_string();
        let first = w.submit_text(&p, None).unwrap();
        let second = w.submit_text(&p, None).unwrap();
        assert_eq!(second.state, first.state);
        assert_eq!(second.result, first.result);
        assert!(second.replayed && !first.replayed);
        assert_eq!(w.refunded(), 2000);
    }
}

#[test]
fn f3_concurrent_duplicates_one_send() {
    let mut w = World::new(Tier::TWO);
    let p = w.proposal(2000).to_string();
    let mut other = Gate::new();
    let a = w.gate.submit(&mut w.j, w.now, &p).unwrap();
    let b = other.submit(&mut w.j, w.now, &p).unwrap();
    // Both read premises; the first to write its intent wins, the second sees the claim.
    let cap = |w: &World, s: &Step| match &s.ask {
        Ask::Capture { effect_id, .. } => Reply::Captured(
            w.pay
                .premises("order_881", Some(effect_id))
                .unwrap()
                .to_string(),
        ),
        a => panic!("{a:?}"),
    };
    let (ra, rb) = (cap(&w, &a), cap(&w, &b));
    let a2 = w.gate.resume(&mut w.j, w.now, a.op, ra).unwrap();
    let b2 = other.resume(&mut w.j, w.now, b.op, rb).unwrap();
    assert!(matches!(a2.ask, Ask::Apply { .. }));
    match b2.ask {
        Ask::Done(o) => assert_eq!(o.reason, Some(Reason::ClaimLive)),
        x => panic!("second worker must not send: {x:?}"),
    }
    assert_eq!(w.drive(a2, None).unwrap().state, State::Committed);
    assert_eq!(w.refunded(), 2000);
}

#[test]
fn f4_model_says_30_on_the_retry() {
    for tier in tiers() {
        let mut w = World::new(tier);
        w.submit(2000, Some(Crash::AfterCommit));
        w.restart();
        w.recover_all();
        let o = w.submit(3000, None).unwrap();
        assert_eq!(
            (o.state, o.reason),
            (State::Refused, Some(Reason::ConflictingPayload))
        );
        assert_eq!(w.refunded(), 2000);
    }
}

#[test]
fn f5_same_key_other_amount() {
    for tier in tiers() {
        let mut w = World::new(tier);
        w.submit(2000, None);
        let before = w.j.log.len();
        let o = w.submit(2500, None).unwrap();
        assert_eq!(
            (o.state, o.reason, o.executed),
            (
                State::Refused,
                Some(Reason::ConflictingPayload),
                Executed::No
            )
        );
        assert_eq!(
            w.j.log.len(),
            before,
            "a conflicting payload records nothing"
        );
        assert_eq!(w.refunded(), 2000);
    }
}

#[test]
fn f6_lease_revoked_before_the_send() {
    let mut w = World::new(Tier::ONE);
    w.gate.revoke_lease(&mut w.j, w.now, "case-4471").unwrap();
    let o = w.submit(2000, None).unwrap();
    assert_eq!(
        (o.state, o.reason, o.executed),
        (State::Refused, Some(Reason::LeaseRevoked), Executed::No)
    );
    assert_eq!(w.refunded(), 0);
    let mut expired = World::new(Tier::ONE);
    expired.now += 49 * HOUR;
    assert_eq!(
        expired.submit(2000, None).unwrap().reason,
        Some(Reason::LeaseExpired)
    );
}

#[test]
fn f7_order_stops_being_eligible() {
    let mut w = World::new(Tier::TWO);
    let p = w.proposal(2000).to_string(); // decided while eligible
    w.pay.set_eligible("order_881", false).unwrap();
    let o = w.submit_text(&p, None).unwrap();
    assert_eq!(
        (o.state, o.reason),
        (State::Refused, Some(Reason::PremiseChanged))
    );
    assert_eq!(o.changed.len(), 1);
    assert_eq!(
        (
            o.changed[0].name.as_str(),
            o.changed[0].was.as_str(),
            o.changed[0].now.as_str()
        ),
        ("eligible", "true", "false")
    );
    assert_eq!(w.refunded(), 0);
    let receipt: Value =
        serde_json::from_str(&w.gate.receipt(&mut w.j, &o.effect_id, None).unwrap()).unwrap();
    assert_eq!(receipt["changed"][0]["name"], "eligible");
}

#[test]
fn f8_hand_refund_during_the_outage() {
    for tier in tiers() {
        let mut w = World::new(tier);
        w.submit(2000, Some(Crash::AfterIntent));
        w.pay.refund_by_hand("order_881", 2000, w.now).unwrap();
        w.restart();
        let o = w.recover_all();
        assert_eq!(w.refunded(), 2000, "{tier:?}");
        if tier.lookup {
            assert_eq!((o[0].state, o[0].executed), (State::Refused, Executed::No));
        } else {
            assert_eq!(o[0].state, State::Refused, "{tier:?}");
        }
    }
}

#[test]
fn f9_lease_revoked_during_the_outage() {
    for tier in tiers() {
        let mut w = World::new(tier);
        w.submit(2000, Some(Crash::AfterIntent));
        w.gate.revoke_lease(&mut w.j, w.now, "case-4471").unwrap();
        w.restart();
        let o = w.recover_all();
        assert_eq!(w.refunded(), 0, "{tier:?}");
        assert_eq!(
            (o[0].state, o[0].reason),
            (State::Refused, Some(Reason::LeaseRevoked)),
            "{tier:?}"
        );
    }
}

#[test]
fn f10_after_the_dedupe_window() {
    let with_lookup = Tier {
        dedupes: true,
        lookup: true,
    };
    let mut w = World::new(with_lookup);
    w.submit(2000, Some(Crash::AfterCommit));
    w.gate
        .grant_lease(&mut w.j, w.now, "case-4471", T0 + 100 * HOUR)
        .unwrap();
    w.now += 25 * HOUR;
    w.gate = Gate::new();
    let o = w.recover_all();
    assert_eq!(o[0].state, State::Committed);
    assert_eq!(w.refunded(), 2000);

    let mut w = World::new(Tier::ONE);
    w.submit(2000, Some(Crash::AfterCommit));
    w.gate
        .grant_lease(&mut w.j, w.now, "case-4471", T0 + 100 * HOUR)
        .unwrap();
    w.now += 25 * HOUR;
    w.gate = Gate::new();
    let o = w.recover_all();
    assert_eq!(
        (o[0].state, o[0].reason),
        (State::Ambiguous, Some(Reason::DedupeWindowPassed))
    );
    assert_eq!(w.refunded(), 2000, "never a resend past the window");
}

#[test]
fn f11_two_approvals_race_one_cap() {
    let mut w = World::new(Tier::ONE);
    let mk = |w: &World, key: &str| {
        let mut p = w.proposal(2000);
        p["key"] = json!(key);
        p["cap"] = json!({"name": "order_881", "limit_cents": 3000, "amount_cents": 2000});
        p.to_string()
    };
    let (pa, pb) = (mk(&w, "refund:order_881:a"), mk(&w, "refund:order_881:b"));
    let mut other = Gate::new();
    let a = w.gate.submit(&mut w.j, w.now, &pa).unwrap();
    let b = other.submit(&mut w.j, w.now, &pb).unwrap();
    let prem = Reply::Captured(w.pay.premises("order_881", None).unwrap().to_string());
    let a2 = w.gate.resume(&mut w.j, w.now, a.op, prem.clone()).unwrap();
    let b2 = other.resume(&mut w.j, w.now, b.op, prem).unwrap();
    let oa = w.drive(a2, None).unwrap();
    let ob = match b2.ask {
        Ask::Done(o) => o,
        x => panic!("{x:?}"),
    };
    assert_eq!(oa.state, State::Committed);
    assert_eq!(
        (ob.state, ob.reason),
        (State::Refused, Some(Reason::CapExceeded))
    );
    assert_eq!(w.refunded(), 2000);
}

#[test]
fn f12_stale_approval_goes_back_to_the_approver() {
    let mut w = World::new(Tier::ONE);
    let seen = w.pay.premises("order_881", None).unwrap();
    let approval = json!({"approval": "apr-120", "approver": "manager@shop",
        "request": {"key": "refund:order_881:120", "effect": {"order": "order_881", "amount_cents": 12000}},
        "premises_seen": seen});
    w.pay.add_order("order_881", 20_000).unwrap();
    w.gate
        .approve(&mut w.j, w.now, &approval.to_string())
        .unwrap();
    w.pay.refund_by_hand("order_881", 12_000, w.now).unwrap();
    let p = json!({"agent": "refund-agent", "target": {"name": "payments", "dedupes": true},
        "key": "refund:order_881:120", "effect": {"order": "order_881", "amount_cents": 12000},
        "authority": {"approval": "apr-120"}, "premises": {"eligible": true}});
    let o = w.submit_text(&p.to_string(), None).unwrap();
    assert_eq!(
        (o.state, o.reason),
        (State::Refused, Some(Reason::ApprovalStale))
    );
    assert_eq!(o.return_to.as_deref(), Some("manager@shop"));
    assert_eq!(o.changed[0].name, "refunded_by_others_cents");
    assert_eq!(w.refunded(), 12_000);
}

#[test]
fn an_approval_authorizes_its_payload_not_only_its_key() {
    // The effect id comes from the key; an approval of $20 under a key must not authorize
    // a $30 refund under the same key.
    let mut w = World::new(Tier::ONE);
    let approval = json!({"approval": "apr-20", "approver": "manager@shop",
        "request": {"key": "refund:order_881", "effect": {"order": "order_881", "amount_cents": 2000}}});
    w.gate
        .approve(&mut w.j, w.now, &approval.to_string())
        .unwrap();
    let p = |cents: u64| {
        json!({"agent": "refund-agent", "target": {"name": "payments", "dedupes": true},
        "key": "refund:order_881", "effect": {"order": "order_881", "amount_cents": cents},
        "authority": {"approval": "apr-20"}, "premises": {"eligible": true}})
        .to_string()
    };
    let o = w.submit_text(&p(3000), None).unwrap();
    assert_eq!(
        (o.state, o.reason),
        (State::Refused, Some(Reason::ApprovalMissing))
    );
    assert_eq!(w.refunded(), 0);
}

#[test]
fn an_unrelated_refund_inside_a_bound_does_not_refuse() {
    let mut w = World::new(Tier::ONE);
    let mut p = w.proposal(2000);
    p["bounds"] = json!({"refunded_by_others_cents": {"at_most": 1000}});
    w.pay.refund_by_hand("order_881", 500, w.now).unwrap();
    assert_eq!(
        w.submit_text(&p.to_string(), None).unwrap().state,
        State::Committed
    );
    assert_eq!(w.refunded(), 2500);
}

#[test]
fn a_failed_premise_read_at_recovery_keeps_the_effect_open() {
    let mut w = World::new(Tier::ONE);
    w.submit(2000, Some(Crash::AfterIntent));
    w.restart();
    let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
    let s = w.gate.recover(&mut w.j, w.now, &id).unwrap();
    assert!(matches!(s.ask, Ask::Capture { .. }));
    let s = w
        .gate
        .resume(&mut w.j, w.now, s.op, Reply::Failed("db down".into()))
        .unwrap();
    match s.ask {
        Ask::Done(o) => assert_eq!(
            (o.state, o.reason),
            (State::Dispatched, Some(Reason::ReadFailed))
        ),
        x => panic!("sent blind: {x:?}"),
    }
    assert_eq!(w.gate.open_effects(&mut w.j).unwrap(), vec![id]);
    assert_eq!(w.recover_all()[0].state, State::Committed);
    assert_eq!(w.refunded(), 2000);
}

/// Issue 11: a host check that throws is not a "no". At recovery of an effect whose send
/// landed, it must leave the effect open, not close it REFUSED `not_allowed`.
#[test]
fn a_host_check_that_could_not_be_made_keeps_the_effect_open() {
    for tier in tiers() {
        let mut w = World::new(tier);
        let mut p = w.proposal(2000);
        p["authority"]["host_check"] = json!(true);
        let text = p.to_string();
        // At submit: nothing is recorded, nothing sent.
        let s = w.gate.submit(&mut w.j, w.now, &text).unwrap();
        assert!(matches!(s.ask, Ask::Authorize { .. }), "{tier:?}");
        let before = w.j.log.len();
        let s = w
            .gate
            .resume(
                &mut w.j,
                w.now,
                s.op,
                Reply::Failed("policy service down".into()),
            )
            .unwrap();
        match s.ask {
            Ask::Done(o) => assert_eq!(
                (o.state, o.reason, o.executed),
                (State::Proposed, Some(Reason::ReadFailed), Executed::No)
            ),
            x => panic!("{tier:?}: went on after a failed check: {x:?}"),
        }
        assert_eq!(w.j.log.len(), before);
        // The send lands, the reply is lost; at recovery the check fails again.
        w.submit_text(&text, Some(Crash::AfterCommit));
        w.restart();
        let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
        let before = w.j.log.len();
        let mut s = w.gate.recover(&mut w.j, w.now, &id).unwrap();
        if let Ask::Query { .. } = s.ask {
            // A lookup proves the send and commits before any check: nothing to judge.
            assert_eq!(w.drive(s, None).unwrap().state, State::Committed);
            continue;
        }
        assert!(
            matches!(s.ask, Ask::Authorize { .. }),
            "{tier:?}: {:?}",
            s.ask
        );
        s = w
            .gate
            .resume(
                &mut w.j,
                w.now,
                s.op,
                Reply::Failed("policy service down".into()),
            )
            .unwrap();
        match s.ask {
            Ask::Done(o) => assert_eq!(
                (o.state, o.reason, o.executed),
                (
                    State::Dispatched,
                    Some(Reason::ReadFailed),
                    Executed::Unknown
                ),
                "{tier:?}"
            ),
            x => panic!("{tier:?}: went on after a failed check: {x:?}"),
        }
        assert_eq!(w.j.log.len(), before, "{tier:?}: wrote on a failed check");
        let o = &w.recover_all()[0];
        assert!(o.state != State::Refused, "{tier:?}: {o:?}");
        assert_eq!(w.refunded(), 2000, "{tier:?}");
    }
}

/// Issue 11: a host that cannot reach an effect's target must leave it open, asking and
/// writing nothing, whatever the recovery table would do next; a closed effect still
/// reports its outcome.
#[test]
fn an_unroutable_target_leaves_the_effect_open_and_untouched() {
    for tier in tiers() {
        let mut w = World::new(tier);
        w.submit(2000, Some(Crash::AfterCommit));
        w.restart();
        w.gate.set_routes(["email".to_string()]);
        let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
        let before = w.j.log.len();
        for _ in 0..2 {
            let s = w.gate.recover(&mut w.j, w.now, &id).unwrap();
            match s.ask {
                Ask::Done(o) => assert_eq!(
                    (o.state, o.reason, o.executed),
                    (
                        State::Dispatched,
                        Some(Reason::TargetUnroutable),
                        Executed::Unknown
                    ),
                    "{tier:?}"
                ),
                x => panic!("{tier:?}: asked a host that cannot route it: {x:?}"),
            }
            // A submit of the same request is no back door.
            let p = w.proposal(2000).to_string();
            let s = w.gate.submit(&mut w.j, w.now, &p).unwrap();
            assert!(
                matches!(s.ask, Ask::Done(ref o) if o.reason == Some(Reason::TargetUnroutable))
            );
        }
        assert_eq!(
            w.j.log.len(),
            before,
            "{tier:?}: wrote for an unroutable target"
        );
        w.gate
            .set_routes(["email".to_string(), "payments".to_string()]);
        let o = &w.recover_all()[0];
        assert_eq!(w.refunded(), 2000, "{tier:?}");
        assert!(o.state.is_terminal(), "{tier:?}: {o:?}");
        // Closed now: reported again even by a host that routes nothing.
        w.gate.set_routes(Vec::<String>::new());
        let s = w.gate.recover(&mut w.j, w.now, &id).unwrap();
        assert!(matches!(s.ask, Ask::Done(ref r) if r.state == o.state && r.replayed));
    }
}

#[test]
fn bad_input_is_a_typed_error_and_the_journal_is_untouched() {
    let mut w = World::new(Tier::ONE);
    let before = w.j.log.len();
    for bad in ["{", "[]", r#"{"agent": 3}"#, &"x".repeat(70_000)] {
        assert!(w.gate.submit(&mut w.j, w.now, bad).is_err());
    }
    let p = w.proposal(2000).to_string();
    let s = w.gate.submit(&mut w.j, w.now, &p).unwrap();
    let err = w
        .gate
        .resume(&mut w.j, w.now, s.op, Reply::NotFound)
        .unwrap_err();
    assert!(matches!(err, interlock_core::GateError::UnexpectedReply(_)));
    assert_eq!(w.j.log.len(), before);
    // The operation still waits for its proper reply.
    let o = w.drive(s, None).unwrap();
    assert_eq!(o.state, State::Committed);
}

#[test]
fn receipts_sign_and_catch_edits() {
    let mut w = World::new(Tier::ONE);
    let o = w.submit(2000, None).unwrap();
    let key = b"shared-with-the-service";
    let r = w.gate.receipt(&mut w.j, &o.effect_id, Some(key)).unwrap();
    assert!(w
        .gate
        .check_receipt(&mut w.j, &r, key)
        .unwrap()
        .problems
        .is_empty());
    let forged = r.replace("\"amount_cents\":2000", "\"amount_cents\":200000");
    assert!(!w
        .gate
        .check_receipt(&mut w.j, &forged, key)
        .unwrap()
        .problems
        .is_empty());
    assert!(!w
        .gate
        .check_receipt(&mut w.j, &r, b"other key")
        .unwrap()
        .problems
        .is_empty());
    // Truncating the journal under a receipt is caught through its anchor.
    w.j.truncate(&format!("effect:{}", o.effect_id), 1);
    let rep = w.gate.verify(&mut w.j, &[r]).unwrap();
    assert_eq!(rep.problems.len(), 1);
    assert_eq!(rep.problems[0].kind, interlock_core::ProblemKind::Truncated);
}

#[test]
fn journal_is_deterministic_under_a_fixed_clock() {
    let run = || {
        let mut w = World::new(Tier::TWO);
        w.submit(2000, Some(Crash::AfterCommit));
        w.restart();
        w.recover_all();
        w.j.to_jsonl()
    };
    assert_eq!(run(), run());
    let text = run();
    assert!(text.lines().all(|l| l.starts_with('{')));
    let mut j = MemJournal::new();
    assert!(j.streams().unwrap().is_empty());
}

#[test]
fn two_recoverers_at_once_one_record_and_both_report_it() {
    let mut w = World::new(Tier::TWO);
    w.submit(2000, Some(Crash::AfterCommit));
    w.restart();
    let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
    let mut other = Gate::new();
    let a = w.gate.recover(&mut w.j, w.now, &id).unwrap();
    let b = other.recover(&mut w.j, w.now, &id).unwrap();
    assert!(matches!(
        (&a.ask, &b.ask),
        (Ask::Query { .. }, Ask::Query { .. })
    ));
    let found = Reply::Found(json!({"refund_id": "re_0001"}).to_string());
    let oa = w.gate.resume(&mut w.j, w.now, a.op, found.clone()).unwrap();
    let ob = other.resume(&mut w.j, w.now, b.op, found).unwrap();
    match (oa.ask, ob.ask) {
        (Ask::Done(oa), Ask::Done(ob)) => {
            assert_eq!((oa.state, oa.replayed), (State::Committed, false));
            // The second's COMMITTED lost the compare-and-append: it reports the record.
            assert_eq!((ob.state, ob.replayed), (State::Committed, true));
        }
        x => panic!("{x:?}"),
    }
    let stream = w.j.read(&format!("effect:{id}"), 0).unwrap();
    assert_eq!(
        stream
            .iter()
            .filter(|e| e.contains("\"COMMITTED\""))
            .count(),
        1
    );
    w.journal_verifies();
}

/// A worker gets the target's `applied`, then stalls past its claim; another worker
/// resolves the effect meanwhile. The first worker's proof must not be dropped.
fn stalled_sender(tier: Tier) -> (World, Gate, Step, String) {
    let mut w = World::new(tier);
    let p = w.proposal(2000).to_string();
    let mut a = Gate::new();
    let s = a.submit(&mut w.j, w.now, &p).unwrap();
    let Ask::Capture { effect_id, .. } = &s.ask else {
        panic!("{s:?}")
    };
    let id = effect_id.clone();
    let prem = Reply::Captured(w.pay.premises("order_881", Some(&id)).unwrap().to_string());
    let s = a.resume(&mut w.j, w.now, s.op, prem).unwrap();
    assert!(matches!(s.ask, Ask::Apply { .. }));
    w.pay
        .refund("order_881", 2000, Some(&id), Some(&id), w.now)
        .unwrap();
    w.now += 5000; // the claim has expired while the reply waits
    (w, a, s, id)
}

#[test]
fn a_late_reply_after_ambiguous_is_recorded_as_confirmed() {
    let (mut w, mut a, s, id) = stalled_sender(Tier::THREE);
    assert_eq!(w.recover_all()[0].state, State::Ambiguous);
    let late = a
        .resume(
            &mut w.j,
            w.now,
            s.op,
            Reply::Applied(json!({"refund_id": "re_0001"}).to_string()),
        )
        .unwrap();
    match late.ask {
        Ask::Done(o) => assert_eq!((o.state, o.executed), (State::Confirmed, Executed::Yes)),
        x => panic!("{x:?}"),
    }
    let r: Value = serde_json::from_str(&w.gate.receipt(&mut w.j, &id, None).unwrap()).unwrap();
    assert_eq!(
        (r["final"].as_str(), r["executed"].as_str()),
        (Some("CONFIRMED"), Some("yes"))
    );
    assert_eq!(w.refunded(), 2000);
    w.journal_verifies();
}

#[test]
fn a_late_reply_during_a_deduped_resend_commits_once() {
    let (mut w, mut a, s, id) = stalled_sender(Tier::ONE);
    // Another worker recovers: re-check, then a resend under the same key.
    let r = w.gate.recover(&mut w.j, w.now, &id).unwrap();
    let prem = Reply::Captured(w.pay.premises("order_881", Some(&id)).unwrap().to_string());
    let resend = w.gate.resume(&mut w.j, w.now, r.op, prem).unwrap();
    assert!(matches!(resend.ask, Ask::Apply { attempt: 1, .. }));
    // The stalled worker's reply arrives first: COMMITTED goes after the new DISPATCHED.
    let late = a
        .resume(
            &mut w.j,
            w.now,
            s.op,
            Reply::Applied(json!({"refund_id": "re_0001"}).to_string()),
        )
        .unwrap();
    assert!(matches!(
        late.ask,
        Ask::Done(Outcome {
            state: State::Committed,
            ..
        })
    ));
    // The resend is deduped by the service; its COMMITTED loses the race and reports the record.
    let again = w
        .gate
        .resume(
            &mut w.j,
            w.now,
            resend.op,
            Reply::Applied(json!({"refund_id": "re_0001"}).to_string()),
        )
        .unwrap();
    match again.ask {
        Ask::Done(o) => assert_eq!((o.state, o.replayed), (State::Committed, true)),
        x => panic!("{x:?}"),
    }
    let stream = w.j.read(&format!("effect:{id}"), 0).unwrap();
    assert_eq!(
        stream
            .iter()
            .filter(|e| e.contains("\"COMMITTED\""))
            .count(),
        1
    );
    assert_eq!(w.pay.refund_count(), 1);
    w.journal_verifies();
}

/// Two machines share one journal, and B's clock runs 400 ms ahead of A's. A has written
/// its intent (a 1 s claim) and its send is in flight when, 700 ms later, B's clock says
/// A's deadline has passed. Without a skew margin B takes over: the lookup finds nothing
/// yet, B sends again, then A's send lands: two refunds. With `clock_skew_ms` 500 (at least
/// the skew) the claim is live on B's clock too, and B waits it out.
#[test]
fn a_claim_holds_on_a_clock_that_runs_ahead_by_up_to_the_skew_margin() {
    const SKEW_MS: u64 = 400;
    for (margin, want_refunds) in [(None, 2), (Some(500u64), 1)] {
        let mut w = World::new(Tier::TWO);
        let mut p = w.proposal(2000);
        if let Some(m) = margin {
            p["target"]["clock_skew_ms"] = json!(m);
        }
        let mut a = Gate::new();
        let t_a = w.now;
        let s = a.submit(&mut w.j, t_a, &p.to_string()).unwrap();
        let Ask::Capture { effect_id, .. } = &s.ask else {
            panic!("{s:?}")
        };
        let id = effect_id.clone();
        let prem = Reply::Captured(w.pay.premises("order_881", Some(&id)).unwrap().to_string());
        let send = a.resume(&mut w.j, t_a, s.op, prem).unwrap();
        assert!(matches!(send.ask, Ask::Apply { .. }), "{send:?}");

        // 700 ms later: B's clock reads 1100 ms after A's intent.
        let t_b = t_a + 700 + SKEW_MS;
        let mut b = Gate::new();
        let mut r = b.recover(&mut w.j, t_b, &id).unwrap();
        if margin.is_some() {
            // B may look the refund up under A's live claim (a lookup only reads): not
            // there yet, so B waits the claim out.
            assert!(matches!(r.ask, Ask::Query { .. }), "{r:?}");
            r = b.resume(&mut w.j, t_b, r.op, Reply::NotFound).unwrap();
            match &r.ask {
                Ask::Done(o) => {
                    assert_eq!(
                        (o.state, o.reason),
                        (State::Dispatched, Some(Reason::ClaimLive))
                    );
                    assert_eq!(o.retry_after_ms, Some(1000 + 500 - 700 - SKEW_MS));
                }
                other => panic!("took over a live claim: {other:?}"),
            }
        } else {
            // B acts: looks the refund up (not there yet), then sends again.
            w.now = t_b;
            std::mem::swap(&mut w.gate, &mut b);
            assert_eq!(w.drive(r, None).unwrap().state, State::Committed);
        }
        // A's send lands, and A records its reply.
        w.pay
            .refund("order_881", 2000, Some(&id), Some(&id), t_a + 800)
            .unwrap();
        let done = a
            .resume(
                &mut w.j,
                t_a + 800,
                send.op,
                Reply::Applied(json!({"refund_id": "re_0001"}).to_string()),
            )
            .unwrap();
        assert!(
            matches!(
                done.ask,
                Ask::Done(Outcome {
                    state: State::Committed,
                    ..
                })
            ),
            "{done:?}"
        );
        assert_eq!(w.pay.refund_count(), want_refunds, "margin {margin:?}");
        w.journal_verifies();
    }
}

/// The lease was granted until T on the granter's clock; this worker's clock runs 300 ms
/// behind it. 200 ms before T by this clock the lease has already run out on the
/// granter's. With `clock_skew_ms` 500 the worker judges expiries by the latest time it may
/// be, and refuses; without a margin it would send under an expired lease.
#[test]
fn expiries_are_judged_by_the_latest_clock_the_skew_allows() {
    for (margin, want) in [(None, State::Committed), (Some(500u64), State::Refused)] {
        let mut w = World::new(Tier::ONE);
        w.gate
            .grant_lease(&mut w.j, w.now, "short", w.now + 1000)
            .unwrap();
        let mut p = w.proposal(2000);
        p["authority"] = json!({"lease": "short"});
        if let Some(m) = margin {
            p["target"]["clock_skew_ms"] = json!(m);
        }
        w.now += 800;
        let o = w.submit_text(&p.to_string(), None).unwrap();
        assert_eq!(o.state, want, "margin {margin:?}");
        if margin.is_some() {
            assert_eq!(o.reason, Some(Reason::LeaseExpired));
            assert_eq!(w.refunded(), 0);
        }
    }
}

/// Recovery that waits out a live claim: the gate asks the host to sleep (the claim's
/// remaining time + 1 ms: a claim is live until strictly after its deadline), then acts;
/// with no polls left it reports the effect open, `claim_live`. The host only sleeps. A
/// target with a lookup is asked first (it only reads): found, the effect closes at once.
#[test]
fn recovery_waits_out_a_live_claim_by_asking_the_host_to_sleep() {
    use interlock_core::{ClaimWait, GateError};
    let mut w = World::new(Tier::TWO);
    assert!(w.submit(2000, Some(Crash::AfterCommit)).is_none());
    let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
    w.gate = Gate::new(); // a new process, right after the crash: the 1 s claim is live
    let start = w.now;
    let first = w
        .gate
        .recover_waiting(&mut w.j, w.now, &id, ClaimWait::default())
        .unwrap();
    assert!(matches!(first.ask, Ask::Query { .. }), "{first:?}");
    let o = w.drive(first, None).unwrap();
    assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
    assert_eq!(
        w.now, start,
        "closed by the lookup, the claim not waited out"
    );
    assert_eq!(w.pay.refund_count(), 1);

    // The refund did not land (the worker died before the send): not found under the live
    // claim, so the claim is waited out and the lookup asked again before a send.
    let mut w = World::new(Tier::TWO);
    assert!(w.submit(2000, Some(Crash::AfterIntent)).is_none());
    let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
    w.gate = Gate::new();
    let query = w
        .gate
        .recover_waiting(&mut w.j, w.now, &id, ClaimWait::default())
        .unwrap();
    assert!(matches!(query.ask, Ask::Query { .. }), "{query:?}");
    let first = w
        .gate
        .resume(&mut w.j, w.now, query.op, Reply::NotFound)
        .unwrap();
    let Ask::Sleep(ms) = first.ask else {
        panic!("acted under a live claim: {first:?}")
    };
    assert_eq!(ms, 1001, "the claim's remaining 1000 ms, plus 1");
    // Asked anything but `slept`, the sleep still waits.
    assert!(matches!(
        w.gate.resume(&mut w.j, w.now, first.op, Reply::NotFound),
        Err(GateError::UnexpectedReply(_))
    ));
    let o = w.drive(first, None).unwrap();
    assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
    assert_eq!(w.pay.refund_count(), 1);

    // No polls left: the live claim is reported, nothing written.
    let mut w = World::new(Tier::ONE);
    assert!(w.submit(2000, Some(Crash::AfterCommit)).is_none());
    let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
    w.gate = Gate::new();
    let none = ClaimWait {
        poll_ms: 200,
        max_polls: 0,
    };
    let step = w.gate.recover_waiting(&mut w.j, w.now, &id, none).unwrap();
    let Ask::Done(o) = step.ask else {
        panic!("{step:?}")
    };
    assert_eq!(
        (o.state, o.reason, o.retry_after_ms),
        (State::Dispatched, Some(Reason::ClaimLive), Some(1000))
    );
    // A cancelled sleep is gone.
    let step = w
        .gate
        .recover_waiting(&mut w.j, w.now, &id, ClaimWait::default())
        .unwrap();
    w.gate.cancel(step.op);
    assert!(matches!(
        w.gate.resume(&mut w.j, w.now, step.op, Reply::Slept),
        Err(GateError::UnknownOperation(_))
    ));
}

/// A lookup asked while another worker's claim is live may say "not found" just before
/// that worker's send lands. Its answer proves nothing, even when it arrives after the claim
/// ran out: the gate asks again instead of sending.
#[test]
fn a_not_found_heard_under_a_live_claim_is_asked_again_never_sent_on() {
    let mut w = World::new(Tier::TWO);
    assert!(w.submit(2000, Some(Crash::AfterIntent)).is_none());
    let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
    let mut b = Gate::new();
    let q = b.recover(&mut w.j, w.now, &id).unwrap();
    assert!(matches!(q.ask, Ask::Query { .. }), "{q:?}");
    // The first send lands late, and the "not found" answer reaches the gate only after the
    // claim ran out.
    w.pay
        .refund("order_881", 2000, Some(&id), Some(&id), w.now + 900)
        .unwrap();
    w.now += 2000;
    let again = b.resume(&mut w.j, w.now, q.op, Reply::NotFound).unwrap();
    assert!(
        matches!(again.ask, Ask::Query { .. }),
        "sent on a stale answer: {again:?}"
    );
    w.gate = b;
    let o = w.drive(again, None).unwrap();
    assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
    assert_eq!(w.pay.refund_count(), 1);
    w.journal_verifies();
}

/// The one crash injection every host uses in its tests: the gate asks its host to die at
/// the named point, and the journal is left as a killed process leaves it.
#[test]
fn crash_points_leave_the_journal_as_a_killed_process_does() {
    use interlock_core::CrashPoint;
    let states = |w: &mut World, id: &str| -> Vec<String> {
        w.j.read(&format!("effect:{id}"), 0)
            .unwrap()
            .iter()
            .map(|e| {
                serde_json::from_str::<Value>(e).unwrap()["state"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    // Before the send: the intent is durable, nothing was sent.
    let mut w = World::new(Tier::TWO);
    w.gate.crash_at(Some(CrashPoint::BeforeSend));
    let p = w.proposal(2000).to_string();
    let s = w.gate.submit(&mut w.j, w.now, &p).unwrap();
    let id = w.gate.effect_id_of(&p).unwrap();
    let Ask::Capture { .. } = s.ask else {
        panic!("{s:?}")
    };
    let prem = Reply::Captured(w.pay.premises("order_881", Some(&id)).unwrap().to_string());
    let s = w.gate.resume(&mut w.j, w.now, s.op, prem).unwrap();
    assert_eq!(s.ask, Ask::Crash(CrashPoint::BeforeSend));
    assert_eq!(
        states(&mut w, &id),
        ["PROPOSED", "AUTHORIZED", "DISPATCHED"]
    );
    assert_eq!(w.pay.refund_count(), 0);

    // After the send: the service applied it; no COMMITTED; recovery finds it.
    let mut w = World::new(Tier::TWO);
    w.gate.crash_at(Some(CrashPoint::AfterSend));
    let o = w.submit(2000, None);
    assert!(o.is_none(), "the host died: {o:?}");
    let id = w.gate.effect_id_of(&w.proposal(2000).to_string()).unwrap();
    assert_eq!(
        states(&mut w, &id),
        ["PROPOSED", "AUTHORIZED", "DISPATCHED"]
    );
    assert_eq!(w.pay.refund_count(), 1);

    // In recovery, after its lookup: still open; the next recovery closes it, once.
    w.restart();
    w.gate.crash_at(Some(CrashPoint::InRecovery));
    let step = w.gate.recover(&mut w.j, w.now, &id).unwrap();
    assert!(w.drive(step, None).is_none());
    assert_eq!(
        states(&mut w, &id),
        ["PROPOSED", "AUTHORIZED", "DISPATCHED"]
    );
    w.restart();
    let o = w.recover_all();
    assert_eq!(
        (o[0].state, o[0].executed),
        (State::Committed, Executed::Yes)
    );
    assert_eq!(w.pay.refund_count(), 1);
}
