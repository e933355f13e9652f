//! The world the vectors script: the simulated payments service (the tier rules are the
//! `interlock-payments-sim` crate's, as in every host), premise reads and host checks that
//! fail on cue, and the targets the current process reaches. It answers the gate's steps,
//! and tells the host's `note` what it did, for a person watching.

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use interlock_payments_sim::{Payments, Reply as PayReply};
use serde_json::{json, Value};

use crate::interlock::conformance::driver;
use crate::interlock::gate::target::{Ask, Reply};
use crate::{ORDER, PAYMENTS};

pub struct World {
    pub payments: Payments,
    /// The next this many premise reads (captures) fail.
    pub failing_reads: u64,
    /// The next this many host checks (authorize steps) cannot be made.
    pub failing_checks: u64,
    /// The targets the current process reaches (`restart.routes`), else every target.
    pub routes: Option<Vec<String>>,
    /// A tool-gating vector's tools (the payments service's, as an MCP server offers them).
    pub tools: Option<crate::run::ToolWorld>,
}

/// Sends an event to the host's `note`.
pub fn note(event: Value) {
    driver::note(&event.to_string());
}

/// An ask's request as JSON, field names as in wit/target.wit (snake case).
pub fn ask_json(ask: &Ask) -> (&'static str, Value) {
    match ask {
        Ask::Capture(r) => (
            "capture",
            json!({"effect_id": r.effect_id, "target": r.target, "effect": r.effect, "names": r.names}),
        ),
        Ask::Authorize(r) => (
            "authorize",
            json!({"effect_id": r.effect_id, "target": r.target, "effect": r.effect, "agent": r.agent}),
        ),
        Ask::Apply(r) => (
            "apply",
            json!({"effect_id": r.effect_id, "target": r.target, "effect": r.effect,
                   "idempotency_key": r.idempotency_key, "attempt": r.attempt}),
        ),
        Ask::Query(r) => (
            "query",
            json!({"effect_id": r.effect_id, "target": r.target, "effect": r.effect}),
        ),
        Ask::Done(o) => ("done", json!({"effect_id": o.effect_id})),
        Ask::Sleep(ms) => ("sleep", json!({"ms": ms})),
        Ask::Crash(_) => ("crash", Value::Null),
    }
}

/// A reply as JSON: `{"tag": case, "val": payload}` (case names as in wit/target.wit).
fn reply_json(reply: &Reply) -> Value {
    let (tag, val) = match reply {
        Reply::Captured(j) => ("captured", json!(j)),
        Reply::Allowed(b) => ("allowed", json!(b)),
        Reply::Applied(j) => ("applied", json!(j)),
        Reply::Rejected(s) => ("rejected", json!(s)),
        Reply::Unknown(s) => ("unknown", json!(s)),
        Reply::Found(j) => ("found", json!(j)),
        Reply::NotFound => ("not-found", Value::Null),
        Reply::Failed(s) => ("failed", json!(s)),
        Reply::Slept => ("slept", Value::Null),
    };
    json!({"tag": tag, "val": val})
}

/// The service's answer as the gate's reply: the same cases, one for one.
fn reply(r: PayReply) -> Reply {
    match r {
        PayReply::Captured(j) => Reply::Captured(j),
        PayReply::Applied(j) => Reply::Applied(j),
        PayReply::Rejected(c) => Reply::Rejected(c),
        PayReply::Unknown(c) => Reply::Unknown(c),
        PayReply::Found(j) => Reply::Found(j),
        PayReply::NotFound => Reply::NotFound,
        PayReply::Failed(c) => Reply::Failed(c),
    }
}

impl World {
    pub fn new(payments: Payments) -> World {
        World {
            payments,
            failing_reads: 0,
            failing_checks: 0,
            routes: None,
            tools: None,
        }
    }

    /// What the current process tells the gate it reaches; by default every target: the
    /// payments service, and each gated tool (a tool's effects are routed by its name).
    pub fn routes(&self) -> Vec<String> {
        self.routes.clone().unwrap_or_else(|| {
            let mut all = vec![PAYMENTS.to_string()];
            if let Some(t) = &self.tools {
                all.extend(t.gated.iter().cloned());
            }
            all
        })
    }

    pub fn refunded_cents(&self) -> u64 {
        self.payments.refunded_cents(ORDER)
    }

    /// Answers the step `ask` (not `done`) at `now_ms`. The gate asks only for targets
    /// the process routes; another one is a bug of the gate, never answered.
    pub fn answer(&mut self, ask: &Ask, now_ms: u64) -> Reply {
        let reply = match ask {
            Ask::Capture(r) => {
                assert_eq!(r.target, PAYMENTS, "the gate asked for an unrouted target");
                if self.failing_reads > 0 {
                    self.failing_reads -= 1;
                    Reply::Failed("the order system did not answer".into())
                } else {
                    reply(self.payments.capture(&r.effect_id, &r.effect, &r.names))
                }
            }
            // The host's own authority check allows, unless `fail_checks` says it fails.
            Ask::Authorize(_) => {
                if self.failing_checks > 0 {
                    self.failing_checks -= 1;
                    Reply::Failed("check unavailable".into())
                } else {
                    Reply::Allowed(true)
                }
            }
            Ask::Apply(r) => {
                assert_eq!(r.target, PAYMENTS, "the gate asked for an unrouted target");
                reply(
                    self.payments
                        .apply(&r.effect_id, &r.effect, &r.idempotency_key, now_ms),
                )
            }
            Ask::Query(r) => {
                assert_eq!(r.target, PAYMENTS, "the gate asked for an unrouted target");
                reply(self.payments.query(&r.effect_id, &r.effect))
            }
            Ask::Sleep(_) | Ask::Crash(_) => {
                unreachable!("the runner's recoveries never wait, and it sets no crash point")
            }
            Ask::Done(_) => unreachable!("a done step asks nothing"),
        };
        let (name, request) = ask_json(ask);
        note(json!({"kind": "reply", "name": name, "request": request,
                    "reply": reply_json(&reply), "refunded_cents": self.refunded_cents()}));
        reply
    }
}
