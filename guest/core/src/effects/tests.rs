//! The effect machine driven as a host drives it, against the simulated payments service.
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Value};

use super::*;
use crate::journal::MemJournal;
use crate::types::{Executed, Reason, State};

const T0: u64 = 1_800_000_000_000;
const ORDER: &str = "order_881";

struct World {
    pay: Payments,
    j: MemJournal,
    gate: Gate,
    s: EffectSession,
    now: u64,
    roles: Vec<Role>,
}

fn definition(functions: &[&str], extra: Value) -> String {
    let mut d = json!({"target": "refund", "params": ["order", "amount_cents"],
                       "functions": functions, "dedupes": false, "timeout_ms": 1000});
    for (k, v) in extra.as_object().unwrap() {
        d[k] = v.clone();
    }
    d.to_string()
}

const ALL: &[&str] = &["key", "premises", "allowed", "apply", "lookup"];

impl World {
    fn new(tier: Tier, def: &str) -> World {
        let mut pay = Payments::in_memory(tier);
        pay.add_order(ORDER, 10_000).unwrap();
        let mut gate = Gate::new();
        let mut s = EffectSession::new("refund-agent", None, ClaimWait::default());
        s.define(&mut gate, def).unwrap();
        World {
            pay,
            j: MemJournal::new(),
            gate,
            s,
            now: T0,
            roles: Vec::new(),
        }
    }

    /// The host's functions, by role, in the original's convention.
    fn perform(&mut self, c: &Call) -> CallAnswer {
        self.roles.push(c.role);
        let e: Value = serde_json::from_str(&c.effect).unwrap();
        let v = match c.role {
            Role::Key => json!(format!("refund:{}", e["order"].as_str().unwrap())),
            Role::Premises => {
                let p = self.pay.premises(ORDER, c.effect_id.as_deref()).unwrap();
                json!({"refunded_by_others_cents": p["refunded_by_others_cents"], "eligible": true})
            }
            Role::Allowed => json!(true),
            Role::Apply => {
                let r = self.pay.refund(
                    ORDER,
                    e["amount_cents"].as_u64().unwrap(),
                    c.idempotency_key.as_deref(),
                    c.effect_id.as_deref(),
                    self.now,
                );
                match r {
                    Ok(r) => json!({"refund_id": r.id}),
                    Err(err) => return CallAnswer::Refused(err.to_string()),
                }
            }
            Role::Lookup => match self
                .pay
                .find_by_reference(c.effect_id.as_deref().unwrap())
                .unwrap()
            {
                Some(r) => json!({"refund_id": r.id}),
                None => Value::Null,
            },
            other => panic!("not defined here: {other:?}"),
        };
        CallAnswer::Returned(v.to_string())
    }

    fn drive(&mut self, mut next: Next, crash_after_apply: bool) -> Option<Next> {
        loop {
            next = match next {
                Next::Done(_) | Next::Proposed(_) => return Some(next),
                Next::Crash(_) => return None,
                Next::Request(r) => panic!("no built-in target here: {r:?}"),
                Next::Sleep { id, ms } => {
                    self.now += ms;
                    self.s
                        .resume(&mut self.gate, &mut self.j, self.now, id, CallAnswer::Slept)
                        .unwrap()
                }
                Next::Call(c) => {
                    let a = self.perform(&c);
                    if crash_after_apply && c.role == Role::Apply {
                        return None;
                    }
                    self.s
                        .resume(&mut self.gate, &mut self.j, self.now, c.id, a)
                        .unwrap()
                }
            };
        }
    }

