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
}

impl World {
    fn new(tier: Tier, extra: &str, results: Results) -> World {
        let mut pay = Payments::in_memory(tier);
        pay.add_order(ORDER, 10_000).unwrap();
        let mut gate = Gate::new();
        let mut j = MemJournal::new();
        gate.grant_lease(&mut j, T0, "case-4471", T0 + 3_600_000)
            .unwrap();
        let (session, started) = ToolSession::start(
            &config(serde_json::from_str(extra).unwrap()),
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
fn a_crash_after_the_send_waits_out_the_claim_then_the_lookup_finds_it() {
    let mut w = World::new(Tier::TWO, LOOKUP, Results::Mcp);
    assert!(w.call(args(), Some(("create_refund", true))).is_none());
    let start = w.now;
    let [d] = <[ToolDone; 1]>::try_from(w.restart()).unwrap();
    let o = d.outcome.unwrap();
    assert_eq!((o.state, o.executed), (State::Committed, Executed::Yes));
    assert!(
        w.now > start + 1000,
        "the live claim was waited out: {}",
        w.now - start
    );
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
