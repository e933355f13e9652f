//! The tool-gating machine against the simulated payments service offered as tools (an
//! MCP server's answers, or plain functions'), driven as every host drives it.
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Value};

use super::*;
use crate::journal::MemJournal;
use crate::types::{Executed, Reason, State};

const T0: u64 = 1_800_000_000_000;
const ORDER: &str = "order_881";

fn config(extra: Value) -> String {
    let mut tool = json!({
        "key": ["order_id"],
        "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                     "fields": ["refunded_total"]},
        "idempotency_argument": "reference",
        "timeout_ms": 1000,
    });
    for (k, v) in extra.as_object().unwrap() {
        tool[k] = v.clone();
    }
    json!({"tools": {"create_refund": tool}}).to_string()
}

const LOOKUP: &str = r#"{"lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"}}"#;

struct World {
    pay: Payments,
    j: MemJournal,
    gate: Gate,
    session: ToolSession,
    now: u64,
    results: Results,
    /// Every tool call the host made, in order.
    calls: Vec<(String, Value)>,
    /// The next call of this tool fails (no answer).
    fail_next: Option<&'static str>,
    /// What the person at the client answers, in turn (none left: no one can be asked).
    person: Vec<CallAnswer>,
    /// Every question the host was told to ask a person.
    asked: Vec<Value>,
}

impl World {
    fn new(tier: Tier, extra: &str, results: Results) -> World {
        World::with_config(tier, config(serde_json::from_str(extra).unwrap()), results)
    }

    fn with_config(tier: Tier, config: String, results: Results) -> World {
        let mut pay = Payments::in_memory(tier);
        pay.add_order(ORDER, 10_000).unwrap();
        let mut gate = Gate::new();
        let mut j = MemJournal::new();
        gate.grant_lease(&mut j, T0, "case-4471", T0 + 3_600_000)
            .unwrap();
        let (session, started) = ToolSession::start(
            &config,
            Options {
                agent: "agent".into(),
                authority: Some(json!({"lease": "case-4471"})),
                strict: false,
                results,
                wait: ClaimWait::default(),
            },
        )
        .unwrap();
        gate.set_routes(started.gated.clone());
        World {
            pay,
            j,
            gate,
            session,
            now: T0,
            results,
            calls: Vec::new(),
            fail_next: None,
            person: Vec::new(),
            asked: Vec::new(),
        }
    }

    /// The host calls a tool: the service's answer, as MCP or as a plain value.
    fn invoke(&mut self, call: &ToolCall) -> CallAnswer {
        self.calls.push((call.tool.clone(), call.arguments.clone()));
        if self.fail_next == Some(call.tool.as_str()) {
            self.fail_next = None;
            return CallAnswer::Failed("connection lost".into());
        }
        let a = &call.arguments;
        let got: Result<Value, String> = match call.tool.as_str() {
            "get_order" => Ok(json!({"refunded_total":
                self.pay.premises(ORDER, a["excluding"].as_str()).unwrap()["refunded_by_others_cents"]})),
            "create_refund" => self
                .pay
                .refund(
                    a["order_id"].as_str().unwrap(),
                    a["amount_cents"].as_u64().unwrap(),
                    a["reference"].as_str(),
                    a["reference"].as_str(),
                    self.now,
                )
                .map(|r| json!({"refund_id": r.id}))
                .map_err(|e| e.to_string()),
            "find_refund" => Ok(json!({"found": self
                .pay
                .find_by_reference(a["reference"].as_str().unwrap())
                .unwrap()
                .map(|r| json!({"refund_id": r.id}))})),
            other => panic!("no tool {other}"),
        };
        match (self.results, got) {
            (Results::Plain, Ok(v)) => CallAnswer::Returned(v.to_string()),
            (Results::Plain, Err(e)) => CallAnswer::Refused(e),
            (Results::Mcp, Ok(v)) => CallAnswer::Returned(
                json!({"content": [{"type": "text", "text": v.to_string()}], "structuredContent": v})
                    .to_string(),
            ),
            (Results::Mcp, Err(e)) => CallAnswer::Returned(
                json!({"content": [{"type": "text", "text": e}], "isError": true}).to_string(),
            ),
        }
    }

