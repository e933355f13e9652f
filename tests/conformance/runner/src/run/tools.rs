//! Tool-gating vectors (issue 14): the agent's tool calls, run as every host's MCP proxy and
//! `protect()` run them: through the gate's tool-gating machine (`tools`: `start`, `call`,
//! `resume`, `recover`; imported, forwarded by the host to the current worker's gate
//! instance), calling the tool each step names and handing back its answer. Only the
//! calling of tools is here; every mapping and every message is the gate's.
//!
//! The world's tools are the payments service's, as an MCP server offers them, each
//! answering an MCP `CallToolResult`: `get_order {order_id, excluding?}` -> `{order_id,
//! eligible, refunded_total}` (refunds whose reference is `excluding` left out),
//! `create_refund {order_id, amount_cents, reference?}` -> `{refund_id, order_id,
//! amount_cents}` (the reference is the service's idempotency key where the tier dedupes),
//! `find_refund {reference}` -> `{found: refund | null}`. A failure is `isError` with the
//! service's code.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{json, Value};

use super::{check, gate_error_case, Run, Stop, Task};
use crate::interlock::conformance::driver;
use crate::interlock::gate::gate::GateError;
use crate::interlock::gate::target::CallAnswer;
use crate::interlock::gate::tools::{self as gt, Results, ToolDone, ToolOptions, ToolStep};
use crate::interlock::gate::types::Outcome;
use crate::world::{note, World};
use crate::{field, str_field, Res};

/// Who proposes a tool-gating vector's calls (the proxy's `--agent`).
const AGENT: &str = "refund-agent";

/// A tool-gating vector's side of the world: its configuration, the tools it gates, and
/// every tool call the service received.
pub struct ToolWorld {
    /// The configuration as JSON text, given to every mapping call as is.
    pub config: String,
    pub gated: Vec<String>,
    /// `{"tool", "arguments"}` for each call the service received, in order.
    pub calls: Vec<Value>,
}

impl World {
    /// A call of `tool` at the service: its MCP `CallToolResult`.
    pub fn call_tool(&mut self, tool: &str, arguments: &Value, now_ms: u64) -> Value {
        if let Some(t) = self.tools.as_mut() {
            t.calls.push(json!({"tool": tool, "arguments": arguments}));
        }
        let result = self.tool_result(tool, arguments, now_ms);
        note(
            json!({"kind": "tool", "tool": tool, "arguments": arguments, "result": result,
                    "refunded_cents": self.refunded_cents()}),
        );
        result
    }

    fn tool_result(&mut self, tool: &str, args: &Value, now_ms: u64) -> Value {
        let s = |k: &str| args.get(k).and_then(Value::as_str);
        match tool {
            "get_order" => {
                let Some(order) = s("order_id") else {
                    return error_result("invalid_arguments: field=\"/order_id\"");
                };
                if self.failing_reads > 0 {
                    self.failing_reads -= 1;
                    return error_result("unavailable: the order system did not answer");
                }
                match self.payments.premises(order, s("excluding")) {
                    Ok(p) => ok_result(json!({"order_id": order, "eligible": p["eligible"],
                                              "refunded_total": p["refunded_by_others_cents"]})),
                    Err(e) => error_result(&e.detail()),
                }
            }
            "create_refund" => {
                let amount = args.get("amount_cents").and_then(Value::as_u64);
                let (Some(order), Some(amount)) = (s("order_id"), amount) else {
                    return error_result("invalid_arguments: order_id and amount_cents");
                };
                let reference = s("reference");
                match self
                    .payments
                    .refund(order, amount, reference, reference, now_ms)
                {
                    Ok(r) => ok_result(json!({"refund_id": r.id, "order_id": r.order,
                                              "amount_cents": r.amount_cents})),
                    Err(e) => error_result(&e.detail()),
                }
            }
            "find_refund" => {
                let Some(reference) = s("reference") else {
                    return error_result("invalid_arguments: field=\"/reference\"");
                };
                match self.payments.find_by_reference(reference) {
                    Ok(found) => ok_result(json!({"found": found.map(|r| json!({
                        "refund_id": r.id, "order_id": r.order, "amount_cents": r.amount_cents}))})),
                    Err(e) => error_result(&e.detail()),
                }
            }
            other => error_result(&format!("unknown_tool: name={other:?}")),
        }
    }
}

/// How a call ended for the model.
pub(super) enum Played {
    /// The gate decided; the reply to the model is the component's.
    Outcome(Outcome, ToolDone),
    /// Refused before the gate was asked (a bad call, a failed premise read), or not gated
    /// and passed through: nothing recorded. As the vectors spell it.
    Before(Value),
}

/// A gate error as the vectors spell it: its case, and the JSON pointer of an invalid field.
fn error_json(e: &GateError) -> Value {
    match e {
        GateError::InvalidField(f) => json!({"case": "invalid-field", "field": f.field}),
        other => json!({"case": gate_error_case(other)}),
    }
}