    fn call(&mut self, amount: u64, crash: bool) -> Option<Outcome> {
        let first = self
            .s
            .call(
                &mut self.gate,
                &mut self.j,
                self.now,
                "refund",
                &json!([ORDER, amount]).to_string(),
                "null",
            )
            .unwrap();
        match self.drive(first, crash)? {
            Next::Done(o) => Some(o),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_call_asks_the_key_the_premises_then_the_gate_s_steps_by_role() {
    let mut w = World::new(Tier::TWO, &definition(ALL, json!({})));
    let o = w.call(2000, false).unwrap();
    assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
    use Role::*;
    // The decision reads the premises; right before the send the gate asks the host check,
    // then re-reads them.
    assert_eq!(w.roles, [Key, Premises, Allowed, Premises, Apply]);
    // The standing lease: the definition names no authority.
    let receipt: Value =
        serde_json::from_str(&w.gate.receipt(&mut w.j, &o.effect_id, None).unwrap()).unwrap();
    assert_eq!(
        receipt["proposed"]["authority"],
        json!({"lease": "refund-agent-standing", "host_check": true})
    );
    assert_eq!(
        receipt["proposed"]["premises"]["refunded_by_others_cents"],
        json!(0)
    );
}

#[test]
fn propose_then_submit_is_the_original_s_fn_proposal_and_gate_submit() {
    let mut w = World::new(
        Tier::ONE,
        &definition(&["key", "premises", "apply"], json!({"lease": "case-4471"})),
    );
    w.gate
        .grant_lease(&mut w.j, T0, "case-4471", T0 + 3_600_000)
        .unwrap();
    let first =
        w.s.propose(
            &mut w.gate,
            &mut w.j,
            w.now,
            "refund",
            &json!([ORDER, 2000]).to_string(),
            "null",
        )
        .unwrap();
    let Some(Next::Proposed(p)) = w.drive(first, false) else {
        panic!()
    };
    let p: Value = serde_json::from_str(&p).unwrap();
    assert_eq!(p["key"], json!("refund:order_881"));
    assert_eq!(p["authority"], json!({"lease": "case-4471"}));
    assert_eq!(p["effect"], json!({"order": ORDER, "amount_cents": 2000}));
    assert_eq!(w.pay.refund_count(), 0, "nothing submitted");
    let next =
        w.s.submit(&mut w.gate, &mut w.j, w.now, &p.to_string())
            .unwrap();
    let Some(Next::Done(o)) = w.drive(next, false) else {
        panic!()
    };
    assert_eq!(o.state, State::Committed);
    assert_eq!(w.pay.refund_count(), 1);
}

#[test]
fn a_crash_after_the_send_is_recovered_by_lookup_after_the_claim() {
    let mut w = World::new(Tier::TWO, &definition(ALL, json!({})));
    assert!(w.call(2000, true).is_none());
    w.gate = Gate::new();
    let def = definition(ALL, json!({}));
    w.s = EffectSession::new("refund-agent", None, ClaimWait::default());
    w.s.define(&mut w.gate, &def).unwrap();
    let id = w.gate.open_effects(&mut w.j).unwrap()[0].clone();
    let start = w.now;
    let first = w.s.recover(&mut w.gate, &mut w.j, w.now, &id).unwrap();
    assert!(matches!(first, Next::Sleep { ms: 1001, .. }), "{first:?}");
    let Some(Next::Done(o)) = w.drive(first, false) else {
        panic!()
    };
    assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
    assert!(w.now > start + 1000);
    assert_eq!(w.pay.refund_count(), 1);
}

#[test]
fn what_a_definition_lacks_is_a_failed_read_never_an_empty_one() {
    // Approved premises ask for a name the premises function does not return.
    let mut w = World::new(Tier::TWO, &definition(&["key", "apply"], json!({})));
    let first =
        w.s.call(
            &mut w.gate,
            &mut w.j,
            w.now,
            "refund",
            &json!([ORDER, 2000]).to_string(),
            &json!({"premises": {"eligible": true}}).to_string(),
        )
        .unwrap();
    let Some(Next::Done(o)) = w.drive(first, false) else {
        panic!()
    };
    assert_eq!(
        (o.state, o.reason),
        (State::Proposed, Some(Reason::ReadFailed))
    );
    assert_eq!(w.pay.refund_count(), 0);
}

#[test]
fn bad_definitions_and_calls_are_typed_errors() {
    let mut gate = Gate::new();
    let mut s = EffectSession::new("agent", None, ClaimWait::default());
    let err = |r: Result<Option<String>, GateError>| match r {
        Err(GateError::InvalidField { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        err(s.define(&mut gate, r#"{"target": "t", "funtions": []}"#)),
        "/funtions"
    );
    assert_eq!(
        err(s.define(&mut gate, r#"{"target": "t", "functions": ["send"]}"#)),
        "/functions/0"
    );
    assert_eq!(
        s.define(&mut gate, r#"{"target": "t", "params": ["a"]}"#)
            .unwrap(),
        Some("agent".to_string())
    );
    let mut j = MemJournal::new();
    match s.call(&mut gate, &mut j, T0, "t", "[1, 2]", "null") {
        Err(GateError::InvalidField { field, problem }) => {
            assert_eq!(field, "/effect");
            assert!(problem.contains("takes 1 argument (a), got 2"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.call(&mut gate, &mut j, T0, "nope", "[]", "null"),
        Err(GateError::InvalidField { .. })
    ));
    let _: Vec<String> = Vec::new();
}