    /// The host's loop: call what it is told, sleep when told, until done. `crash_at`:
    /// the host dies when asked to call this tool the n-th time (after the call, when
    /// `after` is true).
    fn drive(&mut self, mut next: ToolNext, crash: Option<(&str, bool)>) -> Option<ToolDone> {
        loop {
            next = match next {
                ToolNext::Done(d) => return Some(d),
                ToolNext::Crash(_) => return None,
                ToolNext::Sleep { id, ms } => {
                    self.now += ms;
                    self.resume(id, CallAnswer::Slept)
                }
                ToolNext::Call { id, call, .. } => {
                    if crash == Some((call.tool.as_str(), false)) {
                        return None;
                    }
                    let answer = self.invoke(&call);
                    if crash == Some((call.tool.as_str(), true)) {
                        return None;
                    }
                    self.resume(id, answer)
                }
                ToolNext::Ask { id, request } => {
                    self.asked.push(request);
                    let answer = if self.person.is_empty() {
                        CallAnswer::Failed("the client declared no elicitation".into())
                    } else {
                        self.person.remove(0)
                    };
                    self.resume(id, answer)
                }
            };
        }
    }

    fn resume(&mut self, id: u64, answer: CallAnswer) -> ToolNext {
        self.session
            .resume(&mut self.gate, &mut self.j, self.now, id, answer)
            .unwrap()
    }

    fn call(&mut self, args: Value, crash: Option<(&str, bool)>) -> Option<ToolDone> {
        let first = self
            .session
            .call(
                &mut self.gate,
                &mut self.j,
                self.now,
                "create_refund",
                &args.to_string(),
            )
            .unwrap();
        self.drive(first, crash)
    }

    /// A new process on the same journal: a new gate, every open effect recovered.
    fn restart(&mut self) -> Vec<ToolDone> {
        self.gate = Gate::new();
        self.gate.set_routes(["create_refund".to_string()]);
        let open = self.gate.open_effects(&mut self.j).unwrap();
        open.iter()
            .map(|id| {
                let first = self
                    .session
                    .recover(&mut self.gate, &mut self.j, self.now, id)
                    .unwrap();
                self.drive(first, None).unwrap()
            })
            .collect()
    }
}

fn args() -> Value {
    json!({"order_id": ORDER, "amount_cents": 2000})
}

#[test]
fn a_gated_call_reads_the_premises_sends_with_the_key_and_answers_the_model() {
    for results in [Results::Mcp, Results::Plain] {
        let mut w = World::new(Tier::ONE, "{}", results);
        let d = w.call(args(), None).unwrap();
        let o = d.outcome.clone().unwrap();
        assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
        assert!(
            !d.reply.is_error && d.reply.message.contains("happened once"),
            "{d:?}"
        );
        let id = o.effect_id.clone();
        let tools: Vec<&str> = w.calls.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(tools, ["get_order", "get_order", "create_refund"]);
        assert_eq!(w.calls[0].1, json!({"order_id": ORDER, "excluding": id}));
        assert_eq!(
            w.calls[2].1["reference"],
            json!(id),
            "the gate's key in the idempotency argument"
        );
        // The same call again: the first outcome, nothing sent.
        let again = w.call(args(), None).unwrap();
        assert!(again.outcome.unwrap().replayed);
        assert_eq!(w.pay.refund_count(), 1);
    }
}

#[test]
fn a_crash_after_the_send_is_closed_by_the_lookup_without_waiting_out_the_claim() {
    let mut w = World::new(Tier::TWO, LOOKUP, Results::Mcp);
    assert!(w.call(args(), Some(("create_refund", true))).is_none());
    let start = w.now;
    let [d] = <[ToolDone; 1]>::try_from(w.restart()).unwrap();
    let o = d.outcome.unwrap();
    assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
    assert_eq!(w.now, start, "the live claim was not waited out");
    assert_eq!(w.pay.refund_count(), 1);
    assert_eq!(w.calls.last().unwrap().0, "find_refund");
}