/// A refusal before the gate, as the machine words it (`{"error": {"kind", ...}}`), as
/// the vectors spell it.
fn before_json(outcome: &Value) -> Value {
    let e = &outcome["error"];
    match e["kind"].as_str() {
        Some("invalid_field") => json!({"error": {"case": "invalid-field", "field": e["field"]}}),
        Some("premise_tool_error") => {
            let answer = match &e["answer"] {
                Value::String(s) => json!(s),
                other => json!(other.to_string()),
            };
            json!({"error": {"case": "premise-tool", "answer": answer}})
        }
        Some(kind) => json!({"error": {"case": kind}}),
        None => json!({"error": {"case": "unknown"}}),
    }
}

fn ok_result(value: Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}],
           "structuredContent": value, "isError": false})
}

fn error_result(code: &str) -> Value {
    json!({"content": [{"type": "text", "text": code}], "isError": true})
}

impl Run {
    /// The options every worker's tool gating starts with.
    fn tool_options(&self, strict: bool) -> ToolOptions {
        ToolOptions {
            agent: AGENT.into(),
            authority: self.host_authority.as_ref().map(Value::to_string),
            strict,
            results: Results::Mcp,
            wait: None,
        }
    }

    /// Starts the vector's tool gating on the current worker (each worker is a fresh gate
    /// instance), and tells it what it routes.
    pub(super) fn start_worker_tools(&mut self) -> Res<()> {
        let Some(config) = self.world.tools.as_ref().map(|t| t.config.clone()) else {
            return Ok(());
        };
        self.call("tools.start", json!([config]));
        gt::start(&config, &self.tool_options(self.strict))
            .map_err(|e| format!("the vector's config: {e:?}"))?;
        crate::interlock::gate::gate::set_routes(&self.world.routes());
        Ok(())
    }

    /// The reply to the model, added to the outcome as the vectors spell it: `is_error`,
    /// `message` and `reply_outcome`.
    pub(super) fn add_reply(&self, done: &ToolDone, seen: &mut Value) {
        seen["is_error"] = json!(done.reply.is_error);
        seen["message"] = json!(done.reply.message);
        seen["reply_outcome"] = serde_json::from_str(&done.reply.outcome).unwrap_or(Value::Null);
    }

    /// Drives the tool-gating machine from `first`: each tool it names is called at the
    /// service, each sleep waited on the fake clock, until the call is done (or the worker
    /// dies at the gate's crash point).
    pub(super) fn drive_tools(&mut self, first: ToolStep) -> Result<ToolDone, Stop> {
        let mut step = first;
        loop {
            let (id, answer) = match step {
                ToolStep::Done(d) => return Ok(d),
                ToolStep::Crash(_) => {
                    note(json!({"kind": "crash", "worker": self.worker}));
                    return Err(Stop::Crashed);
                }
                ToolStep::Sleep((id, ms)) => {
                    driver::advance_ms(ms);
                    (id, CallAnswer::Slept)
                }
                // No person at a conformance run: the call answers pending.
                ToolStep::Ask(q) => (
                    q.id,
                    CallAnswer::Failed("the conformance runner asks no person".into()),
                ),
                ToolStep::Call(req) => {
                    let args: Value = serde_json::from_str(&req.call.arguments).map_err(|e| {
                        format!("the machine gave arguments that are not JSON: {e}")
                    })?;
                    let now = driver::now_ms();
                    let result = self.world.call_tool(&req.call.tool, &args, now);
                    (req.id, CallAnswer::Returned(result.to_string()))
                }
            };
            self.call("tools.resume", json!([id]));
            step = gt::resume(id, &answer).map_err(|e| format!("tools.resume: {e:?}"))?;
        }
    }

    /// Recovers one open effect of a gated tool through the machine (waiting out a live
    /// claim).
    pub(super) fn recover_tool(&mut self, effect: &str) -> Result<ToolDone, Stop> {
        self.call("tools.recover", json!([effect]));
        let first = gt::recover(effect).map_err(|e| format!("tools.recover: {e:?}"))?;
        self.drive_tools(first)
    }

    /// The model calls `tool` with `arguments` (its task's call): the host's loop.
    pub(super) fn play_call(&mut self, name: &str) -> Result<Played, Stop> {
        let (tool, args) = self.tasks[name]
            .call
            .clone()
            .ok_or_else(|| format!("task {name:?} is not a tool call"))?;
        self.host();
        let gated = self
            .world
            .tools
            .as_ref()
            .is_some_and(|t| t.gated.contains(&tool));
        if !gated {
            // Not an effect: the call goes to the service untouched.
            let now = driver::now_ms();
            let result = self.world.call_tool(&tool, &args, now);
            return Ok(Played::Before(json!({"passed_through": result})));
        }
        self.call("tools.call", json!([tool, args]));
        let first = match gt::call(&tool, &args.to_string()) {
            Err(e) => return Ok(Played::Before(json!({"error": error_json(&e)}))),
            Ok(s) => s,
        };
        let done = self.drive_tools(first)?;
        Ok(match done.outcome.clone() {
            Some(o) => Played::Outcome(o, done),
            None => {
                let outcome: Value =
                    serde_json::from_str(&done.reply.outcome).unwrap_or(Value::Null);
                Played::Before(before_json(&outcome))
            }
        })
    }