#[test]
fn a_failed_premise_read_or_a_bad_call_records_nothing_and_says_so() {
    let mut w = World::new(Tier::ONE, "{}", Results::Plain);
    w.fail_next = Some("get_order");
    let d = w.call(args(), None).unwrap();
    assert!(d.outcome.is_none() && d.reply.is_error);
    assert!(d.reply.message.starts_with(
        "create_refund was NOT done and nothing was recorded: the facts it rests on could not be read (get_order connection lost)"
    ), "{}", d.reply.message);
    assert_eq!(d.reply.outcome["error"]["kind"], "premise_read_failed");
    let d = w.call(json!({"amount_cents": 2000}), None).unwrap();
    assert_eq!(d.reply.outcome["error"]["field"], "/arguments/order_id");
    assert!(
        d.reply.message.contains("Fix the call"),
        "{}",
        d.reply.message
    );
    assert!(
        w.j.to_jsonl().lines().all(|l| l.contains("\"lease:")),
        "only the lease"
    );
    assert_eq!(w.pay.refund_count(), 0);
}

#[test]
fn the_tools_own_error_at_the_send_is_a_refusal_and_a_lost_answer_is_unknown() {
    let mut w = World::new(Tier::TWO, LOOKUP, Results::Mcp);
    // More than was paid: the service refuses it, as the tool's own error.
    let o = w
        .call(json!({"order_id": ORDER, "amount_cents": 20_000}), None)
        .unwrap()
        .outcome
        .unwrap();
    assert_eq!(
        (o.state, o.reason),
        (State::Refused, Some(Reason::TargetRejected))
    );

    let mut w = World::new(Tier::TWO, LOOKUP, Results::Plain);
    w.fail_next = Some("create_refund");
    let o = w.call(args(), None).unwrap().outcome.unwrap();
    assert_eq!(
        (o.state, o.reason),
        (State::Dispatched, Some(Reason::TargetUnavailable))
    );
    let [d] = <[ToolDone; 1]>::try_from(w.restart()).unwrap();
    // The lookup finds nothing, the re-check holds: sent again, once.
    assert_eq!(d.outcome.unwrap().state, State::Committed);
    assert_eq!(w.pay.refund_count(), 1);
}

#[test]
fn authority_at_start_standing_or_strict() {
    let bare = config(json!({}));
    let options = |strict| Options {
        agent: "support".into(),
        authority: None,
        strict,
        results: Results::Plain,
        wait: ClaimWait::default(),
    };
    let (_, started) = ToolSession::start(&bare, options(false)).unwrap();
    assert_eq!(started.standing, ["create_refund"]);
    match ToolSession::start(&bare, options(true)) {
        Err(GateError::InvalidField { field, .. }) => {
            assert_eq!(field, "/tools/create_refund/authority")
        }
        other => panic!("{other:?}"),
    }
    let bad = bare.replace("\"key\"", "\"kee\"");
    assert!(matches!(
        ToolSession::start(&bad, options(false)),
        Err(GateError::InvalidField { .. })
    ));
}

/// A world whose refunds over 1,000 cents wait for a person on route finance (alice@shop
/// and bob@shop, `needed` of them), the proxy's `decider` named (or not), with a lease for
/// each person.
fn people(decider: Option<&str>, needed: u64) -> World {
    let mut c: Value = serde_json::from_str(&config(json!({}))).unwrap();
    if let Some(d) = decider {
        c["decider"] = json!(d);
    }
    let mut w = World::with_config(Tier::ONE, c.to_string(), Results::Mcp);
    let rules = json!({
        "rules": [{"name": "large", "target": "create_refund",
                   "when": [{"field": "/effect/amount_cents", "over": 1000}],
                   "then": "person", "route": "finance", "approvers_needed": needed}],
        "routes": {"finance": {"primary_approvers": ["alice@shop", "bob@shop"]}}});
    w.gate
        .set_approval_rules(&mut w.j, T0, &rules.to_string())
        .unwrap();
    for p in ["alice@shop", "bob@shop"] {
        w.gate.grant_lease(&mut w.j, T0, p, T0 + 3_600_000).unwrap();
    }
    w
}

fn elicited(action: &str, content: Value) -> CallAnswer {
    CallAnswer::Returned(json!({"action": action, "content": content}).to_string())
}

fn decisions(w: &mut World, id: &str) -> Vec<Value> {
    let item = w.gate.item(&mut w.j, w.now, id).unwrap().unwrap();
    item["decisions"].as_array().unwrap().clone()
}

#[test]
fn a_person_asked_at_the_client_approves_and_the_call_is_sent_once_in_the_same_call() {
    let mut w = people(Some("alice@shop"), 1);
    w.person.push(elicited(
        "accept",
        json!({"verdict": "approve", "why": "known customer"}),
    ));
    let d = w.call(args(), None).unwrap();
    let o = d.outcome.clone().unwrap();
    assert_eq!(
        (o.state, o.executed),
        (State::Committed, Executed::Yes),
        "{d:?}"
    );
    assert!(!d.reply.is_error && d.reply.message.contains("happened once"));
    assert_eq!(w.pay.refund_count(), 1);
    // The question: what the call is, the rule and route, a flat form.
    let [q] = <[Value; 1]>::try_from(w.asked.clone()).unwrap();
    let m = q["message"].as_str().unwrap();
    for part in [
        "agent asks to call create_refund with {\"amount_cents\":2000,\"order_id\":\"order_881\"}",
        "Rule large",
        "route finance",
        &format!("item {}", o.effect_id),
        "It rests on {\"refunded_total\":0}",
        "You decide as alice@shop",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }
    assert_eq!(q["mode"], "form");
    let schema = &q["requestedSchema"];
    assert_eq!(
        schema["properties"]["verdict"]["enum"],
        json!(["approve", "reject"])
    );
    assert_eq!(schema["required"], json!(["verdict"]));
    assert!(schema["properties"]
        .as_object()
        .unwrap()
        .values()
        .all(|p| p["type"] == "string"));
    // Recorded as alice's decision, with why.
    let ds = decisions(&mut w, &o.effect_id);
    assert_eq!(ds.len(), 1);
    assert_eq!(
        (&ds[0]["decider"], &ds[0]["verdict"], &ds[0]["why"]),
        (
            &json!("alice@shop"),
            &json!("approve"),
            &json!("known customer")
        )
    );
    // The agent's same call again: the first outcome, nothing asked, nothing sent.
    let again = w.call(args(), None).unwrap();
    assert!(again.outcome.unwrap().replayed);
    assert_eq!((w.asked.len(), w.pay.refund_count()), (1, 1));
}

#[test]
fn a_person_who_rejects_at_the_client_stops_the_call_and_the_model_is_told_who_and_why() {
    let mut w = people(Some("bob@shop"), 1);
    w.person.push(elicited(
        "accept",
        json!({"verdict": "reject", "why": "refund window passed"}),
    ));
    let d = w.call(args(), None).unwrap();
    let o = d.outcome.clone().unwrap();
    assert_eq!(
        (o.state, o.reason, o.executed),
        (State::Refused, Some(Reason::ApprovalRejected), Executed::No)
    );
    let m = &d.reply.message;
    assert!(m.contains("a person (bob@shop) rejected it"), "{m}");
    assert!(m.contains("Their reason: \"refund window passed\"."), "{m}");
    assert_eq!(w.pay.refund_count(), 0);
    // Later calls say the same, without asking again.
    let again = w.call(args(), None).unwrap();
    assert!(again.reply.message.contains("refund window passed"));
    assert_eq!(w.asked.len(), 1);
}

#[test]
fn no_answer_at_the_client_leaves_the_call_pending_as_before() {
    let pending_text = |w: &mut World| {
        let d = w.call(args(), None).unwrap();
        let o = d.outcome.clone().unwrap();
        assert_eq!(
            (o.state, o.reason),
            (State::Proposed, Some(Reason::ApprovalPending))
        );
        d.reply.message
    };
    // No decider configured: nothing asked.
    let mut plain = people(None, 1);
    let before = pending_text(&mut plain);
    assert!(before.contains("pending a person's approval"), "{before}");
    assert!(plain.asked.is_empty());
    // Declined, cancelled, a client that cannot be asked: the same words, nothing decided.
    let mut w = people(Some("alice@shop"), 1);
    w.person.push(elicited("decline", Value::Null));
    w.person.push(elicited("cancel", Value::Null));
    for _ in 0..3 {
        assert_eq!(pending_text(&mut w), before);
    }
    assert_eq!(w.asked.len(), 3);
    let id = plain.call(args(), None).unwrap().outcome.unwrap().effect_id;
    assert!(decisions(&mut w, &id).is_empty());
    assert_eq!(w.pay.refund_count(), 0);
    // An answer that is no decision: pending, saying so.
    w.person
        .push(elicited("accept", json!({"verdict": "maybe"})));
    let m = pending_text(&mut w);
    assert!(m.starts_with(&before), "{m}");
    assert!(
        m.contains("the answer at the client was not a decision (verdict is Some(\"maybe\")"),
        "{m}"
    );
}