    /// The task's last result when the gate was never asked (a bad call, a pass-through).
    pub(super) fn record_before(&mut self, name: &str, v: &Value) {
        let t = self.tasks.get_mut(name).expect("a known task");
        t.finished = true;
        t.last = Some(v.clone());
    }

    /// `call`: the model calls a tool (a new task, or its task's call again).
    pub(super) fn tool_call(&mut self, step: &Value) -> Res<()> {
        let name = str_field(step, "task")?.to_string();
        let call = (
            str_field(step, "tool")?.to_string(),
            field(step, "arguments")?.clone(),
        );
        match self.tasks.get_mut(&name) {
            Some(t) => t.call = Some(call),
            None => {
                let task = Task {
                    proposal: Value::Null,
                    finished: false,
                    last: None,
                    call: Some(call),
                };
                self.tasks.insert(name.clone(), task);
                self.order.push(name.clone());
            }
        }
        let crash = match step.get("crash").and_then(Value::as_str) {
            None => None,
            Some("before_intent") => {
                self.die();
                return Ok(());
            }
            Some(point) => Some(super::crash_point(point)?),
        };
        let journal = self.journal_sha256();
        let refunds = self.world.payments.refund_count();
        self.host();
        self.crash_at(crash);
        let played = self.play_call(&name);
        self.crash_at(None);
        let got = match played {
            Err(Stop::Crashed) => {
                self.die();
                return Ok(());
            }
            Err(Stop::Failed(e)) => return Err(format!("call {name}: {e}")),
            Ok(Played::Outcome(o, done)) => {
                if crash.is_some() {
                    self.failures
                        .push(format!("call {name}: the crash point was never reached"));
                }
                self.record(&name, &o, Some(&done))?
            }
            Ok(Played::Before(v)) => {
                if self.journal_sha256() != journal {
                    self.failures.push(format!(
                        "call {name}: refused before the gate, yet the journal changed"
                    ));
                }
                if self.world.payments.refund_count() != refunds {
                    self.failures.push(format!(
                        "call {name}: refused before the gate, yet a refund was made"
                    ));
                }
                self.record_before(&name, &v);
                v
            }
        };
        if let Some(want) = step.get("expect") {
            self.failures
                .extend(check(&format!("call {name}"), &got, want));
        }
        Ok(())
    }

    /// `check_config`: the configuration is checked as a host checks it at start (`start`,
    /// with the host's authority when the step gives it; `null`: none); nothing is
    /// recorded. The worker then gates the vector's own configuration again.
    pub(super) fn check_config(&mut self, step: &Value) -> Res<()> {
        let config = match field(step, "config")? {
            Value::String(text) => text.clone(),
            v => v.to_string(),
        };
        let journal = self.journal_sha256();
        self.host();
        let mut options =
            self.tool_options(step.get("strict") == Some(&Value::Bool(true)) || self.strict);
        // With `authority` (the host's; `null`: none) checked as given; without it, every
        // tool's authority is the host's default lease (a tool needs none of its own).
        options.authority = match step.get("authority") {
            Some(a) if !a.is_null() => Some(a.to_string()),
            Some(_) => None,
            None => Some(json!({"lease": crate::LEASE}).to_string()),
        };
        self.call("tools.start", json!([config]));
        let got = match gt::start(&config, &options) {
            Ok(started) => json!({"gated": started.gated}),
            Err(e) => json!({"error": error_json(&e)}),
        };
        note(
            json!({"kind": "gate", "worker": self.worker, "name": "tools.checkConfig",
                    "args": [config], "out": got}),
        );
        if let Some(want) = step.get("expect") {
            self.failures.extend(check("check_config", &got, want));
        }
        if self.journal_sha256() != journal {
            self.failures
                .push("check_config: the journal changed".into());
        }
        self.start_worker_tools()
    }

    /// A tool-gating vector's world: its configuration checked and started (by the gate),
    /// the gated tools routed.
    pub(super) fn start_tools(&mut self, config: &Value) -> Res<()> {
        let text = config.to_string();
        let started = gt::start(&text, &self.tool_options(self.strict))
            .map_err(|e| format!("the vector's config: {e:?}"))?;
        self.world.tools = Some(ToolWorld {
            config: text,
            gated: started.gated,
            calls: Vec::new(),
        });
        crate::interlock::gate::gate::set_routes(&self.world.routes());
        Ok(())
    }
}