#[test]
fn a_decision_the_gate_refuses_is_not_recorded_and_the_call_stays_pending_saying_why() {
    // The decider's lease is revoked: they decide nothing, as everywhere.
    let mut w = people(Some("alice@shop"), 1);
    w.gate.revoke_lease(&mut w.j, T0, "alice@shop").unwrap();
    w.person.push(elicited(
        "accept",
        json!({"verdict": "approve", "why": "ok"}),
    ));
    let d = w.call(args(), None).unwrap();
    let o = d.outcome.clone().unwrap();
    assert_eq!(o.reason, Some(Reason::ApprovalPending));
    let m = &d.reply.message;
    assert!(m.contains("pending a person's approval"), "{m}");
    assert!(
        m.contains("alice@shop's decision at the client was not recorded: invalid input at /decider: alice@shop may not decide: their lease is revoked"),
        "{m}"
    );
    assert!(decisions(&mut w, &o.effect_id).is_empty());
    assert_eq!(w.pay.refund_count(), 0);

    // A decider not on the route is not asked at all.
    let mut w = people(Some("carol@shop"), 1);
    let d = w.call(args(), None).unwrap();
    assert!(w.asked.is_empty());
    assert!(
        d.reply.message.contains("carol@shop, who decides at the client, is not among its approvers now (alice@shop, bob@shop)"),
        "{}",
        d.reply.message
    );
}

#[test]
fn one_approval_of_two_needed_leaves_it_pending_and_the_decider_is_not_asked_twice() {
    let mut w = people(Some("alice@shop"), 2);
    w.person
        .push(elicited("accept", json!({"verdict": "approve"})));
    let d = w.call(args(), None).unwrap();
    let o = d.outcome.unwrap();
    assert_eq!(o.reason, Some(Reason::ApprovalPending));
    assert!(w.asked[0]["message"]
        .as_str()
        .unwrap()
        .contains("It needs 2 approvers."));
    let d = w.call(args(), None).unwrap();
    assert_eq!(w.asked.len(), 1, "alice approved already");
    assert!(
        d.reply.message.contains("alice@shop approved it already"),
        "{}",
        d.reply.message
    );
    // Bob approves in the inbox: the agent's next call is sent, once.
    let decision = json!({"item": o.effect_id, "decider": "bob@shop", "verdict": "approve"});
    w.gate
        .decide(&mut w.j, w.now, &decision.to_string())
        .unwrap();
    let d = w.call(args(), None).unwrap();
    assert_eq!(d.outcome.unwrap().state, State::Committed);
    assert_eq!(w.pay.refund_count(), 1);
}

#[test]
fn the_decider_is_a_name_at_the_top_of_the_configuration() {
    let mut c: Value = serde_json::from_str(&config(json!({}))).unwrap();
    c["decider"] = json!(7);
    let options = Options {
        agent: "agent".into(),
        authority: None,
        strict: false,
        results: Results::Mcp,
        wait: ClaimWait::default(),
    };
    match ToolSession::start(&c.to_string(), options) {
        Err(GateError::InvalidField { field, .. }) => assert_eq!(field, "/decider"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_approval_on_facts_that_changed_goes_back_and_the_decider_is_asked_with_what_changed() {
    let mut w = people(Some("alice@shop"), 1);
    // Bob approves in the inbox; then a person refunds 500 by hand before the agent calls.
    let id = w.call(args(), None).unwrap().outcome.unwrap().effect_id;
    let decision = json!({"item": id, "decider": "bob@shop", "verdict": "approve"});
    w.gate
        .decide(&mut w.j, w.now, &decision.to_string())
        .unwrap();
    w.pay.refund(ORDER, 500, None, None, w.now).unwrap();
    w.person.push(elicited(
        "accept",
        json!({"verdict": "approve", "why": "still fine"}),
    ));
    let d = w.call(args(), None).unwrap();
    let o = d.outcome.unwrap();
    assert_eq!(o.state, State::Committed, "{}", d.reply.message);
    let m = w.asked.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("It rests on {\"refunded_total\":500}. It was approved before, and what it rests on changed since: refunded_total was 0, is now 500."),
        "{m}"
    );
    // The first call found no one to ask (no answer queued): two questions in all.
    assert_eq!(w.asked.len(), 2);
    assert_eq!(w.pay.refund_count(), 2, "the one by hand, and ours once");
}
